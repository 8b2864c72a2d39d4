// The console's entry point: a hash router over the views, the sign-in gate and the failure banner.

import { can, scopesOf, session, ApiError, UnreachableError } from './api.js';
import { h, replace } from './dom.js';
import { zoneName } from './format.js';
import { signInView } from './signin.js';
import { jobsView } from './jobs.js';
import { jobView } from './job.js';
import { runView } from './run.js';
import { newJobView, editJobView } from './form.js';
import { calendarsView, calendarView, calendarFormView } from './calendars.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const banner = document.getElementById('banner');

const ROUTES = [
  [/^#\/jobs\/?$/, (view) => jobsView(main, view)],
  [/^#\/new$/, (view) => writer(() => newJobView(main, view, navigate))],
  [/^#\/jobs\/([^/]+)\/edit$/, (view, id) => writer(() => editJobView(main, view, id, navigate))],
  [/^#\/jobs\/([^/]+)$/, (view, id) => jobView(main, view, id, navigate)],
  [/^#\/runs\/([^/]+)$/, (view, id) => runView(main, view, id)],
  [/^#\/calendars\/?$/, (view) => calendarsView(main, view)],
  [/^#\/new-calendar$/, (view) => writer(() => calendarFormView(main, view, null, navigate))],
  [/^#\/calendars\/([^/]+)\/edit$/, (view, name) => writer(() => calendarFormView(main, view, name, navigate))],
  [/^#\/calendars\/([^/]+)$/, (view, name) => calendarView(main, view, name, navigate)],
];

// The job form, for a key that may change jobs; any other is told why there is none (the API would refuse).
function writer(show) {
  if (can('jobs:write')) return show();
  replace(main, h('h1', { tabindex: '-1' }, 'Read only'),
    h('p', {}, 'This API key cannot create or change jobs: it lacks the scope jobs:write.'),
    h('p', {}, h('a', { href: '#/jobs' }, 'Back to the jobs')));
  return undefined;
}

// One per page shown: its polling stops when the user goes elsewhere.
class View {
  constructor() { this.alive = true; this.timer = null; }
  stop() { this.alive = false; this.stopPolling(); }
  stopPolling() { clearTimeout(this.timer); this.timer = null; this.polling = false; }
  poll(ms, task) {
    this.polling = true;
    const tick = async () => {
      if (!this.alive || !this.polling) return;
      try {
        await task();
      } catch (error) {
        this.fail(error);
        return;
      }
      if (this.alive && this.polling) this.timer = setTimeout(tick, ms);
    };
    this.timer = setTimeout(tick, ms);
  }
  fail(error) { if (this.alive) failed(error); }
}

let current = null;

function navigate(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

async function render() {
  if (current) current.stop();
  const view = new View();
  current = view;
  hideBanner();
  if (!session.key) {
    nav.hidden = true;
    signInView(main, () => navigate(location.hash && location.hash !== '#/' ? location.hash : '#/jobs'));
    return;
  }
  nav.hidden = false;
  const hash = location.hash || '#/jobs';
  const route = ROUTES.find(([pattern]) => pattern.test(hash));
  if (!route) { navigate('#/jobs'); return; }
  const args = hash.match(route[0]).slice(1).map(decodeURIComponent);
  try {
    if (session.scopes === null) session.save(session.key, await scopesOf());  // signed in before scopes existed
    document.getElementById('nav-new').hidden = !can('jobs:write');
    await route[1](view, ...args);
    if (view.alive) focusHeading();
  } catch (error) {
    view.fail(error);
  }
}

function focusHeading() {
  const heading = main.querySelector('h1');
  if (heading && !main.contains(document.activeElement)) heading.focus({ preventScroll: true });
}

function failed(error) {
  if (error instanceof ApiError && error.status === 401) {
    session.forget();
    current.stop();
    nav.hidden = true;
    signInView(main, () => render(), `Signed out: the API refused the key (${error.message}).`);
    return;
  }
  if (error instanceof ApiError && error.status === 404) {
    replace(main, h('h1', { tabindex: '-1' }, 'Not found'), h('p', {}, `The API answered: ${error.message}.`),
      h('p', {}, h('a', { href: '#/jobs' }, 'Back to the jobs')));
    return;
  }
  const text = error instanceof UnreachableError
    ? `The Tickwork API at ${location.origin} cannot be reached. It may be down, or the connection lost.`
    : error instanceof ApiError ? `The API answered ${error.status}: ${error.message}.` : `Something went wrong: ${error.message}`;
  showBanner(text);
}

function showBanner(text) {
  const retry = h('button', { type: 'button', onclick: () => render() }, 'Retry');
  replace(banner, h('p', {}, text), retry);
  banner.hidden = false;
  retry.focus();
}

function hideBanner() {
  banner.hidden = true;
  replace(banner);
}

document.getElementById('sign-out').addEventListener('click', () => {
  session.forget();
  render();
});
window.addEventListener('hashchange', render);
document.querySelector('.top').append(h('span', { class: 'zone muted' }, `Times in ${zoneName()}`));
render();

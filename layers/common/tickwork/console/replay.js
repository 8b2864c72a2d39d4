// Replay a window of a job's runs (POST /jobs/{id}/replay): since and until in the browser's time zone, and
// which runs (failed, lost, missed by default). "Check" asks for a dry run (how many, when they would go);
// "Replay N runs" then sends the same request for real, under an Idempotency-Key drawn for that check, so a
// double click or a resend after a lost answer replays the window once.

import { api, ApiError, UnreachableError } from './api.js';
import { h, replace, field, fieldErrors } from './dom.js';
import { absTime, inputTime, fromInputTime, zoneName } from './format.js';

// The window offered when the form opens: the last 24 hours, to the next whole minute.
const DEFAULT_WINDOW_MS = 24 * 60 * 60 * 1000;
const MINUTE_MS = 60 * 1000;
// [status, checked at first]: the API's default statuses are checked; `skipped` (the overlap policy's or a
// calendar's choice, not a failure) is offered unchecked.
const STATUSES = [['failed', true], ['lost', true], ['missed', true], ['skipped', false]];
const PANEL_ID = 'replay-panel';

// The form, hidden until its button (put among the job's actions by the caller) opens it. `onReplayed` is
// called once runs were queued (the job page refreshes its runs then).
export function replayPanel(jobPath, view, onReplayed) {
  const since = h('input', { type: 'datetime-local', id: 'replay-since', name: 'since', step: 1, 'aria-describedby': 'replay-since-hint' });
  const until = h('input', { type: 'datetime-local', id: 'replay-until', name: 'until', step: 1, 'aria-describedby': 'replay-until-hint' });
  const boxes = STATUSES.map(([status, checked]) => h('input', { type: 'checkbox', name: 'statuses', value: status, checked }));
  // Focusable (tabindex -1) so that an error naming `statuses` can take the focus to it, as to any field.
  const statuses = h('fieldset', { class: 'statuses', id: 'replay-statuses', tabindex: '-1' }, h('legend', {}, 'Runs that are'),
    boxes.map((box) => h('label', {}, box, ` ${box.value}`)),
    h('p', { class: 'field-error', id: 'replay-statuses-error', hidden: true }));
  const controls = new Map([['since', since], ['until', until], ['statuses', statuses]]);
  const formError = h('p', { class: 'form-error', role: 'alert', hidden: true });
  const check = h('button', { type: 'submit' }, 'Check');
  const close = h('button', { type: 'button' }, 'Close');
  // Not role=status: the job page has one (its notice) already; this is a live region of its own. Focusable:
  // the confirm button pressed goes away, and the focus goes to what it did.
  const result = h('p', { class: 'replay-result', 'aria-live': 'polite', tabindex: '-1' });
  const confirm = h('button', { type: 'button', hidden: true });
  const zone = zoneName();
  const form = h('form', { novalidate: true, 'aria-labelledby': 'h-replay' },
    h('h2', { id: 'h-replay' }, 'Replay runs'),
    h('p', { class: 'muted' }, 'The job\'s runs of a window are sent again as the same runs, one after the other in slot order, at the tenant\'s replay pace.'),
    formError,
    h('div', { class: 'replay-window' },
      field('Since', since, `runs scheduled at or after this time (${zone})`),
      field('Until', until, `and before this time, at most 31 days after Since (${zone})`)),
    statuses,
    h('div', { class: 'actions' }, check, close),
    result, confirm);
  const element = h('section', { id: PANEL_ID, class: 'replay-panel', hidden: true }, form);
  const button = h('button', { type: 'button', 'aria-expanded': 'false', 'aria-controls': PANEL_ID,
    onclick: () => (element.hidden ? open() : hide()) }, 'Replay runs');
  const errors = fieldErrors(controls, formError);
  // The last check's request and the Idempotency-Key its replay is sent with: forgotten when the form changes.
  let checked = null;

  function reset() {
    const end = Math.ceil(Date.now() / MINUTE_MS) * MINUTE_MS;
    until.value = inputTime(end);
    since.value = inputTime(end - DEFAULT_WINDOW_MS);
    boxes.forEach((box, i) => { box.checked = STATUSES[i][1]; });
    errors.clearAll();
    forget();
  }
  function open() {
    reset();
    element.hidden = false;
    button.setAttribute('aria-expanded', 'true');
    since.focus();
  }
  function hide() {
    element.hidden = true;
    button.setAttribute('aria-expanded', 'false');
    button.focus();
  }
  function forget() {
    checked = null;
    confirm.hidden = true;
    replace(result);
  }
  // An error of the API's that names a field (or the form's own checks) beside it; a refused key or a
  // server error as everywhere else (the page's banner); a replay whose answer was lost, in the form.
  function failed(error, unanswered) {
    if (error instanceof ApiError && error.status < 500 && error.status !== 401) errors.show(error);
    else if (error instanceof UnreachableError && unanswered) errors.show({ field: null, message: unanswered });
    else view.fail(error);
  }

  form.addEventListener('input', forget);
  close.addEventListener('click', hide);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    errors.clearAll();
    forget();
    let ask;
    try { ask = request(since, until, boxes); } catch (error) { failed(error); return; }
    check.disabled = true;
    try {
      const answer = await api('POST', `${jobPath}/replay`, { ...ask, dry_run: true });
      if (!view.alive) return;
      result.textContent = wouldGo(answer);
      if (answer.count > 0) {
        checked = { ask, key: uuid() };
        confirm.textContent = `Replay ${runs(answer.count)}`;
        confirm.hidden = false;
      }
    } catch (error) {
      failed(error);
    } finally {
      check.disabled = false;
    }
  });
  confirm.addEventListener('click', async () => {
    if (!checked || confirm.disabled) return;
    confirm.disabled = true;  // at once: a second click of a double click finds it disabled
    errors.clearAll();
    try {
      const answer = await api('POST', `${jobPath}/replay`, { ...checked.ask, dry_run: false },
        { headers: { 'Idempotency-Key': checked.key } });
      if (!view.alive) return;
      forget();
      result.textContent = queued(answer);
      result.focus();
      onReplayed();
    } catch (error) {
      // The check is kept: sent again, under the same key, the request replays the window at most once.
      failed(error, 'No answer from the Tickwork API: the runs may have been queued. Press the button again:'
        + ' it sends the same request, which replays them once.');
    } finally {
      confirm.disabled = false;
    }
  });
  return { button, element };
}

// The request body the form asks for, or an ApiError naming the field that cannot be sent.
function request(since, until, boxes) {
  const span = { since: fromInputTime(since.value), until: fromInputTime(until.value) };
  for (const name of ['since', 'until']) {
    if (!span[name]) throw new ApiError(400, 'invalid_request', 'enter a date and a time', name);
  }
  const statuses = boxes.filter((box) => box.checked).map((box) => box.value);
  if (!statuses.length) throw new ApiError(400, 'invalid_request', 'check at least one', 'statuses');
  return { ...span, statuses };
}

const runs = (count) => `${count} ${count === 1 ? 'run' : 'runs'}`;

function wouldGo(answer) {
  if (!answer.count) return 'No run in this window matches.';
  const [from, to] = times(answer);
  return `${runs(answer.count)} would be sent again, ${to ? `from ${from} to ${to}` : from}.`;
}

function queued(answer) {
  if (!answer.count) return 'No run was queued: the runs of this window changed since the check (they ended or were replayed).';
  const [from, to] = times(answer);
  return `${runs(answer.count)} queued, ${to ? `the first at ${from}, the last at ${to}` : from}.`;
}

// When the first and the last go, as the console shows times (to the second); `to` is null when one time
// says it: one run, or a few at the replay pace (10 a second by default) all within one second.
function times(answer) {
  const [from, to] = [absTime(answer.first_at), absTime(answer.last_at)];
  if (answer.count === 1) return [`at ${from}`, null];
  return from === to ? [`all at ${from} (within that second)`, null] : [from, to];
}

// A random UUID: crypto.randomUUID where the page is a secure context (https, localhost), else drawn by hand.
function uuid() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;  // version 4
  bytes[8] = (bytes[8] & 0x3f) | 0x80;  // RFC 4122 variant
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// Create or edit a job. The schedule is previewed as it is typed (POST /schedules/preview, next 5 times);
// an error the API returns is shown at the field it names.

import { api, ApiError } from './api.js';
import { h, replace, field, fieldErrors, link } from './dom.js';
import { absTime } from './format.js';

const PREVIEW_DELAY_MS = 300;
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

// [API field, input id, label, control factory, hint]
const FIELDS = [
  ['name', 'f-name', 'Name', () => h('input', { type: 'text', required: true, maxlength: 200 })],
  ['schedule', 'f-schedule', 'Schedule', () => h('input', { type: 'text', required: true, autocomplete: 'off', spellcheck: 'false' }),
    'cron (5 or 6 fields), rate(5 minutes), at(2030-01-01T09:00:00) or words like "every day at 09:30"'],
  ['timezone', 'f-timezone', 'Time zone', () => h('input', { type: 'text', list: 'zones', autocomplete: 'off', value: 'UTC' })],
  ['spread_seconds', 'f-spread', 'Spread (seconds)', () => h('input', { type: 'number', min: 0, max: 3600, inputmode: 'numeric', value: '0' }),
    'each run moves later by this job\'s own offset, 0 up to this many seconds (from its id; the same after edits)'],
  ['request.method', 'f-method', 'Method', () => h('select', {}, METHODS.map((m) => h('option', { value: m }, m)))],
  ['request.url', 'f-url', 'URL', () => h('input', { type: 'url', required: true, spellcheck: 'false' })],
  ['request.headers', 'f-headers', 'Headers', () => h('textarea', { rows: 3, spellcheck: 'false' }),
    'one per line, "Name: value"; secret values show as *** and are kept when sent back unchanged'],
  ['request.body', 'f-body', 'Body', () => h('textarea', { rows: 3, spellcheck: 'false' }), 'sent as is; empty for none'],
  ['request.timeout_seconds', 'f-timeout', 'Timeout (seconds)', () => h('input', { type: 'number', min: 1, inputmode: 'numeric' })],
  ['retry.strategy', 'f-strategy', 'Retry strategy', () => h('select', {}, ['exponential', 'linear', 'fixed'].map((m) => h('option', { value: m }, m)))],
  ['retry.max_attempts', 'f-attempts', 'Attempts in all', () => h('input', { type: 'number', min: 1, max: 10, inputmode: 'numeric' })],
  ['retry.delay_seconds', 'f-delay', 'Retry delay (seconds)', () => h('input', { type: 'number', min: 1, inputmode: 'numeric' })],
  ['overlap', 'f-overlap', 'When a run is still going', () => h('select', {},
    [['allow', 'allow: run both'], ['skip', 'skip the new one'], ['queue_one', 'queue_one: run it after']].map(([v, t]) => h('option', { value: v }, t)))],
  ['catchup', 'f-catchup', 'After an outage', () => h('select', {},
    [['latest', 'latest: run the latest slot'], ['all', 'all: run every slot']].map(([v, t]) => h('option', { value: v }, t)))],
  ['catchup_window_seconds', 'f-window', 'Catch-up window (seconds)', () => h('input', { type: 'number', min: 0, inputmode: 'numeric' })],
  ['start_at', 'f-start', 'Start at (RFC 3339, optional)', () => h('input', { type: 'text', placeholder: '2030-01-01T00:00:00Z', spellcheck: 'false' })],
  ['end_at', 'f-end', 'End at (RFC 3339, optional)', () => h('input', { type: 'text', placeholder: '2030-12-31T00:00:00Z', spellcheck: 'false' })],
  ['max_runs', 'f-max-runs', 'Max runs (optional)', () => h('input', { type: 'number', min: 1, inputmode: 'numeric' }),
    'scheduled runs sent before the job ends (manual runs, replays, skipped and missed slots do not count)'],
  ['end_action', 'f-end-action', 'Once its last run ended', () => h('select', {},
    [['none', 'none: keep it, completed'], ['delete', 'delete: delete it, its runs kept']].map(([v, t]) => h('option', { value: v }, t)))],
  ['calendar.exclude', 'f-calendars', 'Not on the dates of calendars (optional)', () => h('input', { type: 'text', placeholder: 'us-holidays', spellcheck: 'false' }),
    'calendar names, comma-separated (PUT /calendars/{name}); dates on the job\'s time zone'],
  ['calendar.on_excluded', 'f-on-excluded', 'On an excluded date', () => h('select', {},
    [['skip', 'skip: record the run skipped'], ['next_day', 'next_day: run on the next date not excluded']].map(([v, t]) => h('option', { value: v }, t)))],
  ['completion.mode', 'f-completion', 'A run ends', () => h('select', {},
    [['response', 'response: with the answer'], ['callback', 'callback: when the target calls its Tickwork-Callback-Url']].map(([v, t]) => h('option', { value: v }, t)))],
  ['completion.timeout_seconds', 'f-completion-timeout', 'Callback timeout (seconds)', () => h('input', { type: 'number', min: 1, max: 86400, inputmode: 'numeric' }),
    'callback only: how long a run awaits its callback before its attempt fails (default 3600)'],
];
const CALENDAR = ['calendar.exclude', 'calendar.on_excluded'];
const NUMBERS = new Set(['request.timeout_seconds', 'retry.max_attempts', 'retry.delay_seconds', 'catchup_window_seconds',
  'spread_seconds', 'completion.timeout_seconds', 'max_runs']);
// Optional numbers an edit clears when emptied (null: the API's none).
const CLEARABLE = new Set(['completion.timeout_seconds', 'max_runs']);

export async function newJobView(main, view, navigate) {
  renderForm(main, view, null, navigate);
}

export async function editJobView(main, view, id, navigate) {
  const job = await api('GET', `/jobs/${encodeURIComponent(id)}`);
  if (view.alive) renderForm(main, view, job, navigate);
}

function renderForm(main, view, job, navigate) {
  const controls = new Map();
  const fields = FIELDS.map(([name, id, label, make, hint]) => {
    const control = make();
    control.id = id;
    control.name = name;
    if (hint) control.setAttribute('aria-describedby', `${id}-hint`);
    controls.set(name, control);
    return field(label, control, hint);
  });
  const initial = job ? valuesOf(job) : {};
  for (const [name, value] of Object.entries(initial)) controls.get(name).value = value;
  // Callback mode alone takes a timeout (the API refuses one in response mode; withCompletion leaves it out):
  // disabled otherwise, so none is typed only to be dropped.
  const mode = controls.get('completion.mode');
  const offerTimeout = () => { controls.get('completion.timeout_seconds').disabled = mode.value !== 'callback'; };
  mode.addEventListener('change', offerTimeout);
  offerTimeout();
  const preview = h('div', { class: 'preview', id: 'preview', 'aria-live': 'polite' });
  const formError = h('p', { class: 'form-error', role: 'alert', hidden: true });
  const submit = h('button', { type: 'submit' }, job ? 'Save changes' : 'Create job');
  const form = h('form', { class: 'job-form', novalidate: true },
    formError, fields.slice(0, 4), preview, h('fieldset', {}, h('legend', {}, 'Request'), fields.slice(4, 9)),
    h('fieldset', {}, h('legend', {}, 'Retries, overlap and catch-up'), fields.slice(9, 15)),
    h('fieldset', {}, h('legend', {}, 'Window, end and calendars'), fields.slice(15, 21)),
    h('fieldset', {}, h('legend', {}, 'Completion'), fields.slice(21)),
    h('div', { class: 'actions' }, submit, job ? link('Cancel', 'jobs', job.id) : link('Cancel', 'jobs')));
  const zones = h('datalist', { id: 'zones' }, (Intl.supportedValuesOf ? Intl.supportedValuesOf('timeZone') : ['UTC'])
    .concat(['UTC']).map((z) => h('option', { value: z })));
  replace(main, h('h1', { tabindex: '-1' }, job ? `Edit ${job.name}` : 'New job'), form, zones);
  document.title = `${job ? 'Edit job' : 'New job'} · Tickwork`;

  // Typing a schedule or a zone refreshes the preview: its errors are shown without taking the focus away.
  const errors = fieldErrors(controls, formError, [controls.get('schedule'), controls.get('timezone')]);
  let pending = null;
  let asked = 0;
  const refreshPreview = async () => {
    const ask = ++asked;
    const schedule = controls.get('schedule').value.trim();
    if (!schedule) { replace(preview); return; }
    try {
      // An edited job's own id: its H and its spread offset are what the preview shows.
      const spread = Number(controls.get('spread_seconds').value.trim() || '0');
      const result = await api('POST', '/schedules/preview', { schedule, timezone: controls.get('timezone').value.trim() || 'UTC', count: 5,
        spread_seconds: spread, ...(job ? { job_id: job.id } : {}) });
      if (ask !== asked || !view.alive) return;
      errors.clear('schedule'); errors.clear('timezone'); errors.clear('spread_seconds');
      const example = !job && (spread > 0 || /(^|[\s,])H/i.test(schedule));
      replace(preview, h('p', {}, h('strong', {}, 'Runs '), result.description),
        h('ol', { class: 'times' }, result.fire_times.map((t) => h('li', {}, absTime(t.utc), h('span', { class: 'rel' }, `${t.local} in the schedule's zone`)))),
        example ? h('p', { class: 'muted' }, 'For an example job: H and the spread offset come from the id the job gets when created.') : null);
    } catch (error) {
      if (ask !== asked || !view.alive) return;
      if (error instanceof ApiError && error.status === 400) {
        replace(preview, h('p', { class: 'muted' }, 'No preview: the schedule cannot be used yet.'));
        errors.show(error);
      } else view.fail(error);
    }
  };
  const schedulePreview = () => { clearTimeout(pending); pending = setTimeout(refreshPreview, PREVIEW_DELAY_MS); };
  controls.get('schedule').addEventListener('input', schedulePreview);
  controls.get('timezone').addEventListener('input', schedulePreview);
  controls.get('spread_seconds').addEventListener('input', schedulePreview);
  if (job) refreshPreview();

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    errors.clearAll();
    let body;
    try {
      body = job ? changes(readValues(controls), initial) : creation(readValues(controls));
    } catch (error) {
      if (error instanceof ApiError) { errors.show(error); return; }
      throw error;
    }
    submit.disabled = true;
    try {
      const saved = job ? await api('PATCH', `/jobs/${encodeURIComponent(job.id)}`, body) : await api('POST', '/jobs', body);
      navigate(`#/jobs/${encodeURIComponent(saved.id)}`);
    } catch (error) {
      if (error instanceof ApiError && error.status < 500 && error.status !== 401) errors.show(error);
      else view.fail(error);
    } finally {
      submit.disabled = false;
    }
  });
}

function valuesOf(job) {
  const r = job.request;
  return {
    name: job.name, schedule: job.schedule, timezone: job.timezone, 'request.method': r.method, 'request.url': r.url,
    'request.headers': Object.entries(r.headers || {}).map(([k, v]) => `${k}: ${v}`).join('\n'),
    'request.body': r.body ?? '', 'request.timeout_seconds': String(r.timeout_seconds),
    'retry.strategy': job.retry.strategy, 'retry.max_attempts': String(job.retry.max_attempts),
    'retry.delay_seconds': String(job.retry.delay_seconds), overlap: job.overlap, catchup: job.catchup,
    catchup_window_seconds: String(job.catchup_window_seconds), spread_seconds: String(job.spread_seconds), start_at: job.start_at ?? '', end_at: job.end_at ?? '',
    'completion.mode': job.completion?.mode ?? 'response',
    'completion.timeout_seconds': job.completion?.timeout_seconds ? String(job.completion.timeout_seconds) : '',
    max_runs: job.max_runs == null ? '' : String(job.max_runs), end_action: job.end_action ?? 'none',
    'calendar.exclude': (job.calendar?.exclude ?? []).join(', '), 'calendar.on_excluded': job.calendar?.on_excluded ?? 'skip',
  };
}

function readValues(controls) {
  return Object.fromEntries([...controls].map(([name, control]) => [name, control.value]));
}

function parseHeaders(text) {
  const headers = {};
  for (const line of text.split('\n').map((l) => l.trim()).filter(Boolean)) {
    const colon = line.indexOf(':');
    if (colon < 1) throw new ApiError(400, 'invalid_request', 'each line must be "Name: value"', 'request.headers');
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return headers;
}

function typed(name, text) {
  if (name === 'request.headers') return parseHeaders(text);
  if (name === 'request.body') return text === '' ? null : text;
  if (name === 'start_at' || name === 'end_at') return text.trim() === '' ? null : text.trim();
  if (NUMBERS.has(name)) {
    if (!/^\s*-?\d+\s*$/.test(text)) throw new ApiError(400, 'invalid_request', 'a whole number is needed', name);
    return Number(text);
  }
  return name === 'name' ? text : text.trim();
}

// The two calendar fields are one API field: null without names.
function calendarOf(values) {
  const exclude = values['calendar.exclude'].split(',').map((n) => n.trim()).filter(Boolean);
  return exclude.length ? { exclude, on_excluded: values['calendar.on_excluded'] } : null;
}

function put(body, name, value) {
  const [outer, inner] = name.split('.');
  if (inner === undefined) body[outer] = value;
  else (body[outer] ??= {})[inner] = value;
}

// A new job: the values given; empty optional fields are left to the API's defaults.
function creation(values) {
  const body = {};
  for (const [name, text] of Object.entries(values)) {
    if (CALENDAR.includes(name)) continue;
    const optional = NUMBERS.has(name) || ['request.headers', 'request.body', 'start_at', 'end_at'].includes(name);
    if (optional && text.trim() === '') continue;
    put(body, name, typed(name, text));
  }
  if (!body.request?.body && body.request?.method === 'GET') delete body.request.body;
  const calendar = calendarOf(values);
  if (calendar) body.calendar = calendar;
  return withCompletion(body, values);
}

// `completion` is replaced as a whole: sent with both of its fields, a timeout only for callback mode.
function withCompletion(body, values) {
  if (!body.completion) return body;
  body.completion = { mode: values['completion.mode'] };
  const timeout = values['completion.timeout_seconds'].trim();
  if (body.completion.mode === 'callback' && timeout !== '') body.completion.timeout_seconds = typed('completion.timeout_seconds', timeout);
  return body;
}

// An edit: only what changed, so an unchanged schedule does not restart the job.
function changes(values, initial) {
  const body = {};
  for (const [name, text] of Object.entries(values)) {
    if (text !== initial[name] && !CALENDAR.includes(name)) {
      put(body, name, CLEARABLE.has(name) && text.trim() === '' ? null : typed(name, text));
    }
  }
  if (CALENDAR.some((name) => values[name] !== initial[name])) body.calendar = calendarOf(values);
  return withCompletion(body, values);
}

// One job: its settings, next 10 fire times, a chart of recent runs, the paged runs table, its recent changes
// (the audit log) and its actions.

import { api, can, query, ApiError } from './api.js';
import { h, replace, link, badge, definitions } from './dom.js';
import { absTime, relTime, runStats, percent, duration, lagMs, durationMs } from './format.js';
import { runChart, MEASURES } from './chart.js';
import { replayPanel } from './replay.js';

const RECENT = 50;
const PAGE = 20;
const REFRESH_MS = 3000;
const UPCOMING = 10;
const CHANGES = 20;
// A changed value longer than this is cut (its full text is the cell's title).
const VALUE_CHARS = 60;

export async function jobView(main, view, id, navigate) {
  const path = `/jobs/${encodeURIComponent(id)}`;
  let job = await api('GET', path);
  if (!view.alive) return;
  const title = h('h1', { tabindex: '-1' });
  const status = h('span');
  const errored = h('p', { class: 'errored', role: 'status', hidden: true });
  const actions = h('div', { class: 'actions' });
  const notice = h('p', { class: 'notice', role: 'status', 'aria-live': 'polite' });
  const settings = h('div');
  const upcoming = h('div');
  const chart = h('div');
  const stats = h('p', { class: 'stats' });
  let measure = 'duration';
  let recent = [];
  const measures = h('fieldset', { class: 'measure' }, h('legend', {}, 'Bar height'),
    Object.entries(MEASURES).map(([value, [label]]) => h('label', {},
      h('input', { type: 'radio', name: 'measure', value, checked: value === measure,
        onchange: () => { measure = value; replace(chart, runChart(recent, measure)); } }), ` ${label}`)));
  const runs = runsTable(id, view);
  const changes = changesTable(id, view);
  const confirm = deleteDialog(async () => {
    if (await act(() => api('DELETE', path).then(() => true), null)) navigate('#/jobs');
  });
  // Replaying a window of runs: its runs show in the table at once (and as they go, with its refreshes).
  const replay = replayPanel(path, view, () => guard(refreshAll()));
  replace(main, 
    h('p', { class: 'crumbs' }, link('Jobs', 'jobs')),
    h('div', { class: 'title-row' }, title, status), errored, actions, notice, replay.element,
    h('section', { 'aria-labelledby': 'h-recent' }, h('h2', { id: 'h-recent' }, 'Recent runs'), stats, measures, chart),
    h('section', { 'aria-labelledby': 'h-runs' }, h('h2', { id: 'h-runs' }, 'Runs'), runs.element),
    h('div', { class: 'columns' },
      h('section', { 'aria-labelledby': 'h-settings' }, h('h2', { id: 'h-settings' }, 'Settings'), settings),
      h('section', { 'aria-labelledby': 'h-next' }, h('h2', { id: 'h-next' }, `Next ${UPCOMING} runs`), upcoming)),
    h('section', { 'aria-labelledby': 'h-changes' }, h('h2', { id: 'h-changes' }, 'Changes'), changes.element),
    confirm.element);

  const guard = (promise) => promise.catch((error) => view.fail(error));
  async function act(call, message) {
    notice.textContent = '';
    try {
      const result = await call();
      if (message) replace(notice, ...[].concat(message(result)));
      return result;
    } catch (error) {
      if (!(error instanceof ApiError) || error.status === 401) view.fail(error);
      else notice.textContent = `${error.message} (${error.code})`;
      return undefined;
    }
  }

  const button = (label, onclick, attrs = {}) => h('button', { type: 'button', ...attrs, onclick }, label);
  const showJob = async (fresh, force) => {
    // runs_sent moves with each scheduled run sent, not with the job's version: its settings row follows it.
    const changed = force || fresh.version !== job.version || fresh.status !== job.status || fresh.updated_at !== job.updated_at
      || fresh.runs_sent !== job.runs_sent;
    job = fresh;
    title.textContent = job.name;
    document.title = `${job.name} · Tickwork`;
    replace(status, badge(job.status));
    showErrored(errored, job);
    if (!changed) return;
    const paused = job.status === 'paused';
    // Pause and Resume swap places: keep the keyboard focus on the one that replaced the button pressed.
    const focused = actions.contains(document.activeElement);
    // Only what the key's scopes allow is offered (a read-only key gets no buttons at all).
    const writes = can('jobs:write');
    const toggle = !writes ? null : job.status === 'active' || job.status === 'errored'
      ? button('Pause', () => guard(act(() => api('POST', `${path}/pause`), () => 'Paused.').then(refreshJob)))
      : paused ? button('Resume', () => guard(act(() => api('POST', `${path}/resume`), () => 'Resumed.').then(refreshJob))) : null;
    // A job in quarantine is tried again at once by any change to it: resuming it is the plainest.
    const retry = writes && job.status === 'errored'
      ? button('Try again now', () => guard(act(() => api('POST', `${path}/resume`), () => 'Released: it runs from its next slot.')
        .then(refreshJob))) : null;
    replace(actions,
      writes ? h('a', { class: 'button', href: `#/jobs/${encodeURIComponent(id)}/edit` }, 'Edit') : null, retry, toggle,
      can('runs:write') ? button('Run now', () => guard(act(() => api('POST', `${path}/run`), (run) => ['Run queued: ',
        h('a', { href: `#/runs/${encodeURIComponent(run.id)}` }, 'open it'), '.']).then(refreshAll))) : null,
      can('runs:write') ? replay.button : null,
      writes ? button('Delete', () => confirm.open(job.name), { class: 'danger' }) : null);
    if (focused && toggle) toggle.focus();
    replace(settings, settingsList(job));
    replace(upcoming, await nextRuns(job));
  };
  const refreshJob = async (result) => { if (result) await showJob(result, true); };
  const refreshRecent = async () => {
    const page = await api('GET', `${path}/executions${query({ limit: RECENT })}`);
    if (!view.alive) return;
    const figures = runStats(page.items);
    stats.textContent = page.items.length
      ? `Last ${page.items.length} runs: ${percent(figures.successRate)} succeeded, fire lag p50 ${duration(figures.lagP50)}.`
      : 'No runs yet.';
    recent = page.items;
    replace(chart, runChart(recent, measure));
  };
  const refreshAll = async () => {
    const fresh = await api('GET', path);
    if (!view.alive) return;
    await Promise.all([showJob(fresh, false), refreshRecent(), runs.refresh(), changes.refresh()]);
  };
  await Promise.all([showJob(job, true), refreshRecent(), runs.refresh(), changes.refresh()]);
  view.poll(REFRESH_MS, refreshAll);
}

function settingsList(job) {
  const request = job.request;
  const headers = Object.entries(request.headers || {});
  return definitions([
    ['Schedule', [h('span', {}, job.schedule_description), ' ', h('code', {}, job.schedule)]],
    ['Time zone', job.timezone],
    job.spread_seconds ? ['Spread', `up to ${job.spread_seconds} s (this job's offset is in its next runs)`] : null,
    job.start_at ? ['Starts', absTime(job.start_at)] : null,
    job.end_at ? ['Ends', absTime(job.end_at)] : null,
    job.max_runs != null ? ['Runs sent', `${job.runs_sent} of ${job.max_runs} (max runs)`] : null,
    job.end_action === 'delete' ? ['Once ended', 'deleted, its runs kept'] : null,
    ['Request', h('code', { class: 'wrap' }, `${request.method} ${request.url}`)],
    ['Headers', headers.length ? h('ul', { class: 'plain' }, headers.map(([k, v]) => h('li', {}, h('code', { class: 'wrap' }, `${k}: ${v}`)))) : 'none'],
    request.body !== null ? ['Body', h('pre', {}, request.body)] : null,
    ['Timeout', `${request.timeout_seconds} s`],
    ['Retry', `${job.retry.strategy}, ${job.retry.max_attempts} attempts, delay ${job.retry.delay_seconds} s`],
    ['Overlap', job.overlap],
    ['Catch-up', `${job.catchup}, window ${job.catchup_window_seconds} s`],
    job.calendar ? ['Calendars', `not on dates of ${job.calendar.exclude.join(', ')}: ${job.calendar.on_excluded === 'next_day'
      ? 'runs on the next date not excluded' : 'recorded skipped'}`] : null,
    job.completion?.mode === 'callback' ? ['Completion',
      `by callback: a run ends when its target calls its Tickwork-Callback-Url, within ${job.completion.timeout_seconds} s`] : null,
    ['Version', job.version],
    ['Created', absTime(job.created_at)],
    ['Updated', absTime(job.updated_at)],
    ['Id', h('code', {}, job.id)],
    job.key ? ['Key', h('code', {}, job.key)] : null,
    job.source ? ['Managed by', [h('code', {}, job.source), ' ',
      h('span', { class: 'muted' }, '(a change made here is undone by its next apply or stack update)')]] : null,
  ]);
}

// A job the scheduler set aside (its handling raised): why, since when, and what releases it.
function showErrored(element, job) {
  element.hidden = job.status !== 'errored';
  if (element.hidden) return;
  replace(element, h('strong', {}, 'Set aside by the scheduler'), ` since ${absTime(job.errored_at)}: ${job.error_reason}. `,
    'It is tried again after a growing pause; a change to the job or to a calendar it names releases it now.');
}

async function nextRuns(job) {
  if (job.status === 'completed') return h('p', { class: 'muted' }, 'Completed: no more runs.');
  if (job.status === 'errored') return h('p', { class: 'muted' }, 'Set aside: its next run waits for its retry or a release.');
  let preview;
  try {
    const body = { schedule: job.schedule, timezone: job.timezone, count: UPCOMING, start_at: job.start_at, end_at: job.end_at,
      job_id: job.id, spread_seconds: job.spread_seconds };
    if (job.calendar) body.calendar = job.calendar;
    preview = await api('POST', '/schedules/preview', body);
  } catch (error) {
    if (error instanceof ApiError && error.status === 400) return h('p', { class: 'muted' }, 'No more runs.');
    throw error;
  }
  return h('div', {}, job.status === 'paused' ? h('p', { class: 'muted' }, 'Paused: these slots will not run unless it is resumed.') : null,
    h('ol', { class: 'times' }, preview.fire_times.map((t) => h('li', {}, absTime(t.utc), h('span', { class: 'rel' }, relTime(t.utc)),
      calendarNote(t)))));
}

// A slot a calendar skips or moved: said beside its time.
function calendarNote(slot) {
  if (slot.excluded_by) return h('span', { class: 'muted' }, ` skipped: excluded by ${slot.excluded_by}`);
  if (slot.moved_from) return h('span', { class: 'muted' }, ` moved from ${absTime(slot.moved_from)}`);
  return null;
}

function setText(element, value) {
  const text = String(value);
  if (element.textContent !== text) element.textContent = text;
}

function deleteDialog(onDelete) {
  const dialog = h('dialog', { 'aria-labelledby': 'delete-title' });
  const name = h('strong');
  const cancel = h('button', { type: 'button', onclick: () => dialog.close() }, 'Cancel');
  const remove = h('button', { type: 'button', class: 'danger', onclick: async () => { dialog.close(); await onDelete(); } }, 'Delete job');
  dialog.append(h('h2', { id: 'delete-title' }, 'Delete this job?'),
    h('p', {}, 'The job ', name, ' stops running at once. Its runs stay readable.'),
    h('div', { class: 'actions' }, cancel, remove));
  // Cancel first and focused: Enter or Escape right away deletes nothing.
  return { element: dialog, open(jobName) { name.textContent = jobName; dialog.showModal(); cancel.focus(); } };
}

// The runs table, newest first, paged with the API's cursors; the status code comes from each run's attempts.
function runsTable(id, view) {
  const body = h('tbody');
  const pager = h('div', { class: 'pager' });
  const cursors = [null];
  let page = 0;
  const codes = new Map();
  const element = h('div', {}, h('div', { class: 'table-wrap' }, h('table', { class: 'data' },
    h('caption', { class: 'visually-hidden' }, 'Runs'),
    h('thead', {}, h('tr', {}, ['Scheduled', 'Status', 'Attempts', 'Lag', 'Duration', 'Status code'].map((t) => h('th', { scope: 'col' }, t)))),
    body)), pager);

  async function statusCode(run, cell) {
    if (!run.attempt_count || !run.finished_at) return;  // a finished run's attempts no longer change
    if (!codes.has(run.id)) {
      const detail = await api('GET', `/executions/${encodeURIComponent(run.id)}`);
      const lastAttempt = detail.attempts.at(-1);
      codes.set(run.id, lastAttempt && lastAttempt.status_code !== null ? String(lastAttempt.status_code) : 'none');
    }
    setText(cell, codes.get(run.id));
  }
  // Rows are kept by run id and updated in place, so a refresh never swaps the node under a click or takes
  // the keyboard focus from a link. While the pointer is over the table, rows are neither added, removed nor
  // moved (the row under it stays put until it leaves); their cells still update.
  const rows = new Map();
  const empty = h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No runs yet.'));
  const waiting = h('p', { class: 'muted held', 'aria-live': 'polite', hidden: true });
  let latest = { shown: [], nextCursor: null };
  let pointerInside = false;
  element.prepend(waiting);
  element.addEventListener('pointerenter', () => { pointerInside = true; });
  element.addEventListener('pointerleave', () => { pointerInside = false; place(); });
  function runRow(run) {
    let row = rows.get(run.id);
    if (!row) {
      const cell = (label) => h('td', { 'data-label': label });
      row = { status: cell('Status'), attempts: cell('Attempts'), lag: cell('Lag'), duration: cell('Duration'),
        code: h('td', { 'data-label': 'Status code' }, '—'), shownStatus: null };
      row.element = h('tr', {},
        h('th', { scope: 'row', 'data-label': 'Scheduled' }, h('a', { href: `#/runs/${encodeURIComponent(run.id)}` }, absTime(run.scheduled_for)),
          run.trigger === 'manual' ? h('span', { class: 'rel' }, 'manual') : null),
        row.status, row.attempts, row.lag, row.duration, row.code);
      rows.set(run.id, row);
    }
    if (row.shownStatus !== run.status) { replace(row.status, badge(run.status)); row.shownStatus = run.status; }
    setText(row.attempts, run.attempt_count);
    setText(row.lag, duration(lagMs(run)));
    setText(row.duration, duration(durationMs(run)));
    return row;
  }
  function place(force = false) {
    const { shown, nextCursor } = latest;
    const kept = new Set(shown.map((row) => row.element));
    const changed = shown.some((row, i) => body.children[i] !== row.element) || body.children.length !== shown.length;
    if (changed && pointerInside && !force && body.querySelector('a')) {
      const newer = shown.filter((row) => !row.element.isConnected).length;
      waiting.textContent = newer ? `${newer} newer ${newer === 1 ? 'run' : 'runs'}: shown when the pointer leaves the table.`
        : 'Runs changed: shown when the pointer leaves the table.';
      waiting.hidden = false;
      return;
    }
    waiting.hidden = true;
    for (const [runId, row] of rows) if (!kept.has(row.element)) rows.delete(runId);
    for (const child of [...body.children]) if (!kept.has(child)) child.remove();
    // Only what is out of place moves: a row already where it belongs is never detached.
    shown.forEach((row, i) => { if (body.children[i] !== row.element) body.insertBefore(row.element, body.children[i] || null); });
    if (!shown.length) body.append(empty);
    const buttons = [page > 0 ? 'newer' : null, nextCursor ? 'older' : null].filter(Boolean).join();
    if (pager.dataset.buttons !== buttons) {
      pager.dataset.buttons = buttons;
      replace(pager,
        page > 0 ? h('button', { type: 'button', onclick: () => go(page - 1) }, 'Newer runs') : '',
        nextCursor ? h('button', { type: 'button', onclick: () => go(page + 1) }, 'Older runs') : '');
    }
  }
  // `force`: the user asked for another page, so it is shown even under the pointer.
  async function refresh(force = false) {
    const result = await api('GET', `/jobs/${encodeURIComponent(id)}/executions${query({ limit: PAGE, cursor: cursors[page] })}`);
    if (!view.alive) return;
    cursors[page + 1] = result.next_cursor;
    latest = { shown: result.items.map(runRow), nextCursor: result.next_cursor };
    place(force);
    await Promise.all(result.items.map((run, i) => statusCode(run, latest.shown[i].code)));
  }
  async function go(to) {
    page = to;
    try { await refresh(true); } catch (error) { view.fail(error); }
  }
  return { element, refresh: () => (page === 0 ? refresh() : Promise.resolve()) };
}

// The job's last changes from the audit log, newest first: when, what, which key, and each field before and after.
// A key without audit:read gets the entries without who and the values (the list says `redacted`): the fields
// changed are listed, and a note says why the rest is not.
function changesTable(id, view) {
  const body = h('tbody');
  const note = h('p', { class: 'muted', hidden: true },
    'Who made each change and the values before and after are shown to a key with the scope audit:read.');
  const element = h('div', {}, note, h('div', { class: 'table-wrap changes' }, h('table', { class: 'data' },
    h('caption', { class: 'visually-hidden' }, 'Changes'),
    h('thead', {}, h('tr', {}, ['When', 'Action', 'By', 'Changed'].map((t) => h('th', { scope: 'col' }, t)))),
    body)));
  let shown = null;
  async function refresh() {
    const page = await api('GET', `/audit${query({ job_id: id, limit: CHANGES })}`);
    if (!view.alive) return;
    const latest = page.items.map((entry) => entry.id).join();
    if (latest === shown) return;  // nothing new: the rows (and any selection in them) stay
    shown = latest;
    note.hidden = !page.redacted;
    replace(body, page.items.length ? page.items.map((entry) => changeRow(entry, page.redacted))
      : h('tr', {}, h('td', { colspan: 4, class: 'muted' }, 'No changes recorded.')));
  }
  return { element, refresh };
}

function changeRow(entry, redacted) {
  const who = redacted ? h('span', { class: 'muted' }, '—')
    : entry.key_name || (entry.key_id ? h('code', {}, entry.key_id.slice(0, 8)) : 'Tickwork');
  const where = [entry.client_ip, entry.request_id && `request ${entry.request_id}`].filter(Boolean).join(', ');
  return h('tr', {},
    h('th', { scope: 'row', 'data-label': 'When' }, absTime(entry.at), h('span', { class: 'rel' }, relTime(entry.at))),
    h('td', { 'data-label': 'Action' }, entry.action.replace(/^job\./, '')),
    h('td', { 'data-label': 'By', title: where || null }, who),
    h('td', { 'data-label': 'Changed' }, changedFields(entry, redacted)));
}

function changedFields(entry, redacted) {
  const changes = entry.changes || [];
  const omitted = entry.changes_omitted ? ` (and ${entry.changes_omitted} more not kept)` : '';
  if (entry.action === 'job.created') return `${changes.length + (entry.changes_omitted || 0)} fields set`;
  if (entry.action === 'job.run' || entry.action === 'job.replayed') {
    return entry.target && !entry.target.includes('/') ? h('a', { href: `#/runs/${encodeURIComponent(entry.target)}` }, 'the run')
      : entry.target || '';
  }
  if (!changes.length) return '';
  const line = (c) => (redacted ? [h('code', {}, c.field)]
    : [h('code', {}, c.field), ': ', shownValue(c, 'before'), ' → ', shownValue(c, 'after')]);
  return [h('ul', { class: 'plain' }, changes.map((c) => h('li', { class: 'wrap' }, ...line(c)))), omitted];
}

// A value as recorded; a long one was kept as its size and SHA-256 (`digested`), shown so.
function shownValue(change, side) {
  const value = change[side];
  if ((change.digested || []).includes(side)) {
    return h('span', { title: `SHA-256 ${value.sha256}` }, `${value.size.toLocaleString('en')} bytes, sha256 ${value.sha256.slice(0, 12)}…`);
  }
  const text = value === null || value === undefined ? '—' : typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > VALUE_CHARS ? h('span', { title: text }, `${text.slice(0, VALUE_CHARS - 1)}…`) : text;
}

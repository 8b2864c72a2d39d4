// The jobs table: name, schedule in words, zone, status, next run, last run, success rate and fire lag p50
// over each job's last 50 runs (computed here from GET /jobs/{id}/executions), filtered by status and name.

import { api, can, query, ApiError } from './api.js';
import { h, replace, link, badge } from './dom.js';
import { absTime, relTime, runStats, percent, duration } from './format.js';

const PAGE = 200;
const RECENT = 50;
const REFRESH_MS = 15000;
const PARALLEL = 4;

export async function jobsView(main, view) {
  const statusFilter = h('select', { id: 'filter-status' },
    ['all', 'active', 'errored', 'paused', 'completed'].map((s) => h('option', { value: s }, s)));
  const nameFilter = h('input', { id: 'filter-name', type: 'search', autocomplete: 'off' });
  const body = h('tbody');
  const summary = h('p', { class: 'muted', 'aria-live': 'polite' });
  const more = h('div', { class: 'pager' });
  const table = h('table', { class: 'data' },
    h('caption', { class: 'visually-hidden' }, 'Jobs'),
    h('thead', {}, h('tr', {}, ['Name', 'Schedule', 'Time zone', 'Status', 'Next run', 'Last run', 'Success (last 50)', 'Lag p50']
      .map((t) => h('th', { scope: 'col' }, t)))), body);
  const applyFilter = () => {
    const name = nameFilter.value.trim().toLowerCase();
    let shown = 0;
    for (const row of body.rows) {
      const visible = (statusFilter.value === 'all' || row.dataset.status === statusFilter.value)
        && row.dataset.name.toLowerCase().includes(name);
      row.hidden = !visible;
      shown += visible ? 1 : 0;
    }
    summary.textContent = `${shown} of ${body.rows.length} jobs shown.`;
  };
  statusFilter.addEventListener('change', applyFilter);
  nameFilter.addEventListener('input', applyFilter);
  replace(main, 
    h('div', { class: 'title-row' }, h('h1', { tabindex: '-1' }, 'Jobs'),
      can('jobs:write') ? h('a', { class: 'button', href: '#/new' }, 'New job') : null),
    h('form', { class: 'filters', role: 'search', onsubmit: (e) => e.preventDefault() },
      h('div', { class: 'field' }, h('label', { for: 'filter-status' }, 'Status'), statusFilter),
      h('div', { class: 'field' }, h('label', { for: 'filter-name' }, 'Name contains'), nameFilter)),
    summary, h('div', { class: 'table-wrap' }, table), more);

  const load = async () => {
    const page = await api('GET', `/jobs${query({ limit: PAGE })}`);
    if (!view.alive) return;
    replace(body, ...page.items.map(jobRow));
    replace(more, page.next_cursor ? h('p', { class: 'muted' }, `Showing the newest ${page.items.length} jobs.`) : '');
    if (!page.items.length) summary.textContent = 'No jobs yet.';
    else applyFilter();
    await eachLimited(page.items, PARALLEL, (job, i) => enrich(job, body.rows[i], view));
  };
  await load();
  view.poll(REFRESH_MS, load);
}

function jobRow(job) {
  const cell = (label, ...content) => h('td', { 'data-label': label }, ...content);
  const row = h('tr', { 'data-status': job.status, 'data-id': job.id },
    h('th', { scope: 'row', 'data-label': 'Name' }, link(job.name, 'jobs', job.id)),
    cell('Schedule', h('span', { class: 'words' }, '…'), h('code', { class: 'canonical' }, job.schedule)),
    cell('Time zone', job.timezone),
    cell('Status', badge(job.status), job.error_reason ? h('span', { class: 'rel' }, job.error_reason) : null),
    cell('Next run', job.next_run_at ? [absTime(job.next_run_at), h('span', { class: 'rel' }, relTime(job.next_run_at))] : '—'),
    cell('Last run', '…'), cell('Success (last 50)', '…'), cell('Lag p50', '…'));
  row.dataset.name = job.name;
  return row;
}

// The schedule in words by job id, read once per version of the job: the list does not carry it, and a
// refresh should cost one request per job, not two (the key's rate limit is shared by every tab).
const descriptions = new Map();

async function describe(job) {
  const known = descriptions.get(job.id);
  if (known && known.version === job.version) return known.text;
  const detail = await api('GET', `/jobs/${encodeURIComponent(job.id)}`);
  descriptions.set(job.id, { version: detail.version, text: detail.schedule_description });
  return detail.schedule_description;
}

async function enrich(job, row, view) {
  if (!view.alive || !row || row.dataset.id !== job.id) return;
  let description, runs;
  try {
    [description, runs] = await Promise.all([
      describe(job),
      api('GET', `/jobs/${encodeURIComponent(job.id)}/executions${query({ limit: RECENT })}`),
    ]);
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
    row.hidden = true;  // deleted since the list was read
    return;
  }
  if (!view.alive) return;
  const cells = row.cells;
  cells[1].querySelector('.words').textContent = description;
  const last = runs.items.find((r) => r.finished_at) || runs.items[0];
  replace(cells[5], last ? h('a', { href: `#/runs/${encodeURIComponent(last.id)}` }, badge(last.status)) : '—',
    last ? h('span', { class: 'rel' }, relTime(last.scheduled_for)) : '');
  const stats = runStats(runs.items);
  cells[6].textContent = stats.runs ? percent(stats.successRate) : '—';
  cells[7].textContent = duration(stats.lagP50);
}

async function eachLimited(items, limit, task) {
  let next = 0;
  const worker = async () => { while (next < items.length) { const i = next++; await task(items[i], i); } };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

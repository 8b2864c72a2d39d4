// One run: its fields and every attempt (start, duration, status code, error, response excerpt).
// A run still in progress says so and reloads itself until it ends. A failed, lost or missed run has a
// Replay button (POST /executions/{id}/replay): the same run is sent again, and the page follows it.

import { api, can, ApiError } from './api.js';
import { h, replace, link, badge, definitions } from './dom.js';
import { absTime, duration, lagMs, durationMs, IN_PROGRESS } from './format.js';

const REFRESH_MS = 1500;
const REPLAYABLE = new Set(['failed', 'lost', 'missed']);

export async function runView(main, view, id) {
  const path = `/executions/${encodeURIComponent(id)}`;
  let run = await api('GET', path);
  const jobName = await api('GET', `/jobs/${encodeURIComponent(run.job_id)}`).then((job) => job.name, (error) => {
    if (error instanceof ApiError && error.status === 404) return 'deleted job';
    throw error;
  });
  if (!view.alive) return;
  const content = h('div');
  const actions = h('div', { class: 'actions' });
  // A live region of its own, not a second role=status beside the in-progress notice: read out when it changes.
  const notice = h('p', { class: 'notice replay-notice', 'aria-live': 'polite' });
  replace(main, 
    h('p', { class: 'crumbs' }, link('Jobs', 'jobs'), ' / ', link(jobName, 'jobs', run.job_id)),
    h('h1', { tabindex: '-1' }, `Run of ${absTime(run.scheduled_for)}`), actions, notice, content);
  document.title = `Run · ${jobName} · Tickwork`;
  const show = () => {
    replace(content, ...runContent(run));
    replace(actions, REPLAYABLE.has(run.status) && jobName !== 'deleted job' && can('runs:write')
      ? h('button', { type: 'button', onclick: () => replay().catch((error) => view.fail(error)) }, 'Replay') : null);
  };
  show();
  const refresh = async () => {
    run = await api('GET', path);
    if (!view.alive) return;
    show();
    if (!IN_PROGRESS.has(run.status)) view.stopPolling();
  };
  const follow = () => { if (IN_PROGRESS.has(run.status)) view.poll(REFRESH_MS, refresh); };
  async function replay() {
    notice.textContent = '';
    try {
      run = { ...run, ...(await api('POST', `${path}/replay`)) };
    } catch (error) {
      if (!(error instanceof ApiError) || error.status === 401) throw error;
      notice.textContent = `${error.message} (${error.code})`;
      return;
    }
    if (!view.alive) return;
    notice.textContent = `Replay queued: the same run is sent again ${run.next_attempt_at ? `at ${absTime(run.next_attempt_at)}` : 'now'}.`;
    show();
    follow();
  }
  follow();
}

function runContent(run) {
  const going = IN_PROGRESS.has(run.status);
  return [
    going ? h('p', { class: 'notice in-progress', role: 'status' }, run.status === 'awaiting_completion'
      ? `This run is awaiting_completion: its target accepted it and has until ${absTime(run.completion_deadline)} to call back. This page updates by itself.`
      : `This run is ${run.status}: still in progress. This page updates by itself.`) : null,
    definitions([
      ['Status', badge(run.status)],
      ['Trigger', run.trigger],
      ['Scheduled for', absTime(run.scheduled_for)],
      ['Started', absTime(run.started_at)],
      ['Finished', absTime(run.finished_at)],
      ['Fire lag', duration(lagMs(run))],
      ['Duration', duration(durationMs(run))],
      ['Attempts', run.attempt_count],
      run.next_attempt_at ? ['Next attempt', absTime(run.next_attempt_at)] : null,
      run.completion_deadline ? ['Completion due by', absTime(run.completion_deadline)] : null,
      run.missed_count ? ['Missed slots', run.missed_count] : null,
      run.replay_count ? ['Replayed', `${run.replay_count} time${run.replay_count === 1 ? '' : 's'}, last ${absTime(run.replayed_at)}`] : null,
      run.last_error ? ['Last error', h('span', { class: 'error-text' }, run.last_error)] : null,
      ['Id', h('code', {}, run.id)],
    ]),
    h('h2', {}, 'Attempts'),
    run.attempts.length ? h('ol', { class: 'attempts' }, run.attempts.map(attemptItem)) : h('p', { class: 'muted' }, 'No attempt yet.'),
  ];
}

function attemptItem(attempt) {
  return h('li', { class: 'attempt' },
    h('h3', {}, `Attempt ${attempt.number}`),
    definitions([
      ['Started', absTime(attempt.started_at)],
      ['Duration', duration(attempt.duration_ms)],
      ['Status code', attempt.status_code ?? 'no response'],
      attempt.error ? ['Error', h('span', { class: 'error-text' }, attempt.error)] : null,
    ]),
    attempt.response_body !== null && attempt.response_body !== undefined
      ? h('details', { open: true }, h('summary', {}, attempt.response_truncated ? 'Response (first 1024 characters)' : 'Response'),
        h('pre', { class: 'response' }, attempt.response_body))
      : null,
    attempt.output !== null && attempt.output !== undefined
      ? h('details', { open: true }, h('summary', {}, 'Output (reported by the completion callback)'),
        h('pre', { class: 'response' }, attempt.output))
      : null);
}

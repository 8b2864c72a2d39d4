// Times, durations and the per-job figures computed from a job's recent runs.

export const IN_PROGRESS = new Set(['queued', 'waiting', 'running', 'retrying', 'awaiting_completion']);
// Outcomes a run ended with; `skipped` is the overlap policy's choice, not an outcome, so it is left out.
const ENDED = new Set(['succeeded', 'failed', 'lost', 'missed']);

const pad = (n, width = 2) => String(n).padStart(width, '0');

// A date as the browser's time zone has it: its day and its clock time, to the second.
const localDay = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
const localClock = (d) => `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;

export function absTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return `${localDay(d)} ${localClock(d)}`;
}

// An instant (ms since the epoch) as a datetime-local input holds it: in the browser's time zone.
export function inputTime(ms) {
  const d = new Date(ms);
  return `${localDay(d)}T${localClock(d)}`;
}

// What a datetime-local input holds (a time in the browser's time zone) as RFC 3339 in UTC; null for none.
export function fromInputTime(text) {
  // Without an offset, a date and time is read in the local time zone (ECMAScript's Date Time String Format).
  const ms = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d{1,3})?)?$/.test(text) ? new Date(text).getTime() : NaN;
  return Number.isNaN(ms) ? null : new Date(ms).toISOString();
}

export function relTime(iso, now = Date.now()) {
  if (!iso) return '';
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  const size = Math.abs(seconds);
  const [value, unit] = size < 60 ? [size, 's'] : size < 3600 ? [Math.round(size / 60), 'min']
    : size < 86400 ? [Math.round(size / 3600), 'h'] : [Math.round(size / 86400), 'd'];
  if (size < 1) return 'now';
  return seconds > 0 ? `in ${value} ${unit}` : `${value} ${unit} ago`;
}

export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  if (Math.abs(ms) < 1000) return `${Math.round(ms)} ms`;
  if (Math.abs(ms) < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

export function zoneName() {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time';
}

const between = (from, to) => (from && to ? Date.parse(to) - Date.parse(from) : null);

// Fire lag: from the slot to the run's start.
export const lagMs = (run) => between(run.scheduled_for, run.started_at);
export const durationMs = (run) => between(run.started_at, run.finished_at);

export function median(values) {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

// Success rate over the runs that ended, and the median fire lag over the runs that started.
export function runStats(runs) {
  const ended = runs.filter((r) => ENDED.has(r.status));
  const succeeded = ended.filter((r) => r.status === 'succeeded').length;
  const lags = runs.map(lagMs).filter((v) => v !== null);
  return {
    runs: runs.length,
    successRate: ended.length ? succeeded / ended.length : null,
    lagP50: median(lags),
  };
}

export function percent(rate) {
  return rate === null ? '—' : `${Math.round(rate * 100)}%`;
}

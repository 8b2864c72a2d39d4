// Recent runs on a time axis: one bar per run at its slot, coloured by outcome, as tall as the run was
// late (fire lag), so gaps, failures and drift show at a glance. Plain SVG, attributes only (no inline style).

import { h, svg, cssName } from './dom.js';
import { absTime, duration, lagMs } from './format.js';

const WIDTH = 600;
const HEIGHT = 120;
const BASELINE = HEIGHT - 4;
const MIN_BAR = 3;
const BAR_WIDTH = 4;

export function runChart(runs, now = Date.now()) {
  const runsWithTime = runs.filter((r) => r.scheduled_for);
  if (!runsWithTime.length) return h('p', { class: 'muted' }, 'No runs yet.');
  const times = runsWithTime.map((r) => Date.parse(r.scheduled_for));
  const start = Math.min(...times);
  const end = Math.max(...times, Math.min(now, Math.max(...times) + 1000));
  const span = Math.max(end - start, 1);
  const maxLag = Math.max(...runsWithTime.map((r) => lagMs(r) ?? 0), 1);
  const x = (t) => 2 + ((t - start) / span) * (WIDTH - BAR_WIDTH - 4);
  const height = (run) => {
    const lag = lagMs(run);
    return lag === null ? MIN_BAR : MIN_BAR + (Math.max(lag, 0) / maxLag) * (BASELINE - MIN_BAR - 4);
  };
  const bars = runsWithTime.map((run, i) => {
    const tall = height(run);
    return svg('rect', { class: `mark s-${cssName(run.status)}`, x: x(times[i]).toFixed(1), y: (BASELINE - tall).toFixed(1),
      width: BAR_WIDTH, height: tall.toFixed(1) },
    svg('title', {}, `${absTime(run.scheduled_for)} · ${run.status} · lag ${duration(lagMs(run))}`));
  });
  const failed = runsWithTime.filter((r) => ['failed', 'lost', 'missed'].includes(r.status)).length;
  const label = `${runsWithTime.length} runs from ${absTime(runsWithTime.at(-1).scheduled_for)} to ${absTime(runsWithTime[0].scheduled_for)}, `
    + `${failed} failed, lost or missed; bar height is the fire lag, up to ${duration(maxLag)}`;
  return h('figure', { class: 'chart' },
    svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': label },
      svg('line', { class: 'axis', x1: 0, y1: BASELINE, x2: WIDTH, y2: BASELINE }), bars),
    h('div', { class: 'axis-labels' }, h('span', {}, absTime(new Date(start).toISOString())),
      h('span', {}, `max lag ${duration(maxLag)}`), h('span', {}, absTime(new Date(end).toISOString()))),
    h('figcaption', { class: 'legend' }, ['succeeded', 'failed', 'running', 'missed', 'skipped'].map((s) =>
      h('span', {}, h('span', { class: `swatch s-${s}`, 'aria-hidden': 'true' }), s))));
}

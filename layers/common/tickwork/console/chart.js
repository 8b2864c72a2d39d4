// Recent runs on a time axis: one bar per run at its slot, coloured by outcome, as tall as the run lasted
// or was late (the user picks), so gaps, failures and drift show at a glance. Plain SVG, attributes only
// (no inline style, which the Content-Security-Policy refuses).

import { h, svg, cssName } from './dom.js';
import { absTime, duration, lagMs, durationMs } from './format.js';

const WIDTH = 600;
const HEIGHT = 120;
const BASELINE = HEIGHT - 4;
const MIN_BAR = 6;
const BAR_WIDTH = 6;
export const MEASURES = { duration: ['duration', durationMs], lag: ['fire lag', lagMs] };

export function runChart(runs, measure = 'duration', now = Date.now()) {
  const [measureName, valueOf] = MEASURES[measure];
  const runsWithTime = runs.filter((r) => r.scheduled_for);
  if (!runsWithTime.length) return h('p', { class: 'muted' }, 'No runs yet.');
  const times = runsWithTime.map((r) => Date.parse(r.scheduled_for));
  const start = Math.min(...times);
  const end = Math.max(...times, Math.min(now, Math.max(...times) + 1000));
  const span = Math.max(end - start, 1);
  const maxValue = Math.max(...runsWithTime.map((r) => valueOf(r) ?? 0), 1);
  const x = (t) => 2 + ((t - start) / span) * (WIDTH - BAR_WIDTH - 4);
  const height = (run) => {
    const value = valueOf(run);
    return value === null ? MIN_BAR : MIN_BAR + (Math.max(value, 0) / maxValue) * (BASELINE - MIN_BAR - 4);
  };
  const bars = runsWithTime.map((run, i) => {
    const tall = height(run);
    return svg('rect', { class: `mark s-${cssName(run.status)}`, x: x(times[i]).toFixed(1), y: (BASELINE - tall).toFixed(1),
      width: BAR_WIDTH, height: tall.toFixed(1) },
    svg('title', {}, `${absTime(run.scheduled_for)} · ${run.status} · lag ${duration(lagMs(run))} · took ${duration(durationMs(run))}`));
  });
  const failed = runsWithTime.filter((r) => ['failed', 'lost', 'missed'].includes(r.status)).length;
  const label = `${runsWithTime.length} runs from ${absTime(runsWithTime.at(-1).scheduled_for)} to ${absTime(runsWithTime[0].scheduled_for)}, `
    + `${failed} failed, lost or missed; bar height is the ${measureName}, up to ${duration(maxValue)}`;
  return h('figure', { class: 'chart' },
    svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': label },
      svg('line', { class: 'axis', x1: 0, y1: BASELINE, x2: WIDTH, y2: BASELINE }), bars),
    h('div', { class: 'axis-labels' }, h('span', {}, absTime(new Date(start).toISOString())),
      h('span', {}, `tallest: ${measureName} ${duration(maxValue)}`), h('span', {}, absTime(new Date(end).toISOString()))),
    h('figcaption', { class: 'legend' }, ['succeeded', 'failed', 'running', 'missed', 'skipped'].map((s) =>
      h('span', {}, h('span', { class: `swatch s-${s}`, 'aria-hidden': 'true' }), s))));
}

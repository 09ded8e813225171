/**
 * `/stats`: the counters of `/+stats`, sampled every few seconds while the page is open and drawn
 * as lines (one per index) of the requests served per sample, plus each index's totals since the
 * server started. The first sample draws the totals; the lines grow as samples come.
 */
import { getJson, type Stats } from './api.js';
import { bytes, fill, h, svg } from './dom.js';

const EVERY_MS = 2_000;
const KEEP = 150;
const W = 720;
const H = 240;
const PAD = 36;
const COLOURS = ['#2563eb', '#db2777', '#16a34a', '#ea580c', '#7c3aed', '#0891b2', '#ca8a04', '#4b5563'];

interface Sample {
  at: number;
  /** Index route → pages + downloads served so far. */
  served: Record<string, number>;
}

export async function statsPage(app: HTMLElement): Promise<void> {
  const samples: Sample[] = [];
  const chart = h('figure', { class: 'chart' });
  const totals = h('div', { class: 'totals' });
  fill(app, h('p', { class: 'lead' }, `Requests served per index (pages and downloads), sampled every ${EVERY_MS / 1000} s while this page is open.`), chart, h('h2', {}, 'Since the server started'), totals);
  const tick = async () => {
    const stats = await getJson<Stats>('/+stats');
    samples.push({ at: Date.now(), served: Object.fromEntries(Object.entries(stats.indexes).map(([route, ix]) => [route, (ix.counters.pages ?? 0) + (ix.counters.downloads ?? 0)])) });
    if (samples.length > KEEP) samples.shift();
    draw(chart, samples, Object.keys(stats.indexes));
    drawTotals(totals, stats);
  };
  await tick();
  setInterval(() => void tick().catch(() => undefined), EVERY_MS);
}

/** Lines of the cumulative count per index over the samples (a person reads slope and order). */
function draw(chart: HTMLElement, samples: Sample[], routes: string[]): void {
  const max = Math.max(1, ...samples.flatMap((s) => Object.values(s.served)));
  const t0 = samples[0]!.at;
  const span = Math.max(EVERY_MS, samples[samples.length - 1]!.at - t0);
  const x = (at: number) => PAD + ((at - t0) / span) * (W - 2 * PAD);
  const y = (v: number) => H - PAD - (v / max) * (H - 2 * PAD);
  const plot = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `requests served per index, ${samples.length} samples` });
  plot.append(svg('line', { x1: PAD, y1: H - PAD, x2: W - PAD, y2: H - PAD, class: 'axis' }), svg('line', { x1: PAD, y1: PAD, x2: PAD, y2: H - PAD, class: 'axis' }));
  const label = (text: string, attrs: Record<string, string | number>) => {
    const t = svg('text', attrs);
    t.textContent = text;
    return t;
  };
  plot.append(label(String(max), { x: PAD - 4, y: PAD + 4, 'text-anchor': 'end' }), label('0', { x: PAD - 4, y: H - PAD + 4, 'text-anchor': 'end' }), label(`${Math.round(span / 1000)} s`, { x: W - PAD, y: H - PAD + 18, 'text-anchor': 'end' }));
  routes.forEach((route, i) => {
    const colour = COLOURS[i % COLOURS.length]!;
    const points = samples.map((s) => `${x(s.at).toFixed(1)},${y(s.served[route] ?? 0).toFixed(1)}`);
    // One sample: a short flat line, so the index is visible from the first moment.
    if (points.length === 1) points.push(`${(W - PAD).toFixed(1)},${y(samples[0]!.served[route] ?? 0).toFixed(1)}`);
    plot.append(svg('polyline', { points: points.join(' '), fill: 'none', stroke: colour, 'stroke-width': 2, 'data-route': route }));
  });
  const legend = h('figcaption', {}, routes.map((r, i) => h('span', { class: 'key' }, h('span', { class: `swatch c${i % COLOURS.length}` }), r)));
  fill(chart, plot, legend);
}

function drawTotals(el: HTMLElement, stats: Stats): void {
  fill(
    el,
    h(
      'table',
      {},
      h('thead', {}, h('tr', {}, ['index', 'pages', 'downloads', 'bytes', 'uploads', 'upstream refreshes'].map((c) => h('th', { scope: 'col' }, c)))),
      h(
        'tbody',
        {},
        Object.entries(stats.indexes).map(([route, ix]) =>
          h('tr', {}, h('td', {}, route), h('td', {}, ix.counters.pages ?? 0), h('td', {}, ix.counters.downloads ?? 0), h('td', {}, bytes(ix.counters.bytes ?? 0)), h('td', {}, ix.counters.uploads ?? 0), h('td', {}, ix.counters.refreshes ?? 0)),
        ),
      ),
    ),
  );
}

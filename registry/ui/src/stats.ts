/**
 * `/stats`: the usage counters of `/+stats`, drilled down the way the document is: every index
 * (`/stats`), one index's projects or repositories (`/stats?index=<route>`), one project's files
 * or blobs (`/stats?index=<route>&project=<name>`). Each view samples its `/+stats` document every
 * few seconds while it is open and draws a line per row of what it has served since the server
 * started (the first sample is the count since start; later ones add the traffic seen while the
 * page is open), and a table of the counters with a bar per row, each row a link one level down.
 */
import { getJson, type Counters, type Stats } from './api.js';
import { fill, h, svg, type Child } from './dom.js';
import { bytes } from './format.js';

const EVERY_MS = 2_000;
const KEEP = 150;
/** Lines drawn at most: the rows that served the most (the table has every row). */
const LINES = 8;
const W = 720;
const H = 240;
const PAD = 36;
const COLOURS = ['#2563eb', '#db2777', '#16a34a', '#ea580c', '#7c3aed', '#0891b2', '#ca8a04', '#4b5563'];

interface Row {
  name: string;
  /** The view one level down, if there is one. */
  link?: string;
  /** What the line and the bar show: requests served for this row since start. */
  served: number;
  cells: Array<string | number>;
}

interface View {
  /** Where this view sits: links back up, then its own name. */
  crumbs: Child[];
  lead: string;
  url: string;
  columns: string[];
  rows(doc: unknown): Row[];
  /** Links beside the table (the same thing in the package browser). */
  extra?(doc: unknown): Child;
}

interface IndexStats {
  index: string;
  name: string;
  ecosystem: string;
  totals: Counters;
  projects: Record<string, Counters>;
}

interface ProjectStats extends Omit<IndexStats, 'projects'> {
  project: string;
  files: Record<string, { downloads: number; metadata: number; bytes: number }>;
}

const n = (c: Counters, k: string) => c[k] ?? 0;
const here = (q: Record<string, string>) => `/stats?${new URLSearchParams(q).toString()}`;

/** The view the query string names. */
function viewFor(q: URLSearchParams): View {
  const route = q.get('index');
  const project = q.get('project');
  const all = h('a', { href: '/stats' }, 'All indexes');
  if (route && project) {
    return {
      crumbs: [all, ' › ', h('a', { href: here({ index: route }) }, route), ' › ', project],
      lead: 'Downloads and metadata reads of each file of this project, with the bytes they moved.',
      url: `/+stats?${new URLSearchParams({ index: route, project }).toString()}`,
      columns: ['downloads', 'metadata', 'bytes'],
      rows: (doc) =>
        Object.entries((doc as ProjectStats).files).map(([file, c]) => ({
          name: /^sha256:[0-9a-f]{64}$/.test(file) ? file.slice(0, 19) : file,
          served: c.downloads + c.metadata,
          cells: [c.downloads, c.metadata, bytes(c.bytes)],
        })),
      extra: (doc) => {
        const d = doc as ProjectStats;
        const target: Record<string, string> = d.ecosystem === 'oci' ? { index: d.name, repo: `${d.index}/${d.project}` } : { index: d.name, project: d.project };
        return h('p', {}, h('a', { href: `/browse?${new URLSearchParams(target).toString()}` }, `${d.project} in the package browser`));
      },
    };
  }
  if (route) {
    return {
      crumbs: [all, ' › ', route],
      lead: 'Pages and downloads served for each project of this index; a project opens its files.',
      url: `/+stats?${new URLSearchParams({ index: route }).toString()}`,
      columns: ['pages', 'downloads', 'metadata', 'bytes', 'uploads'],
      rows: (doc) =>
        Object.entries((doc as IndexStats).projects).map(([name, c]) => ({
          name,
          link: here({ index: route, project: name }),
          served: n(c, 'pages') + n(c, 'downloads'),
          cells: [n(c, 'pages'), n(c, 'downloads'), n(c, 'metadata'), bytes(n(c, 'bytes')), n(c, 'uploads')],
        })),
    };
  }
  return {
    crumbs: ['All indexes'],
    lead: 'Pages and downloads served by each index; an index opens its projects.',
    url: '/+stats',
    columns: ['pages', 'downloads', 'bytes', 'uploads', 'upstream refreshes', 'stale served', 'upstream errors', 'rejected'],
    rows: (doc) =>
      Object.entries((doc as Stats).indexes).map(([r, ix]) => {
        const c = ix.counters;
        return {
          name: r,
          link: here({ index: r }),
          served: n(c, 'pages') + n(c, 'downloads'),
          cells: [n(c, 'pages'), n(c, 'downloads'), bytes(n(c, 'bytes')), n(c, 'uploads'), n(c, 'refreshes'), n(c, 'stale_served'), n(c, 'upstream_errors'), n(c, 'rejected')],
        };
      }),
  };
}

interface Sample {
  at: number;
  /** Row name → served so far. */
  served: Record<string, number>;
}

export async function statsPage(app: HTMLElement): Promise<void> {
  const view = viewFor(new URLSearchParams(location.search));
  const samples: Sample[] = [];
  const chart = h('figure', { class: 'chart' });
  const table = h('div', { class: 'totals' });
  const extra = h('div');
  fill(app, h('nav', { class: 'crumbs', 'aria-label': 'usage levels' }, view.crumbs), h('p', { class: 'lead' }, `${view.lead} Sampled every ${EVERY_MS / 1000} s while this page is open.`), chart, h('h2', {}, 'Since the server started'), table, extra);
  const tick = async () => {
    const doc = await getJson<unknown>(view.url);
    const rows = view.rows(doc);
    samples.push({ at: Date.now(), served: Object.fromEntries(rows.map((r) => [r.name, r.served])) });
    if (samples.length > KEEP) samples.shift();
    draw(chart, samples, rows);
    drawTable(table, view.columns, rows);
    if (view.extra && samples.length === 1) fill(extra, view.extra(doc));
  };
  await tick();
  setInterval(() => void tick().catch(() => undefined), EVERY_MS);
}

/** Lines of the cumulative count per row over the samples (a person reads slope and order). */
function draw(chart: HTMLElement, samples: Sample[], rows: Row[]): void {
  if (rows.length === 0) return fill(chart, h('p', {}, 'Nothing served here since the server started.'));
  const names = rows.map((r) => r.name);
  const drawn = [...rows].sort((a, b) => b.served - a.served).slice(0, LINES).map((r) => r.name);
  const max = Math.max(1, ...samples.flatMap((s) => drawn.map((name) => s.served[name] ?? 0)));
  const t0 = samples[0]!.at;
  const span = Math.max(EVERY_MS, samples[samples.length - 1]!.at - t0);
  const x = (at: number) => PAD + ((at - t0) / span) * (W - 2 * PAD);
  const y = (v: number) => H - PAD - (v / max) * (H - 2 * PAD);
  const plot = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `requests served, ${drawn.length} lines, ${samples.length} samples` });
  plot.append(svg('line', { x1: PAD, y1: H - PAD, x2: W - PAD, y2: H - PAD, class: 'axis' }), svg('line', { x1: PAD, y1: PAD, x2: PAD, y2: H - PAD, class: 'axis' }));
  plot.append(label(String(max), { x: PAD - 4, y: PAD + 4, 'text-anchor': 'end' }), label('0', { x: PAD - 4, y: H - PAD + 4, 'text-anchor': 'end' }), label(`${Math.round(span / 1000)} s`, { x: W - PAD, y: H - PAD + 18, 'text-anchor': 'end' }));
  for (const name of drawn) {
    // A row keeps its colour as others overtake it: the colour follows its place in the table.
    const colour = COLOURS[names.indexOf(name) % COLOURS.length]!;
    const points = samples.map((s) => `${x(s.at).toFixed(1)},${y(s.served[name] ?? 0).toFixed(1)}`);
    // One sample: a short flat line, so the row is visible from the first moment.
    if (points.length === 1) points.push(`${(W - PAD).toFixed(1)},${y(samples[0]!.served[name] ?? 0).toFixed(1)}`);
    plot.append(svg('polyline', { points: points.join(' '), fill: 'none', stroke: colour, 'stroke-width': 2, 'data-row': name }));
  }
  const legend = h('figcaption', {}, drawn.map((name) => h('span', { class: 'key' }, h('span', { class: `swatch c${names.indexOf(name) % COLOURS.length}` }), name)));
  fill(chart, plot, legend);
}

function label(text: string, attrs: Record<string, string | number>): SVGTextElement {
  const t = svg('text', attrs);
  t.textContent = text;
  return t;
}

/** The counters of every row, each with a bar of what it served beside the largest. */
function drawTable(el: HTMLElement, columns: string[], rows: Row[]): void {
  if (rows.length === 0) return fill(el, h('p', {}, 'No counts yet.'));
  const max = Math.max(1, ...rows.map((r) => r.served));
  const sorted = [...rows].sort((a, b) => b.served - a.served || (a.name < b.name ? -1 : 1));
  fill(
    el,
    h(
      'table',
      { class: 'usage' },
      h('thead', {}, h('tr', {}, ['', 'served', ...columns].map((c) => h('th', { scope: 'col' }, c)))),
      h(
        'tbody',
        {},
        sorted.map((r) =>
          h(
            'tr',
            { 'data-row': r.name },
            h('th', { scope: 'row' }, r.link ? h('a', { href: r.link }, r.name) : r.name),
            h('td', { class: 'bar' }, svg('svg', { viewBox: '0 0 100 10', 'aria-hidden': 'true' }, svg('rect', { width: Math.max(0.5, (r.served / max) * 100), height: 10 })), ` ${r.served}`),
            r.cells.map((c) => h('td', {}, c)),
          ),
        ),
      ),
    ),
  );
}

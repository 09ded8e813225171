/**
 * `/`: the server's table of indexes (already on the page, so it works without JavaScript) gains
 * each index's health (for a cached index, each upstream's: online, backing off or rate limited,
 * and the pull-limit figures it last sent), counters since start and what it stores (how full its quota or budget is),
 * above it the store's total, and below it the copy-paste client configuration
 * of `/+api` for each index (placeholders, never a secret: discovery holds none).
 */
import { getJson, type Discovery, type Stats, type Status, type StatusIndex, type UpstreamStatus } from './api.js';
import { append, fill, h, message } from './dom.js';
import { searchBox } from './search.js';
import { storedCell, storedText } from './stored.js';

export async function dashboard(): Promise<void> {
  // First: the box works while the rest of the page loads.
  searchBox();
  const details = document.getElementById('details')!;
  const [api, status, stats] = await Promise.all([getJson<Discovery>('/+api'), getJson<Status>('/+status'), getJson<Stats>('/+stats')]);
  const table = document.querySelector('table.indexes')!;
  table.before(h('p', { class: 'total' }, `The store holds ${storedText(status.stored)} in all (a blob several indexes hold counts once).`));
  append(table.querySelector('thead tr')!, [h('th', { scope: 'col' }, 'health'), h('th', { scope: 'col' }, 'served since start'), h('th', { scope: 'col' }, 'stored')]);
  for (const row of table.querySelectorAll<HTMLTableRowElement>('tbody tr')) {
    const name = row.dataset.index!;
    const st = status.indexes.find((i) => i.name === name);
    const route = st?.route ?? '';
    const counters = stats.indexes[route]?.counters ?? {};
    const offline = st?.upstream?.offline === true;
    const stale = (counters.stale_served ?? 0) > 0;
    const health = offline ? h('span', { class: 'bad' }, 'upstream offline: serving cached data') : stale ? h('span', { class: 'warn' }, `served ${counters.stale_served} stale pages`) : h('span', { class: 'good' }, 'healthy');
    append(row, [h('td', {}, health, st?.upstreams ? upstreamList(st.upstreams, st.upstream?.summary) : null, st ? keptNote(st) : null), h('td', {}, `${counters.pages ?? 0} pages · ${counters.downloads ?? 0} downloads · ${counters.uploads ?? 0} uploads`), h('td', { class: 'stored' }, st ? storedCell(st) : '')]);
  }
  fill(
    details,
    h('h2', {}, 'Client configuration'),
    api.indexes.map((ix) =>
      h(
        'section',
        { class: 'client', 'aria-labelledby': `cfg-${ix.name}` },
        h('h3', { id: `cfg-${ix.name}` }, `${ix.name} `, h('small', {}, `${ix.ecosystem} ${ix.role}`)),
        Object.entries(ix.client_configuration ?? {}).map(([tool, t]) =>
          h(
            'div',
            { class: 'snippet' },
            // The description names the tool ("pip: install from this index"); the key is only its id.
            h('p', { 'data-tool': tool }, t.description, t.path ? [' — ', h('code', {}, t.path)] : null),
            h('pre', { tabindex: 0 }, t.text),
            h('button', { type: 'button', onclick: (e: Event) => void copy(e.currentTarget as HTMLButtonElement, t.text) }, 'Copy'),
          ),
        ),
      ),
    ),
  );
}

/** What a cached index serves on after its upstream deleted it: how many, and the newest few by name. */
function keptNote(st: StatusIndex): HTMLElement | null {
  const kept = st.kept_after_upstream_delete;
  if (!kept || kept.count === 0) return null;
  const names = kept.newest.slice(0, 3).map((k) => k.name).join(', ');
  return h('p', { class: 'warn kept' }, `keeping ${kept.count} deleted upstream: ${names}${kept.count > 3 ? ', …' : ''}`);
}

/** Each upstream of a cached index, in the order they are asked: its state and pull-limit figures. */
function upstreamList(upstreams: UpstreamStatus[], summary: string | undefined): HTMLElement {
  return h(
    'ul',
    { class: 'upstreams', 'aria-label': `upstreams: ${summary ?? ''}` },
    upstreams.length > 1 && summary ? h('li', { class: 'summary' }, `upstreams ${summary}`) : null,
    upstreams.map((u) =>
      h(
        'li',
        { 'data-state': u.state },
        h('code', {}, u.url),
        ' ',
        h('span', { class: u.online ? 'good' : 'bad' }, stateText(u)),
        u.rate_limit ? h('small', {}, ` · ${pullLimitText(u.rate_limit)}`) : null,
      ),
    ),
  );
}

function stateText(u: UpstreamStatus): string {
  const until = u.retry_at ? ` until ${new Date(u.retry_at).toLocaleTimeString()}` : '';
  if (u.state === 'rate_limited') return `rate limited (429)${until}`;
  if (u.state === 'backing_off') return `backing off${until}${u.last_error ? ` after ${u.last_error.kind}` : ''}`;
  return 'online';
}

/** `76 of 100 pulls left per 6h` (Docker Hub's figures), or what of them the upstream sent. */
function pullLimitText(r: NonNullable<UpstreamStatus['rate_limit']>): string {
  const per = r.window_secs ? ` per ${windowText(r.window_secs)}` : '';
  if (r.remaining !== null && r.limit !== null) return `${r.remaining} of ${r.limit} requests left${per}`;
  if (r.remaining !== null) return `${r.remaining} requests left${per}`;
  return `limit ${r.limit ?? '?'} requests${per}`;
}

function windowText(secs: number): string {
  if (secs % 3600 === 0) return `${secs / 3600}h`;
  if (secs % 60 === 0) return `${secs / 60}m`;
  return `${secs}s`;
}

async function copy(button: HTMLButtonElement, text: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    button.replaceWith(message('Select the text and copy it (the browser refused clipboard access).'));
  }
}

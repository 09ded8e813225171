/**
 * `/`: the server's table of indexes (already on the page, so it works without JavaScript) gains
 * each index's health, counters since start and what it stores (how full its quota or budget is),
 * above it the store's total, and below it the copy-paste client configuration
 * of `/+api` for each index (placeholders, never a secret: discovery holds none).
 */
import { getJson, type Discovery, type Stats, type Status } from './api.js';
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
    append(row, [h('td', {}, health), h('td', {}, `${counters.pages ?? 0} pages · ${counters.downloads ?? 0} downloads · ${counters.uploads ?? 0} uploads`), h('td', { class: 'stored' }, st ? storedCell(st) : '')]);
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

async function copy(button: HTMLButtonElement, text: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = 'Copied';
  } catch {
    button.replaceWith(message('Select the text and copy it (the browser refused clipboard access).'));
  }
}

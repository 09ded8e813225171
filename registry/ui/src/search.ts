/**
 * The dashboard's search box: searches every index through `/+search` as the person types (and on
 * Enter), and lists the results as links to their browse pages. Keyboard alone: Down from the box
 * goes to the first result, Up and Down move between results, Up from the first (or Escape)
 * returns to the box. Every field of a result is set as text (dom.ts), never parsed as markup.
 */
import { getJson } from './api.js';
import { fill, h, message } from './dom.js';

interface Result {
  ecosystem: string;
  index: string;
  route: string;
  name: string;
  version?: string;
  yanked?: boolean;
  tags?: string[];
  title?: string;
  summary?: string;
  match: string;
  browse: string;
}

interface Answer {
  complete: boolean;
  total: number;
  truncated: boolean;
  results: Result[];
}

const DEBOUNCE_MS = 150;

export function searchBox(): void {
  const form = document.querySelector<HTMLFormElement>('form.search');
  const input = document.getElementById('search-q') as HTMLInputElement | null;
  const out = document.getElementById('search-results');
  if (!form || !input || !out) return;
  let timer: number | undefined;
  /** Only the answer to the latest query is drawn (an older one may arrive after it). */
  let latest = 0;

  const run = async () => {
    const q = input.value.trim();
    const mine = ++latest;
    if (q === '') {
      fill(out);
      return;
    }
    let answer: Answer;
    try {
      answer = await getJson<Answer>(`/+search?${new URLSearchParams({ q, per_page: '20' }).toString()}`);
    } catch (err) {
      if (mine === latest) fill(out, message(err instanceof Error ? err.message : String(err), 'error'));
      return;
    }
    if (mine === latest) draw(out, q, answer);
  };

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    window.clearTimeout(timer);
    void run();
  });
  input.addEventListener('input', () => {
    window.clearTimeout(timer);
    timer = window.setTimeout(() => void run(), DEBOUNCE_MS);
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowDown') {
      const first = out.querySelector<HTMLAnchorElement>('a.result');
      if (first) {
        e.preventDefault();
        first.focus();
      }
    }
  });
  out.addEventListener('keydown', (e) => {
    const links = [...out.querySelectorAll<HTMLAnchorElement>('a.result')];
    const at = links.indexOf(document.activeElement as HTMLAnchorElement);
    if (at < 0) return;
    if (e.key === 'ArrowDown' && at < links.length - 1) links[at + 1]!.focus();
    else if (e.key === 'ArrowUp') (at > 0 ? links[at - 1]! : input).focus();
    else if (e.key === 'Escape') input.focus();
    else return;
    e.preventDefault();
  });
}

function draw(out: HTMLElement, q: string, answer: Answer): void {
  const count = answer.total === 0 ? `Nothing matches “${q}”.` : `${answer.total}${answer.truncated ? '+' : ''} result${answer.total === 1 ? '' : 's'} for “${q}”${answer.total > answer.results.length ? `, the first ${answer.results.length} shown` : ''}.`;
  fill(
    out,
    h('p', { class: 'search-count', role: 'status' }, count, answer.complete ? null : ' The search index is still being built: some may be missing.'),
    answer.results.length
      ? h(
          'ul',
          { class: 'search-results' },
          answer.results.map((r) =>
            h(
              'li',
              { 'data-ecosystem': r.ecosystem },
              h('a', { class: 'result', href: r.browse }, r.name),
              ' ',
              h('span', { class: 'where' }, `${r.ecosystem} · ${r.index} (/${r.route}/)`, detail(r)),
              r.title && r.title !== r.name ? h('p', { class: 'title' }, r.title) : null,
              r.summary ? h('p', { class: 'summary' }, r.summary) : null,
            ),
          ),
        )
      : null,
  );
}

function detail(r: Result): string {
  if (r.version !== undefined) return ` · ${r.version}${r.yanked ? ' (yanked)' : ''}`;
  if (r.tags?.length) return ` · ${r.tags.slice(0, 3).join(', ')}${r.tags.length > 3 ? ', …' : ''}`;
  return '';
}

/**
 * `/browse`: pick an index, type to filter its projects (Python: the Simple JSON project list) or
 * repositories (OCI: the catalog), open one. The page's state is in its query string
 * (`?index=&project=`, `?index=&repo=&ref=`), so every view has a link and Back works.
 *
 * Python project: versions and files from the Simple JSON page (size, hashes, upload time, yanked
 * with its reason, requires-python), a file's METADATA (the PEP 658 sibling) and its archive
 * contents through inspection (nested archives, text previews a page at a time).
 * OCI repository: tags; a tag's manifest (an index lists its platforms); the referrers of each
 * manifest (signatures, SBOMs); a layer's members through the layer-contents API, with previews.
 * Policy-denied projects never show: the lists are the ones the index serves to pip and docker.
 */
import { getJson, getText, type Discovery, type IndexEntry } from './api.js';
import { fill, h, message } from './dom.js';
import { bytes } from './format.js';

const SIMPLE_JSON = 'application/vnd.pypi.simple.v1+json';
const MANIFEST_TYPES = [
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.docker.distribution.manifest.v2+json',
].join(', ');
/** Names shown at once while filtering; the filter narrows the rest. */
const SHOWN = 200;

export async function browse(app: HTMLElement): Promise<void> {
  const q = new URLSearchParams(location.search);
  const api = await getJson<Discovery>('/+api');
  const ix = api.indexes.find((i) => i.name === q.get('index')) ?? api.indexes[0];
  if (!ix) return fill(app, message('This server has no index.'));
  const picker = h(
    'nav',
    { class: 'picker', 'aria-label': 'indexes' },
    api.indexes.map((i) => h('a', { href: `/browse?index=${encodeURIComponent(i.name)}`, 'aria-current': i === ix ? 'page' : undefined }, i.name, ' ', h('small', {}, `${i.ecosystem} ${i.role}`))),
  );
  const view = h('div', { id: 'view' });
  fill(app, picker, view);
  const project = q.get('project');
  const repo = q.get('repo');
  if (ix.ecosystem === 'oci') {
    if (repo) return ociRepo(view, ix, repo, q.get('ref'));
    return listing(view, ix, await ociNames(ix), (name) => `/browse?index=${encodeURIComponent(ix.name)}&repo=${encodeURIComponent(name)}`);
  }
  if (project) return pythonProject(view, ix, project);
  return listing(view, ix, await pythonNames(ix), (name) => `/browse?index=${encodeURIComponent(ix.name)}&project=${encodeURIComponent(name)}`);
}

async function pythonNames(ix: IndexEntry): Promise<string[]> {
  const doc = await getJson<{ projects: { name: string }[] }>(ix.urls.simple!, SIMPLE_JSON);
  return doc.projects.map((p) => p.name);
}

async function ociNames(ix: IndexEntry): Promise<string[]> {
  const names: string[] = [];
  let url: string | null = '/v2/_catalog?n=1000';
  while (url) {
    const res: Response = await fetch(url);
    if (!res.ok) throw new Error(`${url} answered ${res.status}`);
    names.push(...((await res.json()) as { repositories: string[] }).repositories.filter((r) => r.startsWith(`${ix.route}/`)));
    url = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get('link') ?? '')?.[1] ?? null;
  }
  return names;
}

/** The search box and the names matching it, narrowed as the person types. */
function listing(view: HTMLElement, ix: IndexEntry, names: string[], link: (name: string) => string): void {
  const what = ix.ecosystem === 'oci' ? 'repositories' : 'projects';
  const results = h('ul', { class: 'names', id: 'results' });
  const count = h('p', { class: 'count', role: 'status' });
  const show = (filter: string) => {
    const needle = filter.trim().toLowerCase();
    const hits = names.filter((n) => n.toLowerCase().includes(needle));
    fill(count, `${hits.length} of ${names.length} ${what}${hits.length > SHOWN ? ` (first ${SHOWN} shown; type to narrow)` : ''}`);
    fill(results, hits.slice(0, SHOWN).map((n) => h('li', {}, h('a', { href: link(n) }, n))));
  };
  const input = h('input', { type: 'search', id: 'search', placeholder: `Filter ${what}`, 'aria-label': `filter ${what} of ${ix.name}`, autocomplete: 'off', oninput: (e: Event) => show((e.target as HTMLInputElement).value) });
  fill(view, h('h2', {}, `${ix.name}: ${what}`), h('label', { for: 'search', class: 'visually-hidden' }, `Filter ${what}`), input, count, results);
  show('');
  input.focus();
}

interface SimpleFile {
  filename: string;
  url: string;
  hashes: Record<string, string>;
  'requires-python'?: string | null;
  size?: number;
  'upload-time'?: string;
  yanked?: boolean | string;
  'core-metadata'?: unknown;
}

async function pythonProject(view: HTMLElement, ix: IndexEntry, project: string): Promise<void> {
  const pageUrl = new URL(`${ix.urls.simple}${encodeURIComponent(project)}/`, location.href);
  const doc = await getJson<{ name: string; versions?: string[]; files: SimpleFile[] }>(pageUrl.href, SIMPLE_JSON);
  const detail = h('div', { id: 'file-detail' });
  fill(
    view,
    h('p', {}, h('a', { href: `/browse?index=${encodeURIComponent(ix.name)}` }, `← ${ix.name}`)),
    h('h2', {}, doc.name),
    h('p', {}, 'Install: ', h('code', {}, `pip install --index-url ${new URL(ix.urls.simple!, location.href).href} ${doc.name}`)),
    h('h3', {}, 'Versions'),
    h('ul', { class: 'versions' }, (doc.versions ?? []).map((v) => h('li', {}, v))),
    h('h3', {}, 'Files'),
    h(
      'table',
      { class: 'files' },
      h('thead', {}, h('tr', {}, ['file', 'size', 'sha256', 'uploaded', 'requires-python', 'yanked', ''].map((c) => h('th', { scope: 'col' }, c)))),
      h(
        'tbody',
        {},
        doc.files.map((f) => {
          const fileUrl = new URL(f.url, pageUrl).href;
          const sha = f.hashes.sha256 ?? '';
          return h(
            'tr',
            { class: f.yanked ? 'yanked' : undefined },
            h('td', {}, h('a', { href: fileUrl }, f.filename)),
            h('td', {}, f.size === undefined ? '' : bytes(f.size)),
            h('td', {}, h('code', { title: sha }, sha.slice(0, 12))),
            h('td', {}, f['upload-time'] ? new Date(f['upload-time']).toLocaleString() : ''),
            h('td', {}, f['requires-python'] ?? ''),
            h('td', {}, f.yanked ? (typeof f.yanked === 'string' ? `yanked: ${f.yanked}` : 'yanked') : ''),
            h(
              'td',
              {},
              f['core-metadata'] ? h('button', { type: 'button', onclick: () => void showMetadata(detail, f, fileUrl) }, 'METADATA') : null,
              ' ',
              h('button', { type: 'button', onclick: () => void showArchive(detail, `/${ix.route}/inspect/${sha}/${encodeURIComponent(f.filename)}`, f.filename) }, 'Contents'),
            ),
          );
        }),
      ),
    ),
    detail,
  );
}

async function showMetadata(detail: HTMLElement, f: SimpleFile, fileUrl: string): Promise<void> {
  const { text } = await getText(`${fileUrl}.metadata`);
  fill(detail, h('h3', {}, `METADATA of ${f.filename}`), h('pre', { class: 'metadata', tabindex: 0 }, text));
}

interface Member {
  path: string;
  kind: string;
  size: number;
  nested?: string;
  unsafe?: string;
  previewable?: boolean;
}

/** An archive's members (inspection); nested archives open in place, text members preview. */
async function showArchive(detail: HTMLElement, base: string, title: string): Promise<void> {
  const doc = await getJson<{ members: Member[]; truncated?: boolean }>(base);
  const preview = h('div', { class: 'preview' });
  fill(
    detail,
    h('h3', {}, `Contents of ${title}`),
    doc.truncated ? message('More members than can be listed: the first 10,000 are shown.') : null,
    h(
      'ul',
      { class: 'members' },
      doc.members.map((m) =>
        h(
          'li',
          {},
          m.kind === 'file' && !m.unsafe
            ? h(
                'a',
                {
                  href: '#',
                  onclick: (e: Event) => {
                    e.preventDefault();
                    // A nested archive's listing URL ends in `!/`; its members follow that slash.
                    const member = `${base.replace(/\/$/, '')}/${memberPath(m.path)}`;
                    if (m.nested) void showArchive(detail, `${member}!/`, `${title} › ${m.path}`);
                    else void showPreview(preview, member, m.path);
                  },
                },
                m.path,
              )
            : h('span', {}, m.path),
          ` (${m.kind}${m.kind === 'file' ? `, ${bytes(m.size)}` : ''}${m.nested ? `, ${m.nested} archive` : ''}${m.unsafe ? `, unsafe: ${m.unsafe}` : ''})`,
        ),
      ),
    ),
    preview,
  );
}

function memberPath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

/** A member's text, a page at a time (`offset` from the previous page's next offset). */
async function showPreview(el: HTMLElement, url: string, name: string, offset = '0', pre?: HTMLElement): Promise<void> {
  try {
    const page = await getText(`${url}${url.includes('?') ? '&' : '?'}offset=${offset}`);
    const body = pre ?? h('pre', { class: 'member', tabindex: 0 });
    body.append(page.text);
    const more = page.next ? h('button', { type: 'button', onclick: () => void showPreview(el, url, name, page.next!, body) }, 'Next page') : null;
    fill(el, h('h4', {}, name, page.size ? ` (${bytes(Number(page.size))})` : ''), body, more);
  } catch (err) {
    fill(el, message(err instanceof Error ? err.message : String(err), 'error'));
  }
}

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os: string; architecture: string; variant?: string };
  artifactType?: string;
  annotations?: Record<string, string>;
}

interface Manifest {
  mediaType?: string;
  manifests?: Descriptor[];
  config?: Descriptor;
  layers?: Descriptor[];
  artifactType?: string;
}

async function ociRepo(view: HTMLElement, ix: IndexEntry, repo: string, ref: string | null): Promise<void> {
  const back = h('p', {}, h('a', { href: `/browse?index=${encodeURIComponent(ix.name)}` }, `← ${ix.name}`));
  const tags = (await getJson<{ tags: string[] | null }>(`/v2/${repo}/tags/list`)).tags ?? [];
  const here = (r: string) => `/browse?index=${encodeURIComponent(ix.name)}&repo=${encodeURIComponent(repo)}&ref=${encodeURIComponent(r)}`;
  const detail = h('div', { id: 'manifest' });
  fill(
    view,
    back,
    h('h2', {}, repo),
    h('p', {}, 'Pull: ', h('code', {}, `${location.host}/${repo}:${tags[0] ?? '<tag>'}`)),
    h('h3', {}, 'Tags'),
    tags.length ? h('ul', { class: 'tags' }, tags.map((t) => h('li', {}, h('a', { href: here(t), 'aria-current': t === ref ? 'true' : undefined }, t)))) : h('p', {}, 'No tags.'),
    detail,
  );
  if (ref) await showManifest(detail, repo, ref, here);
}

async function showManifest(detail: HTMLElement, repo: string, ref: string, here: (r: string) => string): Promise<void> {
  const res = await fetch(`/v2/${repo}/manifests/${ref}`, { headers: { accept: MANIFEST_TYPES } });
  if (!res.ok) return fill(detail, message(`the manifest ${ref} answered ${res.status}`, 'error'));
  const digest = res.headers.get('docker-content-digest') ?? ref;
  const m = (await res.json()) as Manifest;
  const layers = h('div', { class: 'layer' });
  const referrers = h('div', { class: 'referrers' });
  fill(
    detail,
    h('h3', {}, `Manifest ${ref}`),
    h('dl', { class: 'facts' }, h('dt', {}, 'digest'), h('dd', {}, h('code', {}, digest)), h('dt', {}, 'media type'), h('dd', {}, m.mediaType ?? res.headers.get('content-type') ?? '')),
    m.manifests
      ? [
          h('h4', {}, 'Platforms'),
          h('ul', { class: 'platforms' }, m.manifests.map((d) => h('li', {}, h('a', { href: here(d.digest) }, d.platform ? `${d.platform.os}/${d.platform.architecture}${d.platform.variant ? `/${d.platform.variant}` : ''}` : d.digest), ` ${bytes(d.size)}`))),
        ]
      : null,
    m.config ? [h('h4', {}, 'Config'), h('p', {}, h('code', {}, m.config.digest), ` ${bytes(m.config.size)}`)] : null,
    m.layers
      ? [
          h('h4', {}, 'Layers'),
          h(
            'ol',
            { class: 'layers' },
            m.layers.map((l) => h('li', {}, h('code', {}, l.digest.slice(0, 19)), ` ${bytes(l.size)} `, h('button', { type: 'button', onclick: () => void showLayer(layers, repo, l.digest) }, 'Browse files'))),
          ),
        ]
      : null,
    layers,
    h('h4', {}, 'Referrers'),
    referrers,
  );
  const refs = await getJson<Manifest>(`/v2/${repo}/referrers/${digest}`).catch(() => ({ manifests: [] }) as Manifest);
  fill(
    referrers,
    refs.manifests?.length
      ? h('ul', {}, refs.manifests.map((d) => h('li', {}, h('a', { href: here(d.digest) }, d.artifactType ?? d.mediaType), ` ${d.digest.slice(0, 19)}`)))
      : h('p', {}, 'None: no signature, SBOM or other artifact refers to this manifest.'),
  );
}

async function showLayer(el: HTMLElement, repo: string, digest: string): Promise<void> {
  const base = `/v2/${repo}/blobs/${digest}/contents`;
  const doc = await getJson<{ members: Member[]; truncated?: boolean }>(base);
  const preview = h('div', { class: 'preview' });
  fill(
    el,
    h('h4', {}, `Files in layer ${digest.slice(0, 19)}`),
    h(
      'ul',
      { class: 'members' },
      doc.members.map((m) =>
        h(
          'li',
          {},
          m.previewable
            ? h(
                'a',
                {
                  href: '#',
                  onclick: (e: Event) => {
                    e.preventDefault();
                    void showPreview(preview, `${base}?member=${encodeURIComponent(m.path)}`, m.path);
                  },
                },
                m.path,
              )
            : h('span', {}, m.path),
          ` (${m.kind}${m.kind === 'file' ? `, ${bytes(m.size)}` : ''})`,
        ),
      ),
    ),
    preview,
  );
}

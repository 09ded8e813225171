/**
 * The four pages of the web UI as the server writes them: one shell (title, navigation, the
 * bundle's stylesheet and script) around a body the bundle fills in. The dashboard's body also
 * lists every index with its links, so the page is useful without JavaScript: every URL a person
 * needs (the Simple page, the discovery document) is a plain link.
 *
 * Nothing here is rendered from data a client uploaded: names and routes come from the config,
 * and even those go through `html` (html.ts), which escapes every value.
 */
import type { DiscoveryDocument } from '../../discovery/types.js';
import { html, type Html } from './html.js';
import type { Bundle } from './bundle.js';

export type PageName = 'dashboard' | 'status' | 'browse' | 'stats';

/** Path and title of each page (the `<title>` says which page and which server). */
export const PAGES: ReadonlyArray<{ name: PageName; path: string; title: string }> = [
  { name: 'dashboard', path: '/', title: 'Indexes' },
  { name: 'status', path: '/admin/status', title: 'Status' },
  { name: 'browse', path: '/browse', title: 'Browse packages' },
  { name: 'stats', path: '/stats', title: 'Usage' },
];

export function renderPage(name: PageName, bundle: Bundle, body: Html): string {
  const page = PAGES.find((p) => p.name === name)!;
  const nav = PAGES.map((p) => (p.name === name ? html`<a href="${p.path}" aria-current="page">${p.title}</a>` : html`<a href="${p.path}">${p.title}</a>`));
  const style = bundle.style ? html`<link rel="stylesheet" href="${bundle.style}">` : html``;
  const script = bundle.script ? html`<script type="module" src="${bundle.script}"></script>` : html``;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${page.title} · velodex</title>
${style}
</head>
<body data-page="${name}">
<header><a class="brand" href="/">velodex</a><nav aria-label="main">${nav}</nav></header>
<main id="main">
<h1>${page.title}</h1>
${body}
</main>
${script}
</body>
</html>
`.value;
}

/** The dashboard without JavaScript: every index, its kind, and its links. */
export function dashboardBody(doc: DiscoveryDocument): Html {
  const rows = doc.indexes.map(
    (ix) => html`<tr data-index="${ix.name}">
<td>${ix.name}</td><td><code>/${ix.route}/</code></td><td>${ix.ecosystem}</td><td>${ix.role}</td>
<td class="links">${Object.entries(ix.urls).map(([key, url]) => html`<a href="${url}">${key}</a> `)}</td>
</tr>`,
  );
  // Without JavaScript the form still works: it opens the JSON answer of `/+search`.
  const search = html`<form class="search" role="search" action="/+search" method="get">
<label for="search-q">Search every index</label>
<input type="search" id="search-q" name="q" maxlength="200" autocomplete="off" placeholder="a project, an image, a word of its summary" aria-controls="search-results" aria-describedby="search-help">
<button type="submit">Search</button>
<p id="search-help" class="hint">Names match exactly, by their start and by their words; summaries and image annotations by whole words. Arrow keys move through the results.</p>
</form>
<div id="search-results" aria-live="polite"></div>`;
  return html`${search}
<p class="lead">Every index this server serves. The client configuration for each is below the table once the page has loaded, and in <a href="/+api">/+api</a>.</p>
<table class="indexes">
<thead><tr><th scope="col">index</th><th scope="col">route</th><th scope="col">ecosystem</th><th scope="col">role</th><th scope="col">links</th></tr></thead>
<tbody>${rows}</tbody>
</table>
<div id="details"></div>`;
}

/** The other pages: the bundle draws them; without it, a pointer to the documents they read. */
export function scriptedBody(name: Exclude<PageName, 'dashboard'>): Html {
  const source = { status: '/+status?details=admin', browse: '/+api', stats: '/+stats' }[name];
  return html`<div id="app" aria-live="polite"><noscript><p>This page needs JavaScript; the document it shows is <a href="${source}">${source}</a>.</p></noscript></div>`;
}

/**
 * What `/admin/status` shows (with 401) while its admin token is missing or wrong: the browser
 * has already asked for it by then (the challenge is Basic); this says what to enter.
 */
export function adminTokenBody(wrong: boolean): Html {
  return html`<p class="error" role="alert">${wrong ? 'The admin token given is wrong.' : 'This page needs the admin token.'}</p>
<p>Reload the page and enter the admin token as the password when the browser asks (any user name).
Scripts send it as <code>Authorization: Bearer &lt;token&gt;</code> to <a href="/+status?details=admin">/+status?details=admin</a>.
The token is set in the <code>[admin]</code> table of the server's configuration.</p>`;
}

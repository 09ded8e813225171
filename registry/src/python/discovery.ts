/**
 * The Python part of the discovery documents: the Simple, upload and files URLs, what the route
 * can do, and the texts that configure pip, uv and twine for it. The upload text carries the
 * placeholder `<upload-token>`, never the token.
 */
import { isLoopback, type Origin } from '../discovery/origin.js';
import type { ClientText, EcosystemDiscovery, IndexView, Links } from '../discovery/types.js';

export const pythonDiscovery: EcosystemDiscovery = {
  index(view, links) {
    const { index, writable } = view;
    const base = `/${index.route}/`;
    return {
      urls: {
        simple: links.url(`${base}simple/`),
        files: links.url(`${base}files/`),
        ...(writable ? { upload: links.url(base) } : {}),
      },
      capabilities: {
        uploads: writable !== null,
        yanking: writable !== null,
        volatile_deletes: writable?.volatile === true,
        simple_html: true,
        simple_json: true,
        pep658_metadata: true,
        project_status: true,
        provenance: true,
        legacy_json: true,
        archive_inspection: true,
      },
      ...(links.origin ? { client_configuration: clientTexts(view, links, links.origin) } : {}),
    };
  },
};

function clientTexts(view: IndexView, links: Links, origin: Origin): Record<string, ClientText> {
  const { index, writable } = view;
  const simple = links.url(`/${index.route}/simple/`);
  const upload = links.url(`/${index.route}/`);
  // pip ignores a plain-HTTP index on any host but loopback unless the host is trusted.
  const trusted = origin.scheme === 'http' && !isLoopback(origin) ? [`trusted-host = ${origin.host}`] : [];
  // An index that reaches an upstream (a cache, or a blend with one) serves everything, build
  // backends too, so it replaces PyPI: nothing leaks past its policy to PyPI. A hosted-only index
  // cannot serve hatchling or setuptools, so PyPI stays uv's default there: uv asks this index
  // first and takes any package it has from it alone (uv's first-index strategy), and `uv build`
  // still finds its build backend.
  const replacesPypi = view.members.some((m) => m.role === 'cached');
  // A private index is read with a token of it (docs/access.md): a placeholder, never the token.
  const reader = index.private ? withReadToken(simple) : simple;
  const uvEnv = `UV_INDEX_${index.name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
  const privately = index.private ? `; private: set ${uvEnv}_USERNAME=__token__ and ${uvEnv}_PASSWORD=<read-token>` : '';
  const texts: Record<string, ClientText> = {
    pip: {
      description: index.private ? 'pip: install from this private index (replace <read-token> with a token of it)' : 'pip: install from this index',
      path: '~/.config/pip/pip.conf',
      text: ['[global]', `index-url = ${reader}`, ...trusted, ''].join('\n'),
    },
    uv: {
      description: (replacesPypi
        ? 'uv projects (pyproject.toml): this index replaces PyPI'
        : 'uv projects (pyproject.toml): packages this index has come from it; PyPI stays the default for the rest (build backends included)') + privately,
      path: 'pyproject.toml',
      text: [
        '[[tool.uv.index]]',
        `name = ${JSON.stringify(index.name)}`,
        `url = ${JSON.stringify(simple)}`,
        ...(writable ? [`publish-url = ${JSON.stringify(upload)}`] : []),
        ...(replacesPypi ? ['default = true'] : []),
        '',
      ].join('\n'),
    },
  };
  if (writable) {
    texts.pypirc = {
      description: `twine: upload with "twine upload -r ${index.name} dist/*" (replace <upload-token> with the upload token)`,
      path: '~/.pypirc',
      text: ['[distutils]', `index-servers = ${index.name}`, '', `[${index.name}]`, `repository = ${upload}`, 'username = __token__', 'password = <upload-token>', ''].join('\n'),
    };
  }
  if (writable && writable.trustedPublishers.length > 0) {
    const names = writable.trustedPublishers.map((p) => p.name).join(', ');
    texts.github_actions = {
      description: `GitHub Actions: publish with trusted publishing, no secret (publishers of index "${writable.name}": ${names}; the job needs "permissions: id-token: write", the registry HTTPS)`,
      path: '.github/workflows/release.yml',
      text: ['    steps:', '      - uses: actions/checkout@v4', '      - uses: astral-sh/setup-uv@v6', '      - run: uv build', `      - run: uv publish --trusted-publishing always --publish-url ${upload}`, ''].join('\n'),
    };
  }
  return texts;
}

/** `url` with the user `__token__` and the password placeholder `<read-token>`. */
function withReadToken(url: string): string {
  const at = url.indexOf('://') + 3;
  return `${url.slice(0, at)}__token__:<read-token>@${url.slice(at)}`;
}

/** `/admin/status`: `/+status?details=admin`, made readable. Read-only: nothing here writes. */
import { getJson, type Status, type StatusIndex } from './api.js';
import { fill, h, type Child } from './dom.js';
import { duration } from './format.js';
import { countedText, lastCollection, storedCell, storedText } from './stored.js';

export async function statusPage(app: HTMLElement): Promise<void> {
  const s = await getJson<Status>('/+status?details=admin');
  const row = (k: string, ...v: Child[]) => [h('dt', {}, k), h('dd', {}, ...v)];
  fill(
    app,
    h(
      'dl',
      { class: 'facts' },
      row('version', s.version),
      row('serial', s.serial),
      row('instance', s.instance),
      row('worker processes', s.workers),
      row('storage', s.storage.backend),
      row('started', new Date(s.started_at).toLocaleString()),
      row('uptime', duration(s.uptime_secs)),
      row('requests', `${s.requests.total} (${Object.entries(s.requests.by_status).map(([k, v]) => `${k} ${v}`).join(', ')})`),
    ),
    h('h2', {}, 'Storage'),
    h('dl', { class: 'facts storage' }, row('stored in all', storedText(s.stored), h('small', {}, ' (a blob several indexes hold counts once)')), row('counted', countedText(s.stored.counted_at)), row('last collection', ...lastCollection(s.gc.last_run))),
    h('h2', {}, 'Indexes'),
    h(
      'table',
      { class: 'indexes' },
      h('thead', {}, h('tr', {}, ['index', 'route', 'role', 'state', 'serial', 'projects', 'files', 'stored', 'upload token', 'tokens and publishers'].map((c) => h('th', { scope: 'col' }, c)))),
      h(
        'tbody',
        {},
        s.indexes.map((ix) =>
          h(
            'tr',
            {},
            h('td', {}, ix.name),
            h('td', {}, h('code', {}, `/${ix.route}/`)),
            h('td', {}, `${ix.ecosystem} ${ix.role}`, ix.members.length ? ` of ${ix.members.join(', ')}` : ''),
            h('td', {}, ix.upstream ? h('span', { class: ix.upstream.offline ? 'bad' : 'good' }, `${ix.upstream.offline ? 'upstream offline' : 'upstream reachable'} (${ix.upstream.url})`) : h('span', { class: 'good' }, 'ok')),
            h('td', {}, ix.serial),
            h('td', {}, ix.details?.projects ?? '—'),
            h('td', {}, ix.details?.files ?? '—'),
            h('td', { class: 'stored' }, storedCell(ix)),
            h('td', {}, ix.upload_token ? (ix.upload_token.configured ? `configured (${ix.upload_token.source ?? 'set'})` : 'none: uploads off') : '—'),
            h('td', { class: 'tokens' }, credentialsText(ix)),
          ),
        ),
      ),
    ),
    h('h2', {}, 'Recent uploads'),
    s.recent_uploads?.length
      ? h(
          'table',
          { class: 'recent' },
          h('thead', {}, h('tr', {}, ['when', 'index', 'project', 'version', 'file', 'by'].map((c) => h('th', { scope: 'col' }, c)))),
          h(
            'tbody',
            {},
            s.recent_uploads.map((u) =>
              h('tr', {}, h('td', {}, new Date(u.time).toLocaleString()), h('td', {}, u.index), h('td', {}, u.project), h('td', {}, u.version ?? ''), h('td', {}, u.filename), h('td', { class: 'by' }, u.by ?? '')),
            ),
          ),
        )
      : h('p', {}, 'No uploads yet.'),
  );
}

/** The named tokens and trusted publishers of an index, or a dash. */
function credentialsText(ix: StatusIndex): string {
  const all = [...(ix.tokens ?? []).map(tokenText), ...(ix.trusted_publishers ?? []).map(publisherText)];
  return all.length ? all.join('; ') : '—';
}

/** A trusted publisher as the status page shows it: its name and the repository or project it trusts. */
function publisherText(p: NonNullable<StatusIndex['trusted_publishers']>[number]): string {
  const who = p.claims.repository ?? p.claims.project_path ?? p.claims.sub ?? p.issuer;
  const where = p.projects ? ` on ${p.projects.join(', ')}` : '';
  return `publisher ${p.name} (${who}${p.workflow ? ` ${p.workflow}` : ''}${where})`;
}

/** A named token as the status page shows it: its name, what it may do, where and until when; never a secret. */
function tokenText(t: NonNullable<StatusIndex['tokens']>[number]): string {
  const where = t.projects ? ` on ${t.projects.join(', ')}` : '';
  const until = t.expires ? (t.expired ? `, expired ${new Date(t.expires).toLocaleDateString()}` : `, until ${new Date(t.expires).toLocaleDateString()}`) : '';
  return `${t.name} (${t.scopes.join(', ')}${where}${until})`;
}

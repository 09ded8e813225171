/**
 * The lines a person reads when velodex starts: where each index is and where its upload token
 * comes from (never the token). Written to stderr whatever the log level, so the URL stays in
 * sight at `warn` and the JSON log on stdout stays machine-readable.
 */
import type { Config, IndexConfig } from '../config/types.js';
import type { Ecosystem } from '../ecosystem/ecosystem.js';

export function startupLines(config: Pick<Config, 'indexes' | 'source' | 'workers'> & Partial<Pick<Config, 'mirrors'>>, url: string, ecosystems: readonly Ecosystem[]): string[] {
  const base = new URL(url);
  const byId = new Map(ecosystems.map((e) => [e.id, e]));
  const rows = config.indexes.map((ix) => [ix.name, `${ix.ecosystem} ${ix.role}`, byId.get(ix.ecosystem)?.clientUrl?.(ix, base) ?? `${url}/${ix.route}/`, writes(ix)]);
  const widths = [0, 1, 2].map((col) => Math.max(...rows.map((r) => r[col]!.length)));
  return [
    `velodex listening on ${url} (${config.source}; ${workerCount(config.workers.count)})`,
    ...rows.map((r) => `  ${r.map((cell, col) => (col < 3 ? cell.padEnd(widths[col]!) : cell)).join('  ')}`.trimEnd()),
    ...(config.mirrors?.length ? [`  mirror of ${config.mirrors.map((m) => `${m.registry} (${m.index.name})`).join(', ')} on ${url}/v2/ (containerd's ns; hosts.toml in /+api)`] : []),
  ];
}

function writes(ix: IndexConfig): string {
  if (ix.role === 'virtual') return ix.uploadTarget ? `writes go to ${ix.uploadTarget}` : 'read-only';
  if (ix.role !== 'hosted') return 'read-only';
  const named = ix.tokens.length === 0 ? '' : ` and ${ix.tokens.length} named token${ix.tokens.length === 1 ? '' : 's'}`;
  const source = ix.uploadToken?.source;
  if (!source) return ix.tokens.some((t) => t.scopes.includes('upload')) ? `uploads with ${ix.tokens.length} named token${ix.tokens.length === 1 ? '' : 's'}` : 'uploads disabled (no upload_token)';
  if (source.startsWith('file:')) return `upload token in ${source.slice('file:'.length)}${named}`;
  if (source.startsWith('env:')) return `upload token from $${source.slice('env:'.length)}${named}`;
  return `upload token in the config file${named}`;
}

function workerCount(n: number): string {
  return n === 1 ? 'one process' : `${n} worker processes`;
}

import type { UpstreamReport } from '../../src/observe/describe.js';

/** Reads the documents every client reads; a failure becomes a sentence a person can act on. */
export class ApiError extends Error {}

export async function getJson<T>(url: string, accept = 'application/json'): Promise<T> {
  const res = await fetch(url, { headers: { accept } });
  if (!res.ok) throw new ApiError(`${url} answered ${res.status}: ${await reason(res)}`);
  return (await res.json()) as T;
}

export async function getText(url: string): Promise<{ text: string; next: string | null; size: string | null }> {
  const res = await fetch(url);
  if (!res.ok) throw new ApiError(`${url} answered ${res.status}: ${await reason(res)}`);
  return { text: await res.text(), next: res.headers.get('x-velodex-next-offset'), size: res.headers.get('x-velodex-member-size') };
}

async function reason(res: Response): Promise<string> {
  const body = await res.text();
  try {
    const parsed = JSON.parse(body) as { message?: string; errors?: { message?: string }[] };
    return parsed.message ?? parsed.errors?.[0]?.message ?? body;
  } catch {
    return body.slice(0, 200);
  }
}

export interface ClientText {
  description: string;
  path?: string;
  text: string;
}

export interface IndexEntry {
  name: string;
  route: string;
  ecosystem: string;
  role: string;
  members?: string[];
  upstream?: string;
  urls: Record<string, string>;
  client_configuration?: Record<string, ClientText>;
}

export interface Discovery {
  indexes: IndexEntry[];
}

export type Counters = Record<string, number>;

/** One upstream of a cached index in `/+status`: the server's own type (types only: nothing of the server is bundled). */
export type UpstreamStatus = UpstreamReport;

export interface StatusIndex {
  name: string;
  route: string;
  ecosystem: string;
  role: string;
  serial: number;
  upstream?: { url: string; offline: boolean; online?: number; total?: number; summary?: string };
  /** A cached index's upstreams in the order they are asked: health and pull limits (docs/operations.md). */
  upstreams?: UpstreamStatus[];
  upload_token?: { configured: boolean; source?: string };
  /** Named tokens, by name only (docs/access.md). */
  tokens?: Array<{ name: string; scopes: string[]; projects?: string[]; expires?: string; expired?: boolean }>;
  /** A hosted index's trusted publishers, by their rules (docs/access.md). */
  trusted_publishers?: Array<{ name: string; issuer: string; claims: Record<string, string>; workflow?: string; ref?: string; projects?: string[] }>;
  members: string[];
  details?: { projects: number; files: number };
  /** What the index holds; null for a virtual index (its members hold the bytes). */
  stored: Stored | null;
  /** A hosted index's quota; null when none or not hosted. */
  quota_bytes: number | null;
  /** A cached index's budget; null when none or not cached. */
  max_bytes: number | null;
  evict_unused_after_secs: number | null;
  /** A cached index's copies served on after its upstream deleted them (`upstream_deletions = "keep"`); null when not cached. */
  kept_after_upstream_delete?: { count: number; newest: Array<{ name: string; since: string }> } | null;
  [key: string]: unknown;
}

export interface Stored {
  bytes: number;
  objects: number;
}

/** The last garbage collection, as any process that ran it recorded it. */
export interface LastCollection {
  ended_at: string;
  result: 'ok' | 'failed';
  blobs_deleted: number;
  bytes_deleted: number;
  error?: string;
}

export interface Status {
  version: string;
  instance: string;
  serial: number;
  started_at: string;
  uptime_secs: number;
  workers: number;
  storage: { backend: string };
  requests: { total: number; by_status: Record<string, number> };
  indexes: StatusIndex[];
  /** The store in all (a blob several indexes hold counts once); counted_at: null until a collection counted it exactly. */
  stored: Stored & { counted_at: string | null };
  gc: { last_run: LastCollection | null };
  recent_uploads?: { time: string; index: string; project: string; version?: string; filename: string; by?: string }[];
}

export interface Stats {
  since: string;
  totals: Counters;
  indexes: Record<string, { name: string; ecosystem: string; role: string; counters: Counters }>;
}

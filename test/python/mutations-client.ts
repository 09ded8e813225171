/** Small HTTP helpers for the mutation and policy suites: write requests and Simple JSON pages. */
import { basicAuth } from '../support/velodex.js';

export const SIMPLE_JSON = 'application/vnd.pypi.simple.v1+json';

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON, or null when it is not JSON. */
  json: Record<string, unknown> | null;
}

async function answer(res: Response): Promise<Answer> {
  const text = await res.text();
  let json: Record<string, unknown> | null = null;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, text, json };
}

export interface WriteOptions {
  /** Upload token; null sends no Authorization header. */
  token: string | null;
  body?: string;
  contentType?: string;
}

export async function write(method: 'PUT' | 'DELETE', url: string, opts: WriteOptions): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (opts.token !== null) headers.authorization = basicAuth(opts.token);
  if (opts.contentType) headers['content-type'] = opts.contentType;
  return answer(await fetch(url, { method, headers, body: opts.body }));
}

export async function get(url: string, accept = SIMPLE_JSON): Promise<Answer> {
  return answer(await fetch(url, { headers: { accept } }));
}

export interface DetailFile {
  filename: string;
  url: string;
  hashes: { sha256: string };
  size: number;
  yanked: boolean | string;
}

export interface Detail {
  name: string;
  versions: string[];
  files: DetailFile[];
}

/** The PEP 691 detail page of `project` under `indexUrl` (`.../simple/`); throws unless 200. */
export async function detail(indexUrl: string, project: string): Promise<Detail> {
  const res = await get(`${indexUrl}${project}/`);
  if (res.status !== 200) throw new Error(`GET ${indexUrl}${project}/ answered ${res.status}: ${res.text}`);
  return res.json as unknown as Detail;
}

/** Normalised names on the PEP 691 project list. */
export async function listed(indexUrl: string): Promise<string[]> {
  const res = await get(indexUrl);
  if (res.status !== 200) throw new Error(`GET ${indexUrl} answered ${res.status}`);
  return (res.json as unknown as { projects: { name: string }[] }).projects.map((p) => p.name);
}

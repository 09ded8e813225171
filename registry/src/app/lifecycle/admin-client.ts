/**
 * The command line's side of the admin actions (`velodex gc --url`, `velodex retention --url`):
 * one POST to a running server's `/+admin/<action>[?dry_run=1]` with the admin token, instead of
 * opening the store in this process. What the fs backend needs while a server runs: its
 * compare-and-swap holds only among that server's processes, so the server must do the work.
 *
 * The token comes from `--token-file F` or `VELODEX_ADMIN_TOKEN`, is sent as
 * `Authorization: Bearer`, and is never printed. Answers: 200 is the report (JSON, the caller's
 * to read), 409 another run holds the lease (`busy`), anything else an `AdminActionError` whose
 * message says what to fix (the token on 401/403, the address when nothing answers).
 */
import { readFileSync } from 'node:fs';

export const ADMIN_TOKEN_ENV = 'VELODEX_ADMIN_TOKEN';

/** A refusal or a failure to reach the server, with a message for the person at the terminal. */
export class AdminActionError extends Error {}

export type AdminAnswer = { kind: 'report'; body: unknown } | { kind: 'busy'; message: string };

/** The admin token from `tokenFile` (trimmed), else from `VELODEX_ADMIN_TOKEN`. */
export function adminToken(tokenFile: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (tokenFile !== undefined) {
    let text: string;
    try {
      text = readFileSync(tokenFile, 'utf8');
    } catch (err) {
      throw new AdminActionError(`--token-file ${tokenFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
    }
    const token = text.trim();
    if (!token) throw new AdminActionError(`--token-file ${tokenFile} is empty: it should hold the server's [admin] token`);
    return token;
  }
  const token = env[ADMIN_TOKEN_ENV]?.trim();
  if (!token) throw new AdminActionError(`--url needs the server's admin token: --token-file FILE, or ${ADMIN_TOKEN_ENV}`);
  return token;
}

/** `POST <base>/+admin/<action>[?dry_run=1]`, answered as a report or `busy`; throws `AdminActionError` otherwise. */
export async function postAdminAction(base: string, action: 'gc' | 'retention', token: string, dryRun: boolean): Promise<AdminAnswer> {
  let url: URL;
  try {
    url = new URL(`+admin/${action}`, base.endsWith('/') ? base : `${base}/`);
  } catch {
    throw new AdminActionError(`--url ${base} is not a URL (e.g. http://127.0.0.1:4433)`);
  }
  if (dryRun) url.searchParams.set('dry_run', '1');
  let res: Response;
  try {
    res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, accept: 'application/json' } });
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    throw new AdminActionError(`cannot reach ${url.origin}: ${cause?.code ?? cause?.message ?? String(err)}`);
  }
  const text = await res.text();
  if (res.status === 200) {
    try {
      return { kind: 'report', body: JSON.parse(text) as unknown };
    } catch {
      throw new AdminActionError(`${url.origin} answered 200 without a JSON report: is it a velodex server?`);
    }
  }
  const message = messageOf(text);
  if (res.status === 409) return { kind: 'busy', message };
  if (res.status === 401) throw new AdminActionError(`${url.origin} refused the admin token (401: ${message}); check --token-file or ${ADMIN_TOKEN_ENV}`);
  if (res.status === 403) throw new AdminActionError(`${url.origin} refused the admin action (403: ${message})`);
  throw new AdminActionError(`${url.origin} answered ${res.status}: ${message}`);
}

/** The `message` of velodex's JSON error body, or the start of whatever came. */
function messageOf(text: string): string {
  try {
    const body = JSON.parse(text) as { message?: unknown; error?: unknown };
    if (typeof body.message === 'string') return body.message;
    if (typeof body.error === 'string') return body.error;
  } catch {
    // not JSON: shown as it came
  }
  return text.slice(0, 200).trim() || '(no body)';
}

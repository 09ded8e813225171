/**
 * One delivery attempt: POST the stored body with the event headers. The outcome carries only a
 * status code or an error code: never the receiver's response body, never an error message (a
 * fetch error can quote the URL, query string and user info included).
 */
import type { WebhookConfig } from '../config/types.js';
import { ATTEMPT_TIMEOUT_MS } from './backoff.js';
import { signature } from './signature.js';
import type { StoredDelivery } from './types.js';

export const USER_AGENT = 'velodex-webhooks';

export type SendOutcome = { kind: 'delivered'; status: number } | { kind: 'failed'; error: string } | { kind: 'aborted' };

export async function sendDelivery(target: WebhookConfig, d: StoredDelivery, stop: AbortSignal): Promise<SendOutcome> {
  const body = Buffer.from(d.body, 'utf8');
  const timestamp = Math.floor(Date.now() / 1000);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'x-velodex-event': d.event,
    'x-velodex-delivery': d.id,
    'x-velodex-timestamp': String(timestamp),
  };
  if (target.secret) headers['x-velodex-signature'] = signature(target.secret.reveal(), timestamp, d.id, body);
  if (target.basicAuth) headers.authorization = `Basic ${Buffer.from(target.basicAuth.reveal()).toString('base64')}`;
  // Asked after a failure whether it was the deadline (rather than reading the error's name).
  const deadline = AbortSignal.timeout(ATTEMPT_TIMEOUT_MS);
  try {
    const res = await fetch(target.url, {
      method: 'POST',
      headers,
      body,
      // A redirect is a failure: following it would send a signed body somewhere not configured.
      redirect: 'manual',
      signal: AbortSignal.any([stop, deadline]),
    });
    await res.body?.cancel().catch(() => undefined);
    if (res.status >= 200 && res.status < 300) return { kind: 'delivered', status: res.status };
    return { kind: 'failed', error: `HTTP ${res.status}` };
  } catch (err) {
    if (stop.aborted) return { kind: 'aborted' };
    if (deadline.aborted) return { kind: 'failed', error: `timed out after ${ATTEMPT_TIMEOUT_MS / 1000}s` };
    return { kind: 'failed', error: errorCode(err) };
  }
}

function errorCode(err: unknown): string {
  const cause = err instanceof Error ? (err.cause as { code?: unknown } | undefined) : undefined;
  if (typeof cause?.code === 'string' && /^[A-Z0-9_]{2,40}$/.test(cause.code)) return cause.code;
  return 'request failed';
}

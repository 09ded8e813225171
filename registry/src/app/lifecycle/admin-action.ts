/**
 * What the admin actions (`POST /+admin/gc`, `POST /+admin/retention`) read of a request besides
 * the admin gate: `?dry_run`. Parsed strictly, since the two readings differ in what they change:
 * `1`, `true`, `yes` ask for a dry run; absent, `0`, `false`, `no` for the real run; anything
 * else is refused (400) rather than guessed at.
 */
import type { FastifyRequest } from 'fastify';
import { HttpError } from '../../http/errors.js';

const YES = new Set(['1', 'true', 'yes']);
const NO = new Set(['', '0', 'false', 'no']);

export function dryRunOf(request: FastifyRequest): boolean {
  const url = request.raw.url ?? '';
  const at = url.indexOf('?');
  const value = new URLSearchParams(at < 0 ? '' : url.slice(at + 1)).get('dry_run');
  if (value === null) return false;
  const v = value.toLowerCase();
  if (YES.has(v)) return true;
  if (NO.has(v)) return false;
  throw new HttpError(400, `dry_run=${JSON.stringify(value).slice(0, 40)} is neither 1/true/yes nor 0/false/no`, { 'cache-control': 'no-store' });
}

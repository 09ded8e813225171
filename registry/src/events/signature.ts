/** `X-Velodex-Signature`: HMAC-SHA256 over `{timestamp}.{delivery}.{body}`, keyed by the target's secret. */
import { createHmac } from 'node:crypto';

export function signature(secret: string, timestamp: number, delivery: string, body: Buffer): string {
  const mac = createHmac('sha256', secret).update(`${timestamp}.${delivery}.`).update(body);
  return `sha256=${mac.digest('hex')}`;
}

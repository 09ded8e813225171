/**
 * How `/+status` shows configured credentials: whether one is set and the kind of place it comes
 * from, never its value. The environment variable's name and the file's path are configuration,
 * not secrets, but they are left out too: `/+status` is readable without credentials, and a path
 * such as `/run/secrets/...` tells a reader where to look; `velodex check-config` shows them to
 * whoever can read the config anyway.
 */
import type { Secret } from '../config/secret.js';

export interface SecretInfo {
  configured: boolean;
  source?: 'inline' | 'env' | 'file';
}

export function secretInfo(secret: Secret | undefined): SecretInfo {
  if (!secret) return { configured: false };
  const kind = secret.source.split(':', 1)[0];
  return { configured: true, source: kind === 'env' || kind === 'file' ? kind : 'inline' };
}

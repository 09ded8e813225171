/**
 * Secrets as the config gives them: `key`, `key_env` or `key_file`, exactly one. Each becomes a
 * `Secret` (which never prints); an unset variable, an unreadable file and a blank value are each
 * a `ConfigError` naming the key.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from './errors.js';
import { Secret } from './secret.js';

type SecretHolder = Record<string, unknown>;

/** Where `_env` and `_file` secrets are read from: the process, or (the operator) a stand-in. */
export interface SecretSources {
  env: NodeJS.ProcessEnv;
  /** Reads a `_file` secret; throws an errno-style error (`code`) when it cannot. */
  readFile: (path: string) => string;
}

export const processSecretSources = (env: NodeJS.ProcessEnv = process.env): SecretSources => ({ env, readFile: (path) => readFileSync(path, 'utf8') });

/** The three spellings (`x`, `x_env`, `x_file`) of each secret key. */
export function secretSpellings<K extends string>(...keys: K[]): Array<K | `${K}_env` | `${K}_file`> {
  return keys.flatMap((k) => [k, `${k}_env` as const, `${k}_file` as const]);
}

/** Resolves `key`, `key_env` or `key_file` (exactly one may be set) into a Secret. */
export function resolveSecret(holder: SecretHolder, key: string, where: string, { env, readFile }: SecretSources): Secret | undefined {
  const inline = holder[key] as string | undefined;
  const envName = holder[`${key}_env`] as string | undefined;
  const filePath = holder[`${key}_file`] as string | undefined;
  const given = [inline, envName, filePath].filter((v) => v !== undefined).length;
  if (given > 1) throw new ConfigError(`${where}.${key}`, `is given more than one way`, `set only one of ${key}, ${key}_env, ${key}_file`);
  if (inline !== undefined) {
    if (isBlank(inline)) throw new ConfigError(`${where}.${key}`, 'is empty', `set a non-empty secret, or remove ${key}`);
    return new Secret(inline, 'inline');
  }
  if (envName !== undefined) {
    const value = env[envName];
    if (value === undefined || value === '') {
      throw new ConfigError(`${where}.${key}_env`, `environment variable ${envName} is not set`, `export ${envName} or use ${key}_file`);
    }
    if (isBlank(value)) throw new ConfigError(`${where}.${key}_env`, `environment variable ${envName} holds only white space`, `put the secret in ${envName}`);
    return new Secret(value, `env:${envName}`);
  }
  if (filePath !== undefined) {
    let value: string;
    try {
      value = readFile(filePath).replace(/\r?\n$/, '');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
      throw new ConfigError(`${where}.${key}_file`, `cannot read ${filePath} (${code})`, 'point it at a readable file holding the secret');
    }
    if (isBlank(value)) throw new ConfigError(`${where}.${key}_file`, `${filePath} is empty or only white space`, 'write the secret into the file');
    return new Secret(value, `file:${filePath}`);
  }
  return undefined;
}

/** An empty or all-white-space secret would accept an empty password: never a valid setting. */
function isBlank(value: string): boolean {
  return value.trim() === '';
}

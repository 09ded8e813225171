#!/usr/bin/env node
/**
 * The `velodex` command.
 *   velodex serve [--config FILE] [--host H] [--port P] [--data-dir DIR] [--workers N|auto]
 *   velodex check-config FILE
 *   velodex retention [--config FILE] [--dry-run] [--json]
 *   velodex retention --url URL [--token-file F] [--dry-run] [--json]
 *   velodex gc [--config FILE] [--dry-run]
 *   velodex gc --url URL [--token-file F] [--dry-run]
 */
import cluster from 'node:cluster';
import { parseArgs } from 'node:util';
import { ConfigError } from './config/errors.js';
import { loadConfigFile, loadEmbeddedDefault, type Overrides } from './config/load.js';
import { uploadTokenPath } from './config/default.js';
import type { Config, RateLimitConfig } from './config/types.js';
import type { ConnectionsConfig } from './config/connections.js';
import { ecosystems } from './app/ecosystems.js';
import { displayUrl } from './config/sanitize.js';
import { formatDuration } from './config/duration.js';
import { parseWorkersSetting } from './config/workers.js';
import { startServer, type RunningServer } from './app/server.js';
import { fixHeapGrowth } from './app/heap-growth.js';
import { retentionAtServer, retentionCommand } from './app/lifecycle/retention-command.js';
import { retentionText } from './lifecycle/retention-text.js';
import { gcAtServer, gcCommand } from './app/lifecycle/gc-command.js';
import { AdminActionError, adminToken, ADMIN_TOKEN_ENV } from './app/lifecycle/admin-client.js';
import { ClusterLink } from './workers/link.js';
import { runPrimary } from './workers/primary.js';

const USAGE = `usage:
  velodex serve [--config FILE] [--host HOST] [--port PORT] [--data-dir DIR] [--workers N|auto]
  velodex check-config FILE
  velodex retention [--config FILE] [--data-dir DIR] [--dry-run] [--json]
  velodex retention --url URL [--token-file FILE] [--dry-run] [--json]
  velodex gc [--config FILE] [--dry-run]
  velodex gc --url URL [--token-file FILE] [--dry-run]

Without --config (or VELODEX_CONFIG) velodex serves the embedded default: a hosted Python index
at /root/hosted/ and a hosted OCI index at /v2/root/oci/, stored under the data dir.
--workers (or VELODEX_WORKERS, or workers in the config): worker processes sharing the port;
auto is one per core, and one in a Kubernetes pod.
retention applies the retention rules of the hosted indexes once (untagged_after, keep_tags) and
prints what it did; --dry-run prints what it would do and changes nothing; --json prints the
report as JSON.
gc: one garbage collection of the configured store (docs/storage-lifecycle.md); --dry-run
reports what it would reclaim and changes nothing.
With --url the running server at URL does the run (POST /+admin/gc or /+admin/retention, with
its admin token from --token-file or ${ADMIN_TOKEN_ENV}); nothing is opened here. On the fs
backend with a server running, use --url: the store's locks hold only within one server.`;

function fail(message: string, code = 2): never {
  process.stderr.write(`${message}\n`);
  process.exit(code);
}

function load(configPath: string | undefined, overrides: Overrides): Config {
  return configPath ? loadConfigFile(configPath, { ecosystems, overrides }) : loadEmbeddedDefault({ ecosystems, overrides });
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      config: { type: 'string', short: 'c' },
      host: { type: 'string' },
      port: { type: 'string' },
      'data-dir': { type: 'string' },
      workers: { type: 'string' },
      'dry-run': { type: 'boolean' },
      json: { type: 'boolean' },
      url: { type: 'string' },
      'token-file': { type: 'string' },
    },
  });
  const overrides: Overrides = {};
  if (values.host !== undefined) overrides.host = values.host;
  if (values['data-dir'] !== undefined) overrides.dataDir = values['data-dir'];
  if (values.workers !== undefined) overrides.workers = parseWorkersSetting(values.workers, '--workers');
  if (values.port !== undefined) {
    const port = Number(values.port);
    if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`--port: "${values.port}" is not a port number (0-65535)`);
    overrides.port = port;
  }

  switch (command) {
    case 'serve': {
      const config = load(values.config ?? process.env.VELODEX_CONFIG, overrides);
      if (config.workers.count > 1 && cluster.isPrimary) {
        runPrimary(config);
        return;
      }
      fixHeapGrowth();
      const worker = cluster.isWorker ? new ClusterLink(config.workers.count) : undefined;
      // Signals are handled from the start: one that arrives while the server is still starting
      // stops it once it is up, instead of killing the process with unwritten log lines.
      let stopSignal: string | null = null;
      let server: RunningServer | null = null;
      let stopping = false;
      const stop = async (signal: string) => {
        stopSignal = signal;
        // Once: a worker may be told twice (Ctrl-C reaches the whole process group, then the primary's SIGTERM).
        if (!server || stopping) return;
        stopping = true;
        server.app.log.info({ signal }, 'shutting down');
        await server.close(config.connections.drainMs);
        process.exit(0);
      };
      process.once('SIGINT', () => void stop('SIGINT'));
      process.once('SIGTERM', () => void stop('SIGTERM'));
      // A worker whose primary is gone (killed) stops too, instead of serving on alone.
      if (worker) process.once('disconnect', () => void stop('disconnect'));
      // The embedded default's token file is named in the "listening" line (never the token).
      const tokenFile = config.source === 'embedded default' && !process.env.VELODEX_UPLOAD_TOKEN ? uploadTokenPath(config.dataDir) : undefined;
      server = await startServer(config, tokenFile ? { upload_token_file: tokenFile } : {}, worker);
      if (stopSignal) await stop(stopSignal);
      return;
    }
    case 'check-config': {
      const file = positionals[0] ?? values.config;
      if (!file) fail('check-config needs a file: velodex check-config FILE');
      const config = load(file, overrides);
      const lines = [`${file}: ok`, `listen: ${config.tls ? 'https' : 'http'}://${config.host}:${config.port}`, `workers: ${config.workers.reason}`, `storage: ${config.storage.backend}`];
      for (const ix of config.indexes) {
        const extra = ix.role === 'cached' ? ` upstream${ix.upstreams.length > 1 ? 's' : ''}=${ix.upstreams.map((u) => displayUrl(u.url)).join(',')}` : ix.role === 'virtual' ? ` members=${ix.members.join(',')}` : '';
        lines.push(`index ${ix.name}: /${ix.route}/ ${ix.ecosystem} ${ix.role}${extra}`);
      }
      if (config.mirrors.length > 0) lines.push(`mirror: ${config.mirrors.map((m) => `${m.registry} -> ${m.index.name}`).join(', ')}`);
      lines.push(`rate limit: ${rateLimitSummary(config.rateLimit)}`);
      lines.push(`trusted proxies: ${config.trustedProxies.length ? config.trustedProxies.map((p) => `${p.address}/${p.prefix}`).join(', ') : 'none'}`);
      lines.push(`connections: ${connectionsSummary(config.connections)}`);
      lines.push(`tls: ${config.tls ? `certificate ${config.tls.certFile}, key ${config.tls.keyFile} (read when serving)` : 'off (plain HTTP)'}`);
      lines.push(`token signing key: ${signingKeySummary(config)}`);
      lines.push(`admin token: ${adminTokenSummary(config)}`);
      lines.push(`gc: ${gcSummary(config)}`);
      process.stdout.write(`${lines.join('\n')}\n`);
      return;
    }
    case 'retention': {
      const dryRun = values['dry-run'] === true;
      const url = values.url;
      const report = url !== undefined
        ? await atServer(() => retentionAtServer(url, adminToken(values['token-file']), dryRun))
        : await retentionCommand(load(values.config ?? process.env.VELODEX_CONFIG, overrides), dryRun);
      if (report === 'busy') fail('velodex retention: a retention run is under way in another process; try again once it has finished', 75);
      // Then exit: the store's client may keep idle connections (and the process) alive.
      process.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : retentionText(report), () => process.exit(0));
      return;
    }
    case 'gc': {
      const dryRun = values['dry-run'] === true;
      const out = (line: string) => process.stdout.write(`${line}\n`);
      const url = values.url;
      const code = url !== undefined
        ? await atServer(() => gcAtServer(url, adminToken(values['token-file']), dryRun, out))
        : await gcCommand(load(values.config ?? process.env.VELODEX_CONFIG, overrides), ecosystems, dryRun, out);
      // Exits once stdout has taken every line (the store's client may keep sockets open).
      process.stdout.write('', () => process.exit(code));
      return;
    }
    default:
      fail(`unknown command "${command}"\n${USAGE}`);
  }
}

/** A `--url` run: a refusal or an unreachable server ends the command with its message and exit code 1. */
async function atServer<T>(action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (err) {
    if (err instanceof AdminActionError) fail(`velodex: ${err.message}`, 1);
    throw err;
  }
}

/** Where the token signing key comes from (its source, never its value). */
function signingKeySummary(config: Config): string {
  const key = config.auth.tokenSigningKey;
  if (key) return key.source.replace(/^(env|file):/, '$1 ');
  return config.storage.backend === 's3' ? 'generated once into the shared store' : `generated once into ${config.dataDir}/token-signing-key`;
}

/** Where the admin token comes from (never its value), or that the admin surfaces are open. */
function adminTokenSummary(config: Config): string {
  const token = config.admin.token;
  return token ? token.source.replace(/^(env|file):/, '$1 ') : 'none: /admin/status and /+status?details=admin answer anyone';
}

/** `every 6h, grace 1d, lease 1m`, or `on demand only, grace 1d, lease 1m`. */
function gcSummary(config: Config): string {
  const { enabled, everySecs, graceSecs, leaseSecs } = config.gc;
  return `${enabled ? `every ${formatDuration(everySecs)}` : 'on demand only'}, grace ${formatDuration(graceSecs)}, lease ${formatDuration(leaseSecs)}`;
}

/** `read 600/60s, write 60/60s`, or `off`. */
function rateLimitSummary(rl: RateLimitConfig): string {
  if (!rl.enabled) return 'off';
  const classes = Object.entries(rl.classes).map(([cls, w]) => `${cls} ${w.requests}/${w.windowSecs}s`);
  return classes.length ? classes.join(', ') : 'no class limited';
}

/** `headers 30s, body idle 60s, keep-alive 75s, per client: no cap`. */
function connectionsSummary(c: ConnectionsConfig): string {
  const cap = c.maxPerClient === 0 ? 'no cap' : `at most ${c.maxPerClient} per process`;
  return `headers ${c.headersTimeoutMs / 1000}s, body idle ${c.bodyIdleTimeoutMs / 1000}s, keep-alive ${c.keepAliveTimeoutMs / 1000}s, drain ${c.drainMs / 1000}s, per client: ${cap}`;
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof ConfigError) fail(err.message, 78);
  const sys = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (sys.code === 'EADDRINUSE') {
    fail(`velodex: cannot listen on ${sys.address ?? 'the address'}:${sys.port ?? '?'}: another program uses that port (stop it, or choose another port with --port or VELODEX_PORT)`, 1);
  }
  fail(`velodex: ${err instanceof Error ? err.message : String(err)}`, 1);
});

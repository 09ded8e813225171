/** Starts velodex for a loaded config: opens storage, builds the app, listens. */
import type { FastifyInstance } from 'fastify';
import type { Config } from './config/types.js';
import { ecosystems } from './ecosystems.js';
import { buildApp } from './http/app.js';
import { startupLines } from './observe/banner.js';
import { join } from 'node:path';
import { openStores } from './storage/index.js';
import { startSweeper } from './storage/sweeper.js';

export interface RunningServer {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

/** `notes`: extra fields for the "velodex listening" log line. */
export async function startServer(config: Config, notes: Record<string, string> = {}): Promise<RunningServer> {
  const stores = await openStores(config.storage, { scratchDir: join(config.dataDir, 'scratch') });
  const { app, ecosystems: running, events } = await buildApp(config, stores, ecosystems);
  const stopSweeper = startSweeper(stores, {
    onSwept: (removed) => {
      if (removed > 0) app.log.info({ event: 'staging_swept', removed }, 'removed stale staged writes left by stopped processes');
    },
    onError: (err) => app.log.warn({ err }, 'sweeping stale staged writes failed; the next sweep tries again'),
  });
  await app.listen({ host: config.host, port: config.port });
  await events.start();
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${host}:${port}`;
  app.log.info(
    {
      url,
      config: config.source,
      storage: config.storage.backend === 'fs' ? config.storage.path : `${config.storage.endpoint}/${config.storage.bucket}`,
      indexes: config.indexes.map((ix) => ({ name: ix.name, route: ix.route, ecosystem: ix.ecosystem, role: ix.role })),
      ...notes,
    },
    'velodex listening',
  );
  process.stderr.write(`${startupLines(config, url, running).join('\n')}\n`);
  return {
    app,
    url,
    async close() {
      stopSweeper();
      await app.close();
      await Promise.all(running.map((e) => e.close?.()));
      // After the app: requests still finishing may enqueue deliveries; those wait in the outbox.
      await events.close();
    },
  };
}

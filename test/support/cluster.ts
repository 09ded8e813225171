/**
 * Several velodex processes on one store, for the multi-process suites: one MinIO of the suite's
 * own (so the suite runs in every run, whatever VELODEX_TEST_STORAGE says) and `count` servers,
 * each with its own data dir and port, all configured with the same `[storage]` table (one bucket,
 * one prefix) and the same index config: what a Deployment of several replicas runs.
 */
import { startMinio, type Minio } from './minio.js';
import { s3StorageToml } from './backend.js';
import { startVelodex, type Velodex } from './velodex.js';

export interface Cluster {
  minio: Minio;
  nodes: Velodex[];
  /** Stops every server (a killed one too) and MinIO. */
  stop(): Promise<void>;
}

export async function startCluster(count: number, config: string, env: Record<string, string> = {}): Promise<Cluster> {
  const minio = await startMinio();
  const nodes: Velodex[] = [];
  const stop = async () => {
    await Promise.allSettled(nodes.map((n) => n.stop()));
    await minio.stop();
  };
  try {
    const storage = s3StorageToml(minio, 'cluster');
    for (let i = 0; i < count; i++) nodes.push(await startVelodex({ config: `${storage}\n${config}`, env }));
  } catch (err) {
    await stop();
    throw err;
  }
  return { minio, nodes, stop };
}

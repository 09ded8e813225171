/**
 * The primary of a server with several workers (`workers` > 1): it serves nothing itself. It forks
 * the workers, which all listen on the one socket (node:cluster hands each new connection to the
 * next worker), prints the start-up banner once all listen, restarts a worker that dies (with a
 * backoff, so one that dies at once does not spin), and on SIGTERM or SIGINT lets every worker
 * drain its requests and stop. It also runs what the workers share: the fs store's per-key locks
 * (`lock-table.ts`), the upstream fetches in flight (`flight-table.ts`) and the gathering of every
 * worker's counters (`link.ts`).
 *
 * A worker that fails before the first generation is listening (a port in use, a store that
 * cannot be opened) stops the server with its exit code: a restart would fail the same way.
 */
import cluster, { type Worker } from 'node:cluster';
import { pino } from 'pino';
import type { Config } from '../config/types.js';
import { loggerOptions } from '../observe/log.js';
import { allocatorEnv } from './allocator-env.js';
import { workerExecArgv } from './v8-flags.js';
import { FlightTable, type Forward } from './flight-table.js';
import { LockTable, type Holder as LockHolder } from './lock-table.js';
import { BatchedSender, messagesIn } from './batches.js';
import type { FromWorker, ToWorker } from './messages.js';

/** The environment variable that tells a forked worker its slot (0-based). */
export const WORKER_SLOT_ENV = 'VELODEX_WORKER_SLOT';

/** A worker that lived this long before dying is restarted at once; sooner, after a backoff. */
const STABLE_AFTER_MS = 30_000;
const FIRST_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 10_000;
/** A worker that has not answered a gather by then is left out of it. */
const GATHER_TIMEOUT_MS = 5_000;

interface Slot {
  index: number;
  worker: Worker | null;
  startedAt: number;
  backoffMs: number;
  listening: boolean;
}

interface Gathering {
  asker: Worker;
  askerId: number;
  waiting: Set<number>;
  parts: unknown[];
  timer: NodeJS.Timeout;
}

export function runPrimary(config: Config): void {
  const { stream, ...options } = loggerOptions(config);
  const log = pino(options, stream);
  const count = config.workers.count;
  const slots: Slot[] = Array.from({ length: count }, (_, index) => ({ index, worker: null, startedAt: 0, backoffMs: FIRST_BACKOFF_MS, listening: false }));
  const locks = new LockTable();
  const flights = new FlightTable();
  const gatherings = new Map<number, Gathering>();
  let nextGather = 1;
  let announced = false;
  let stopping = false;
  let exitCode = 0;

  // What the primary tells each worker within one turn goes as one batch (batches.ts).
  const outboxes = new Map<Worker, BatchedSender<ToWorker>>();
  const send = (worker: Worker, msg: ToWorker): void => {
    if (!worker.isConnected()) return;
    let outbox = outboxes.get(worker);
    if (!outbox) {
      outbox = new BatchedSender<ToWorker>((batch) => {
        if (worker.isConnected()) worker.send(batch);
      });
      outboxes.set(worker, outbox);
    }
    outbox.send(msg);
  };
  const grant = (h: LockHolder): void => {
    const w = cluster.workers?.[h.worker];
    if (w) send(w, { velodex: 'locked', id: h.id, ...(locks.releasedSince(h) ? { releasedSince: true } : {}) });
  };
  const forward = (f: Forward | undefined): void => {
    for (const to of f?.to ?? []) {
      const w = cluster.workers?.[to];
      if (w) send(w, { velodex: 'flight', flight: f!.flight, event: f!.event });
    }
  };

  const finishGather = (id: number): void => {
    const g = gatherings.get(id);
    if (!g) return;
    gatherings.delete(id);
    clearTimeout(g.timer);
    send(g.asker, { velodex: 'gathered', id: g.askerId, parts: g.parts });
  };

  const onMessage = (worker: Worker, msg: FromWorker): void => {
    switch (msg.velodex) {
      case 'listening': {
        const slot = slots.find((s) => s.worker === worker);
        if (slot) slot.listening = true;
        if (!announced && slots.every((s) => s.listening)) {
          announced = true;
          log.info({ ...msg.fields, url: msg.url, workers: count }, 'velodex listening');
          process.stderr.write(`${msg.banner.join('\n')}\n`);
        } else if (announced) {
          log.info({ worker: slot?.index, worker_pid: worker.process.pid }, 'worker restarted and listening');
        }
        return;
      }
      case 'lock': {
        const holder: LockHolder = { worker: worker.id, id: msg.id, ...(msg.since !== undefined ? { since: msg.since } : {}) };
        if (locks.request(msg.key, holder)) grant(holder);
        return;
      }
      case 'unlock': {
        const next = locks.release({ worker: worker.id, id: msg.id });
        if (next) grant(next);
        return;
      }
      case 'fly': {
        const joined = flights.join(msg.key, worker.id, msg.since);
        send(worker, { velodex: 'flying', id: msg.id, flight: joined.flight, lead: joined.lead, ...(joined.endedSince ? { endedSince: true } : {}) });
        for (const event of joined.catchUp) send(worker, { velodex: 'flight', flight: joined.flight, event });
        return;
      }
      case 'flight':
        forward(flights.fromLeader(worker.id, msg.flight, msg.event));
        return;
      case 'gather': {
        const id = nextGather++;
        const live = slots.flatMap((s) => (s.worker && s.listening && s.worker.isConnected() ? [s.worker] : []));
        const g: Gathering = { asker: worker, askerId: msg.id, waiting: new Set(live.map((w) => w.id)), parts: [], timer: setTimeout(() => finishGather(id), GATHER_TIMEOUT_MS) };
        gatherings.set(id, g);
        for (const w of live) send(w, { velodex: 'ask', id, topic: msg.topic });
        if (g.waiting.size === 0) finishGather(id);
        return;
      }
      case 'part': {
        const g = gatherings.get(msg.id);
        if (!g?.waiting.delete(worker.id)) return;
        if (msg.error === undefined && msg.part !== undefined) g.parts.push(msg.part);
        else if (msg.error !== undefined) log.warn({ worker: worker.id, error: msg.error }, 'a worker failed to report its counters');
        if (g.waiting.size === 0) finishGather(msg.id);
        return;
      }
    }
  };

  // Workers start with the serving V8 flags (v8-flags.ts) whether or not this process has them.
  cluster.setupPrimary({ execArgv: workerExecArgv(process.execArgv) });
  const fork = (slot: Slot): void => {
    const worker = cluster.fork({ ...allocatorEnv(process.env), [WORKER_SLOT_ENV]: String(slot.index) });
    slot.worker = worker;
    slot.startedAt = Date.now();
    slot.listening = false;
    worker.on('message', (received: unknown) => {
      for (const msg of messagesIn<FromWorker>(received)) onMessage(worker, msg);
    });
  };

  cluster.on('exit', (worker, code, signal) => {
    const slot = slots.find((s) => s.worker === worker);
    outboxes.delete(worker);
    for (const h of locks.dropWorker(worker.id)) grant(h);
    for (const f of flights.dropWorker(worker.id)) forward(f);
    for (const [id, g] of gatherings) {
      if (g.asker === worker) {
        clearTimeout(g.timer);
        gatherings.delete(id);
      } else if (g.waiting.delete(worker.id) && g.waiting.size === 0) finishGather(id);
    }
    if (!slot) return;
    slot.worker = null;
    if (!announced && !stopping) {
      // Failed while starting: the worker said why on stderr, and the others would fail alike.
      stopping = true;
      exitCode = code || 1;
      for (const s of slots) s.worker?.process.kill('SIGTERM');
    }
    if (stopping) {
      if (slots.every((s) => s.worker === null)) {
        if (exitCode === 0) log.info('velodex stopped');
        process.exit(exitCode);
      }
      return;
    }
    const lived = Date.now() - slot.startedAt;
    slot.backoffMs = lived >= STABLE_AFTER_MS ? FIRST_BACKOFF_MS : Math.min(slot.backoffMs * 2, MAX_BACKOFF_MS);
    const delay = lived >= STABLE_AFTER_MS ? 0 : slot.backoffMs;
    log.warn({ worker: slot.index, worker_pid: worker.process.pid, code, signal, restart_in_ms: delay }, 'worker exited; restarting it');
    setTimeout(() => {
      if (!stopping) fork(slot);
    }, delay).unref();
  });

  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) {
      // A second signal: stop now.
      for (const s of slots) s.worker?.process.kill('SIGKILL');
      return;
    }
    stopping = true;
    log.info({ signal }, 'shutting down: workers finish their requests');
    for (const s of slots) s.worker?.process.kill('SIGTERM');
    if (slots.every((s) => s.worker === null)) process.exit(0);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  for (const slot of slots) fork(slot);
}


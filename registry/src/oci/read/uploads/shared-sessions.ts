/**
 * Upload sessions in the shared store (the s3 backend): a session is a shared stage
 * (`storage/shared-stages.ts`) whose owner is the index and repository, so a chunked push's POST,
 * PATCHes, status GETs and PUT may each reach another process. Two requests that change one
 * session at once (on any processes) are told apart by the stage's compare-and-swap: the one that
 * loses leaves no trace and gets the spec's 416 with the range the session has, as with the
 * in-memory sessions' busy refusal. Idle sessions are swept by every process, by age.
 */
import type { Readable } from 'node:stream';
import type { SharedStage, SharedStages } from '../../../storage/shared-stages.js';
import { ConflictError, type Sha256Hex } from '../../../storage/types.js';
import { SessionBusyError, SessionGoneError, sweepEvery, type UploadSession, type UploadSessions } from './upload-sessions.js';

interface Owner {
  index: string;
  repo: string;
}

interface SharedSession extends UploadSession {
  readonly stage: SharedStage<Owner>;
}

/** Every process sweeps this often (a listing of the sessions, and of old chunks). */
const SWEEP_EVERY_MS = 5 * 60 * 1000;

export class SharedUploadSessions implements UploadSessions {
  readonly #timer: NodeJS.Timeout;

  constructor(private readonly stages: SharedStages) {
    this.#timer = sweepEvery(() => stages.sweep(), Math.min(SWEEP_EVERY_MS, stages.idleMs));
  }

  async open(indexName: string, repo: string): Promise<UploadSession> {
    return sessionOf(await this.stages.open<Owner>({ index: indexName, repo }));
  }

  async get(id: string, indexName: string, repo: string): Promise<UploadSession | undefined> {
    const stage = await this.stages.get<Owner>(id);
    if (!stage || stage.doc.owner.index !== indexName || stage.doc.owner.repo !== repo) return undefined;
    return sessionOf(stage);
  }

  append(s: UploadSession, source: Readable, declared?: number): Promise<UploadSession> {
    return this.#changing(s, async (stage) => sessionOf(await this.stages.append(stage, source, declared === undefined ? {} : { declared })));
  }

  commit(s: UploadSession, expected: Sha256Hex, last: Readable | null, beforePublish: (size: number) => Promise<void>, declared?: number): Promise<void> {
    return this.#changing(s, async (stage) => {
      await this.stages.commit(stage, expected, { ...(last === null ? {} : { last, ...(declared === undefined ? {} : { declared }) }), beforePublish });
    });
  }

  cancel(s: UploadSession): Promise<void> {
    return this.#changing(s, async (stage) => {
      // A commit under way (or cut short, for its retry to finish) is not pulled from under it.
      if (stage.doc.committing !== undefined) throw new ConflictError(stage.id);
      await this.stages.discard(stage);
    });
  }

  /** Runs a change; a conflict becomes the session's answer: busy with its range now, or gone. */
  async #changing<R>(s: UploadSession, fn: (stage: SharedStage<Owner>) => Promise<R>): Promise<R> {
    try {
      return await fn((s as SharedSession).stage);
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      const now = await this.stages.get<Owner>(s.id);
      if (now === null) throw new SessionGoneError(s.id);
      throw new SessionBusyError(sessionOf(now));
    }
  }

  close(): Promise<void> {
    clearInterval(this.#timer);
    return Promise.resolve();
  }
}

function sessionOf(stage: SharedStage<Owner>): SharedSession {
  return { id: stage.id, indexName: stage.doc.owner.index, repo: stage.doc.owner.repo, size: stage.doc.size, stage };
}

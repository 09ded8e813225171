/**
 * A lease in the MetaStore: one holder at a time across every process and replica sharing the
 * store, for work that should not run twice at once (a collection). One document,
 *
 *   lifecycle/leases/<name>   { owner, takenAt, expiresAt }
 *
 * written only by compare-and-swap: `acquire` creates it (absent), takes it over (expired), or
 * renews it (its own); `renew` extends it on the version this holder last wrote, so a holder that
 * lost it (expired and taken over) learns so at its next renewal; `release` deletes it on that
 * version. A holder killed mid-run writes nothing more: its lease simply expires. Clocks of
 * different machines are compared here (expiry), so the lease time must be well above their skew.
 */
import { ConflictError, type MetaStore } from '../storage/types.js';

export interface LeaseDoc {
  /** Who holds it: a process's name, for people reading it. */
  owner: string;
  takenAt: number;
  expiresAt: number;
}

export class Lease {
  /** The version this holder last wrote; null while it does not hold the lease. */
  #version: string | null = null;

  constructor(
    private readonly meta: MetaStore,
    readonly name: string,
    readonly owner: string,
    readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {
    if (!/^[a-z0-9-]+$/.test(name)) throw new Error(`invalid lease name: ${name}`);
  }

  get key(): string {
    return `lifecycle/leases/${this.name}`;
  }

  get held(): boolean {
    return this.#version !== null;
  }

  /** The lease as stored now, or null (nobody holds it). */
  async current(): Promise<LeaseDoc | null> {
    return (await this.meta.get<LeaseDoc>(this.key))?.doc ?? null;
  }

  /**
   * Takes the lease when nobody holds it or its holder's time ran out; null then, else the lease
   * someone else holds (nothing written).
   */
  async acquire(): Promise<LeaseDoc | null> {
    const got = await this.meta.get<LeaseDoc>(this.key);
    const now = this.now();
    if (got && got.doc.expiresAt > now && got.version !== this.#version) return got.doc;
    try {
      this.#version = await this.meta.put<LeaseDoc>(this.key, { owner: this.owner, takenAt: now, expiresAt: now + this.ttlMs }, got ? got.version : null);
      return null;
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      // Another contender got there first.
      this.#version = null;
      return (await this.current()) ?? { owner: 'unknown', takenAt: now, expiresAt: now };
    }
  }

  /** Extends the lease by its time from now; false when it was lost (taken over after expiring). */
  async renew(): Promise<boolean> {
    if (this.#version === null) return false;
    const now = this.now();
    const got = await this.meta.get<LeaseDoc>(this.key);
    if (!got || got.version !== this.#version) {
      this.#version = null;
      return false;
    }
    try {
      this.#version = await this.meta.put<LeaseDoc>(this.key, { ...got.doc, expiresAt: now + this.ttlMs }, got.version);
      return true;
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      this.#version = null;
      return false;
    }
  }

  /** Gives the lease up, if this holder still has it. */
  async release(): Promise<void> {
    const version = this.#version;
    this.#version = null;
    if (version === null) return;
    try {
      await this.meta.delete(this.key, version);
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
    }
  }
}

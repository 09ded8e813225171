/**
 * What a reader of the counters needs of the other worker processes of its server: every
 * worker's answer to a topic, gathered when asked, and this worker's own answer. The worker link
 * implements it (workers/link.ts: through the primary, or in-process for a server of one
 * process); instruments take only this, so observe/ depends on no worker machinery.
 */
export interface WorkerPeers {
  /** How many worker processes serve (1: this process alone). */
  readonly workers: number;
  /** Every live worker's answer to `topic`, this one's included. */
  gather<T>(topic: string): Promise<T[]>;
  /** This worker's answer to `topic`, computed when asked. */
  provide(topic: string, answer: () => unknown): void;
}

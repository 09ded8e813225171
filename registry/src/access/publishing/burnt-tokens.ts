/**
 * Minted upload tokens revoked before their end (`POST /_/oidc/burn-token`, which uv calls once it
 * has published): one small document in the store, every token's `jti` and when it would have
 * ended, so every replica refuses a burnt token; entries that have ended anyway are dropped on
 * every write. Changes are compare-and-swap, so two burns at once both land.
 */
import { ConflictError, type MetaStore } from '../../storage/types.js';

const KEY = 'auth/burnt-publish-tokens';
/** Only tokens this registry minted get here, at the rate CI publishes; past this the soonest to end go first. */
const MAX_ENTRIES = 10_000;
const ATTEMPTS = 8;

interface BurntDoc {
  /** `jti` -> when the token ends (ms since the epoch). */
  tokens: Record<string, number>;
}

export class BurntTokens {
  readonly #meta: MetaStore;

  constructor(meta: MetaStore) {
    this.#meta = meta;
  }

  async burn(jti: string, endsAt: number, now: number = Date.now()): Promise<void> {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const found = await this.#meta.get<BurntDoc>(KEY);
      const live = Object.entries(found?.doc.tokens ?? {}).filter(([, end]) => end > now);
      live.push([jti, endsAt]);
      live.sort((a, b) => b[1] - a[1]);
      try {
        await this.#meta.put<BurntDoc>(KEY, { tokens: Object.fromEntries(live.slice(0, MAX_ENTRIES)) }, found ? found.version : null);
        return;
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
      }
    }
    throw new Error(`could not record the burnt token: ${KEY} kept changing under ${ATTEMPTS} attempts`);
  }

  async isBurnt(jti: string): Promise<boolean> {
    const found = await this.#meta.get<BurntDoc>(KEY);
    return found?.doc.tokens[jti] !== undefined;
  }
}

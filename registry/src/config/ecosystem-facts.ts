/**
 * What the config loader must know about an ecosystem, and nothing more: its name, the roles this
 * build serves for it, the grammar of its index routes and its entry in the embedded default.
 * The ecosystems supply these facts (the composition root lists them); config names none.
 */
import type { Role } from './types.js';

export interface EcosystemFacts {
  /** The `ecosystem = "..."` of an index. */
  readonly id: string;
  /** Roles this build serves; any other is refused at load, naming the key. */
  readonly roles: readonly Role[];
  /** One route segment, and the rule in words for the error message. */
  readonly routeSegment: { pattern: RegExp; rule: string };
  /** The index the embedded default serves for this ecosystem (hosted, with the shared token). */
  readonly embeddedDefault: { name: string; route: string };
  /**
   * Its hosted indexes take retention rules (`untagged_after`, `keep_tags`): it has tags and
   * untagged items a run may delete. Absent: those keys are refused on its indexes.
   */
  readonly retention?: boolean;
  /**
   * Its cached indexes can serve an upstream registry named by host on the request (`[[mirror]]`,
   * config/mirrors.ts); `aliases` folds other spellings of one registry into the one its clients
   * send. Absent: `[[mirror]]` refuses its indexes.
   */
  readonly mirror?: { readonly aliases: Readonly<Record<string, string>> };
}

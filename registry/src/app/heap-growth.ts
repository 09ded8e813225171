/**
 * How far V8 lets the old generation grow between full collections, fixed for a serving process.
 *
 * V8 (Node 20) sizes the next limit from what it sees at a full collection. One that runs while
 * the server idles (the memory reducer's, or any other) sees almost no allocation and a shrunken
 * young generation, and sets the limit a few MB above the live heap: less room than the young
 * generation takes once traffic resumes. V8 then starts marking again right after every full
 * collection, and since streaming a large body promotes little, the limit never grows back:
 * every GiB served from s3 cost 2.5-3.5 s of CPU instead of about 0.9, for as long as the process
 * lived (docs/benchmarks.md, issue 26). A fixed factor gives room in proportion to the live heap
 * (some 26 MB here). Twice the live heap (100 %) was not enough on a loaded machine, where the
 * young generation grows larger; three times (200 %) held. The flag is read at every limit
 * computation, so setting it at start (after V8 is up) takes effect.
 */
import { setFlagsFromString } from 'node:v8';

/** The old generation may grow to three times its live size before the next full collection. */
const HEAP_GROWING_PERCENT = 200;

export function fixHeapGrowth(): void {
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}

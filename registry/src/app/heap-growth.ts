/**
 * How far V8 lets the old generation grow between full collections, fixed for a serving process.
 *
 * V8 (Node 20) sizes the next limit from the allocation rate seen at a full collection. One that
 * runs while the server idles (the memory reducer's, or any other) sees almost none and sets the
 * limit a few MB above the live heap, less than the young generation holds once traffic resumes.
 * V8 then starts marking again right after every full collection, and since streaming a large
 * body promotes little, the limit never grows back: each 16 MiB blob served cost about 2.5 s of
 * CPU per GiB instead of 0.4, for as long as the process lived (docs/benchmarks.md, issue 26).
 * A fixed factor keeps the room at the live heap's size (some 30 MB here), so marking starts only
 * once the heap has doubled. The flag is read at every limit computation, so setting it at start
 * (after V8 is up) takes effect.
 */
import { setFlagsFromString } from 'node:v8';

/** The old generation may grow to twice its live size before the next full collection. */
const HEAP_GROWING_PERCENT = 100;

export function fixHeapGrowth(): void {
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}

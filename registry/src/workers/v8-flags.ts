/**
 * The V8 flags a serving process starts with: a primary gives them to the workers it forks
 * (`execArgv`), and the image's one process has them on its command line (Dockerfile).
 *
 * `--no-memory-reducer`. Once a process has been idle for some seconds, V8's memory reducer runs
 * full collections that hand the heap back to the system, the young generation included. The next
 * burst of requests starts on that small heap: with `--trace-gc`, a cold pull after 11 s of
 * idleness scavenged every 1 MB or so of allocation, where the same pull right after other work
 * scavenged every 8-16 MB. Six images pulled cold through a cached index after 11 s of idleness
 * cost this process 0.39-0.49 s of CPU with the reducer and 0.30-0.34 s without it (0.26-0.30 s
 * with no idle time before them; issue 26, docs/benchmarks.md). With two workers, the primary
 * alone spent 0.09-0.12 s of such a pull with the reducer and 0.02-0.03 s without: it needs the
 * flag on its own command line (the image's has it). A registry's cold pulls are mostly bursts. Without the reducer an idle server keeps the heap its last burst used, as
 * before bounded by V8's heap limit.
 *
 * V8 reads the flag when it sets the heap up, so it must be on the command line: set later with
 * `v8.setFlagsFromString` it changes nothing (measured), unlike the growth factor of
 * `app/heap-growth.ts`, which V8 reads at every collection.
 */
export const SERVING_V8_FLAGS: readonly string[] = ['--no-memory-reducer'];

/** A forked worker's `execArgv`: the primary's own, then the serving flags it lacks. */
export function workerExecArgv(execArgv: readonly string[]): string[] {
  return [...execArgv, ...SERVING_V8_FLAGS.filter((flag) => !execArgv.includes(flag))];
}

/**
 * The C allocator's setting for a serving process, given through its environment.
 *
 * glibc's malloc gives the free memory at the top of its heap back to the kernel once more than
 * 128 KiB is free there (its trim threshold). Node reads every socket into a fresh 64 KiB buffer,
 * and a large body streamed through the server frees them in batches, at each young-generation
 * collection; each batch was handed back and the next one's pages faulted in anew: about 250,000
 * page faults and 0.4 s of kernel CPU per GiB served from s3 (docs/benchmarks.md, issue 26). With
 * 32 MiB the pages of one batch serve the next; the process keeps at most that much more.
 *
 * glibc reads it only when a process starts: the image sets it for the server (Dockerfile), and a
 * primary sets it for the workers it forks unless its own environment already names tunables.
 * Other C libraries (musl) ignore the variable.
 */
export const MALLOC_TUNABLES = 'glibc.malloc.trim_threshold=33554432';

/** What a forked worker's environment adds: the tunables, unless the operator set their own. */
export function allocatorEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  return env.GLIBC_TUNABLES === undefined ? { GLIBC_TUNABLES: MALLOC_TUNABLES } : {};
}

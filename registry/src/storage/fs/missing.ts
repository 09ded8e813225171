/** The filesystem backend's one answer to "no such file": the operation's result, or null. */

/** Resolves to `op`'s value, or to null when `op` failed because the path does not exist. */
export async function unlessMissing<T>(op: Promise<T>): Promise<T | null> {
  try {
    return await op;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

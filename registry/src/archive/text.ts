/** Text-or-binary sniffing for previews, shared by every ecosystem that shows member bytes. */

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The length of `bytes` without a multi-byte UTF-8 sequence cut off at its end, so that a preview
 * page can stop on a character boundary (and the next page start on one).
 */
export function utf8SafeLength(bytes: Uint8Array): number {
  const n = bytes.length;
  // Walk back over at most 3 continuation bytes to the lead byte of the last sequence.
  for (let back = 1; back <= Math.min(4, n); back++) {
    const b = bytes[n - back] ?? 0;
    if ((b & 0xc0) === 0x80) continue; // continuation byte
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

/**
 * True when `bytes` look like text: valid UTF-8 and no NUL. With `partial`, a sequence cut off at
 * the very end (a page of a longer member) does not count against it.
 */
export function isProbablyText(bytes: Uint8Array, opts: { partial?: boolean } = {}): boolean {
  if (bytes.includes(0)) return false;
  const view = opts.partial ? bytes.subarray(0, utf8SafeLength(bytes)) : bytes;
  try {
    strictUtf8.decode(view);
    return true;
  } catch {
    return false;
  }
}

/** Whether a member of `size` bytes whose first bytes are `head` looks like text. */
export function headLooksLikeText(head: Uint8Array, size: number): boolean {
  return isProbablyText(head, { partial: head.length < size });
}

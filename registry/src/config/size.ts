/**
 * Sizes in the config: a number of bytes, or a string of digits (a fraction allowed) and a unit.
 * Decimal units `k`/`K`/`KB`, `M`/`MB`, `G`/`GB`, `T`/`TB`; binary `Ki`/`KiB`, `Mi`/`MiB`,
 * `Gi`/`GiB`, `Ti`/`TiB` (so Kubernetes quantities such as `10Gi` read as they do there); `B` or no
 * unit for bytes.
 */

const UNIT_BYTES: Record<string, number> = {
  '': 1,
  B: 1,
  k: 1e3,
  K: 1e3,
  KB: 1e3,
  M: 1e6,
  MB: 1e6,
  G: 1e9,
  GB: 1e9,
  T: 1e12,
  TB: 1e12,
  Ki: 2 ** 10,
  KiB: 2 ** 10,
  Mi: 2 ** 20,
  MiB: 2 ** 20,
  Gi: 2 ** 30,
  GiB: 2 ** 30,
  Ti: 2 ** 40,
  TiB: 2 ** 40,
};

export const SIZE_PATTERN = /^\d+(?:\.\d+)? ?(?:B|[kKMGT]B?|[KMGT]iB?)?$/;

/** Whole bytes (rounded down), or null when `value` is not a size or not above zero. */
export function parseSize(value: number | string): number | null {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value > 0 ? value : null;
  const text = value.trim();
  if (!SIZE_PATTERN.test(text)) return null;
  const m = /^(\d+(?:\.\d+)?) ?(.*)$/.exec(text);
  const unit = UNIT_BYTES[m?.[2] ?? ''];
  if (!m || unit === undefined) return null;
  const bytes = Math.floor(Number(m[1]) * unit);
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : null;
}

/** A readable spelling in binary units with one decimal, for messages and pages: `12.3 MiB`, `512 B`. */
export function formatSize(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let value = bytes;
  let i = 0;
  while (value >= 1024 && i < units.length - 1) {
    value /= 1024;
    i += 1;
  }
  return i === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[i]}`;
}

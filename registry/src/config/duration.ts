/** Durations in the config: a number of seconds, or a string like `90s`, `30m`, `12h`, `7d`, `1w2d`. */

const UNIT_SECS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };
export const DURATION_PATTERN = /^(?:\d+[smhdw])+$/;

/** Seconds, or null when `value` is not a duration. */
export function parseDuration(value: number | string): number | null {
  if (typeof value === 'number') return Number.isInteger(value) && value >= 0 ? value : null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  if (!DURATION_PATTERN.test(text)) return null;
  let secs = 0;
  for (const m of text.matchAll(/(\d+)([smhdw])/g)) secs += Number(m[1]) * (UNIT_SECS[m[2] ?? 's'] ?? 1);
  return secs;
}

/** The shortest readable spelling, for messages: `7d`, `1h30m`, `45s`. */
export function formatDuration(secs: number): string {
  if (secs <= 0) return '0s';
  let rest = Math.floor(secs);
  let out = '';
  for (const [unit, size] of [['d', 86_400], ['h', 3600], ['m', 60], ['s', 1]] as const) {
    if (rest >= size) {
      out += `${Math.floor(rest / size)}${unit}`;
      rest %= size;
    }
  }
  // Under a second.
  return out || '0s';
}

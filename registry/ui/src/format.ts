/** How the pages write sizes, shares and spans of time: binary units, one decimal. */
export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

/** A share in percent: one decimal below 10 %, whole above; a little is "<0.1%", never "0%". */
export function percent(part: number, whole: number): string {
  const p = (100 * part) / whole;
  if (p > 0 && p < 0.05) return '<0.1%';
  return `${p < 10 ? p.toFixed(1) : Math.round(p)}%`;
}

/** The two largest units, the smaller left out when zero: "30 d", "2 d 5 h", "3 min 4 s". */
export function duration(secs: number): string {
  const d = Math.floor(secs / 86400);
  const hh = Math.floor((secs % 86400) / 3600);
  const m = Math.floor((secs % 3600) / 60);
  const s = secs % 60;
  const two = (big: number, bigUnit: string, small: number, smallUnit: string) => (small ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`);
  return d ? two(d, 'd', hh, 'h') : hh ? two(hh, 'h', m, 'min') : m ? two(m, 'min', s, 's') : `${s} s`;
}

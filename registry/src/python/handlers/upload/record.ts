/**
 * A wheel's RECORD: CSV rows `path,hash,size` where hash is `algorithm=urlsafe-base64-digest`
 * (no padding) and size a decimal byte count. RECORD itself (and its signatures) carry neither.
 */
import { badUpload } from './errors.js';
import { MAX_MEMBERS } from './limits.js';
import { unsafeMemberReason } from '../../../http/member-path.js';

export interface RecordEntry {
  path: string;
  /** Lowercase hashlib name, e.g. `sha256`; absent when the row has no hash. */
  algorithm?: string;
  /** urlsafe base64 without padding. */
  digest?: string;
  size?: number;
}

/** Algorithms accepted in RECORD: sha256 or stronger, as the wheel spec requires. */
export const RECORD_ALGORITHMS = new Set(['sha256', 'sha384', 'sha512']);

export function parseRecord(bytes: Buffer, where: string): Map<string, RecordEntry> {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw badUpload(`${where} is not valid UTF-8`);
  }
  const entries = new Map<string, RecordEntry>();
  for (const [line, row] of parseCsv(text, where)) {
    if (row.length === 1 && row[0] === '') continue; // blank line
    if (row.length < 3) throw badUpload(`${where} line ${line}: expected path,hash,size`);
    const [path = '', hash = '', size = ''] = row;
    const unsafe = unsafeMemberReason(path);
    if (unsafe) throw badUpload(`${where} line ${line}: unsafe path ${JSON.stringify(path)} (${unsafe})`);
    if (entries.has(path)) throw badUpload(`${where} lists ${path} twice`);
    if (entries.size >= MAX_MEMBERS) throw badUpload(`${where} has more than ${MAX_MEMBERS} entries`);
    const entry: RecordEntry = { path };
    if (hash !== '') {
      const eq = hash.indexOf('=');
      if (eq <= 0) throw badUpload(`${where} line ${line}: hash ${JSON.stringify(hash)} is not algorithm=digest`);
      entry.algorithm = hash.slice(0, eq).toLowerCase();
      // Padding is not supposed to be there; tolerate it rather than refuse a correct digest.
      entry.digest = hash.slice(eq + 1).replace(/=+$/, '');
      if (!/^[A-Za-z0-9_-]+$/.test(entry.digest)) throw badUpload(`${where} line ${line}: the digest of ${path} is not urlsafe base64`);
    }
    if (size !== '') {
      if (!/^\d{1,15}$/.test(size)) throw badUpload(`${where} line ${line}: size ${JSON.stringify(size)} of ${path} is not a byte count`);
      entry.size = Number(size);
    }
    entries.set(path, entry);
  }
  return entries;
}

/** Minimal RFC 4180 reader (quoted fields, doubled quotes, CRLF or LF), yielding line numbers. */
function* parseCsv(text: string, where: string): Generator<[number, string[]]> {
  let i = 0;
  let line = 1;
  while (i < text.length) {
    const startLine = line;
    const row: string[] = [];
    for (;;) {
      let field = '';
      if (text[i] === '"') {
        i++;
        for (;;) {
          if (i >= text.length) throw badUpload(`${where} line ${startLine}: unterminated quoted field`);
          const c = text[i] ?? '';
          if (c === '"') {
            if (text[i + 1] === '"') {
              field += '"';
              i += 2;
              continue;
            }
            i++;
            break;
          }
          if (c === '\n') line++;
          field += c;
          i++;
        }
      } else {
        while (i < text.length && text[i] !== ',' && text[i] !== '\n' && text[i] !== '\r') field += text[i++] ?? '';
      }
      row.push(field);
      if (text[i] === ',') {
        i++;
        continue;
      }
      break;
    }
    if (text[i] === '\r') i++;
    if (i < text.length && text[i] !== '\n') throw badUpload(`${where} line ${startLine}: malformed CSV`);
    i++;
    line++;
    yield [startLine, row];
  }
}

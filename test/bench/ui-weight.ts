/**
 * What each web UI page's first load moves: the page's own script and stylesheet (found in its
 * HTML, fetched as a browser does, with `Accept-Encoding: gzip, deflate, br`), counted in bytes
 * on the wire (compressed), against the 200 KiB budget of issue 14. The data documents a page
 * reads are not part of the bundle and are not counted.
 */
import { request } from 'node:http';

const BUDGET = 200 * 1024;
const PAGES = ['/', '/admin/status', '/browse', '/stats'];

/** Bytes of a response body as sent (no decompression). */
function wireBytes(url: string): Promise<{ bytes: number; encoding: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { 'accept-encoding': 'gzip, deflate, br' } }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => (res.statusCode === 200 ? resolve({ bytes, encoding: String(res.headers['content-encoding'] ?? 'identity') }) : reject(new Error(`${url}: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

export async function measureUiWeight(baseUrl: string): Promise<string> {
  const lines = ['### Web UI: JavaScript and CSS moved by each page\'s first load (compressed, as sent to a browser)', '', '| page | script + stylesheet | encoding | of the 200 KiB budget |', '|---|--:|---|--:|'];
  for (const page of PAGES) {
    const html = await (await fetch(`${baseUrl}${page}`)).text();
    const assets = [...html.matchAll(/(?:src|href)="(\/pkg\/[^"]+)"/g)].map((m) => m[1]!);
    let total = 0;
    const encodings = new Set<string>();
    for (const asset of assets) {
      const { bytes, encoding } = await wireBytes(`${baseUrl}${asset}`);
      total += bytes;
      encodings.add(encoding);
    }
    lines.push(`| \`${page}\` | ${(total / 1024).toFixed(1)} KiB | ${[...encodings].join(', ')} | ${((100 * total) / BUDGET).toFixed(1)} % |`);
  }
  return `${lines.join('\n')}\n`;
}

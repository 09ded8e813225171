/**
 * The yardstick for large downloads: the plainest Node file server there is. `GET /<name>` streams
 * the file `name` was given as, with Content-Length, through `fs.createReadStream(...).pipe(res)`;
 * no framework, no routing, no checks, no logging. What velodex does more (resolve the index, look
 * up the blob, check holds, count, verify) is what the ratio against it costs.
 *
 *   node --import tsx test/bench/bare-file-server.ts PORT name=/path/to/file ...
 */
import { createReadStream, statSync } from 'node:fs';
import { createServer } from 'node:http';

const [port, ...pairs] = process.argv.slice(2);
const files = new Map<string, { path: string; size: number }>(
  pairs.map((pair) => {
    const at = pair.indexOf('=');
    const path = pair.slice(at + 1);
    return [`/${pair.slice(0, at)}`, { path, size: statSync(path).size }] as const;
  }),
);

createServer((req, res) => {
  const file = files.get(req.url ?? '');
  if (!file) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': file.size });
  createReadStream(file.path).pipe(res);
}).listen(Number(port), '127.0.0.1');

import { spawn } from 'node:child_process';
import { mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildImage, writeLayout } from '../support/oci-image.js';
import { tool } from '../support/paths.js';
import { run } from '../support/run.js';
import { startDistribution } from '../support/distribution.js';
import { tempDir, freePort } from '../support/velodex.js';

const MiB = 1024 * 1024;
const work = tempDir('coldprobe-');
const env = { HOME: work, DOCKER_CONFIG: join(work, 'docker') };
const up = await startDistribution(work, null);
const repos: string[] = [];
for (let i = 0; i < 7; i++) {
  const image = buildImage({ seed: `probe-${i}`, layers: 4, bigFileSize: 4 * MiB });
  const layout = writeLayout(join(work, `l${i}`), [{ tag: 'v1', item: image }]);
  await run(tool('crane'), ['push', '--insecure', layout, `${up.host}/p/i${i}:v1`], { env });
  repos.push(`p/i${i}`);
}
const warm = repos.pop()!;
{
}
const port = await freePort();
const data = join(work, 'vx');
mkdirSync(data);
writeFileSync(join(data, 'v.toml'), `[[index]]\nname="c"\nroute="c"\necosystem="oci"\ncached="${up.url}"\n`);
const strace = process.env.STRACE === '1';
const args = ['registry/dist/cli.js', 'serve', '--port', String(port), '--data-dir', data, '--config', join(data, 'v.toml')];
const child = spawn(process.execPath, [...(process.env.PROF ? ['--cpu-prof', '--cpu-prof-dir=/tmp/probe'] : []), ...args], { stdio: ['ignore', process.env.LVL ? openSync('/tmp/probe/vx.log', 'w') : 'inherit', 'inherit'], env: { ...process.env, VELODEX_WORKERS: '1', VELODEX_LOG_LEVEL: process.env.LVL ?? 'warn' } });
for (let i = 0; i < 100; i++) {
  try { const r = await fetch(`http://127.0.0.1:${port}/healthz`); if (r.ok) break; } catch {}
  await new Promise((r) => setTimeout(r, 100));
}
let st: ReturnType<typeof spawn> | undefined;
if (strace) {
  st = spawn('strace', ['-f', '-c', '-w', '-o', '/tmp/probe/strace.txt', '-p', String(child.pid)], { stdio: 'inherit' });
  await new Promise((r) => setTimeout(r, 1000));
}
if (process.env.WARMUP) await run(tool('crane'), ['pull', '--insecure', '--format', 'oci', `127.0.0.1:${port}/c/${warm}:v1`, join(work, 'warmup')], { env });
await new Promise((r) => setTimeout(r, 1000));
const d0 = performance.now();
await Promise.all(repos.map((r, i) => run(tool('crane'), ['pull', '--insecure', '--format', 'oci', `${up.host}/${r}:v1`, join(work, 'direct', String(i))], { env })));
console.log('direct ms', (performance.now() - d0).toFixed(0));
const cpu = (pid: number) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' '); return (Number(f[11]) + Number(f[12])) * 10; };
const machine = () => { const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number); return { busy: f[0]! + f[1]! + f[2]! + f[5]! + f[6]!, all: f.reduce((a, b) => a + b, 0) }; };
const c0 = cpu(child.pid!); const m0 = machine();
const t0 = performance.now();
await Promise.all(repos.map((r, i) => run(tool('crane'), ['pull', '--insecure', '--format', 'oci', `127.0.0.1:${port}/c/${r}:v1`, join(work, 'out', String(i))], { env })));
console.log('cold ms', (performance.now() - t0).toFixed(0), 'velodex cpu ms', cpu(child.pid!) - c0, 'machine busy', ((machine().busy - m0.busy) / (machine().all - m0.all) * 2).toFixed(2));
await new Promise((r) => setTimeout(r, 1000));
{
  const c1 = cpu(child.pid!); const w0 = performance.now();
  await Promise.all(repos.map((r, i) => run(tool('crane'), ['pull', '--insecure', '--format', 'oci', `127.0.0.1:${port}/c/${r}:v1`, join(work, 'out2', String(i))], { env })));
  console.log('warm ms', (performance.now() - w0).toFixed(0), 'velodex cpu ms', cpu(child.pid!) - c1);
}
if (st) { st.kill('SIGINT'); await new Promise((r) => st!.on('exit', r)); }
child.kill('SIGTERM');
await new Promise((r) => child.on('exit', r));
await up.stop();

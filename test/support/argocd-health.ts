/**
 * Runs the Argo CD health checks of docs/gitops.md (Lua, from its argocd-cm example) on a
 * resource as the API server returns it, with the real Lua 5.4 interpreter (Debian's lua5.4 and
 * lua-cjson; Argo CD embeds gopher-lua, a Lua 5.1 dialect: the checks use only what both share).
 * Argo CD gives the script the resource as the global `obj` and reads the table it returns.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from './temp-dirs.js';
import { REPO } from './paths.js';
import { run } from './run.js';

export interface Health {
  status: 'Healthy' | 'Progressing' | 'Degraded' | 'Suspended' | 'Missing' | 'Unknown';
  message: string;
}

/** The Lua of `resource.customizations.health.velodex.dev_<kind>` in docs/gitops.md. */
export function healthCheckOf(kind: 'PackageIndex' | 'PackageRegistry'): string {
  const doc = readFileSync(join(REPO, 'docs', 'gitops.md'), 'utf8');
  const key = `  resource.customizations.health.velodex.dev_${kind}: |\n`;
  const start = doc.indexOf(key);
  if (start === -1) throw new Error(`docs/gitops.md has no health check for ${kind}`);
  const lines: string[] = [];
  for (const line of doc.slice(start + key.length).split('\n')) {
    if (!line.startsWith('    ') && line.trim() !== '') break;
    lines.push(line.slice(4));
  }
  return lines.join('\n');
}

export async function argoHealth(kind: 'PackageIndex' | 'PackageRegistry', obj: unknown): Promise<Health> {
  const dir = tempDir('velodex-argo-');
  const check = join(dir, 'check.lua');
  writeFileSync(check, healthCheckOf(kind));
  const wrapper = [
    'local cjson = require("cjson")',
    'obj = cjson.decode(io.read("a"))',
    `local hs = assert(loadfile(${JSON.stringify(check)}))()`,
    'io.write(cjson.encode(hs))',
  ].join('\n');
  const res = await run('/usr/bin/lua5.4', ['-e', wrapper], { input: JSON.stringify(obj) });
  return JSON.parse(res.stdout) as Health;
}

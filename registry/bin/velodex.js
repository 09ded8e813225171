#!/usr/bin/env node
// The `velodex` command as npm links it. `npm ci` links bins before `npm run build` has written
// dist/, and skips a bin whose file is missing, so the linked file is this one, kept in the
// repository; it runs the built CLI, or says how to build it.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const cli = new URL('../dist/cli.js', import.meta.url);
if (!existsSync(fileURLToPath(cli))) {
  process.stderr.write('velodex is not built yet: run `npm run build` (or `make build`) in the repository first\n');
  process.exit(1);
}
await import(cli.href);

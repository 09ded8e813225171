/** Runs a real client program and returns what it printed; a non-zero exit is an error by default. */
import { spawn } from 'node:child_process';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string>;
  input?: string;
  /** Accept a non-zero exit instead of throwing. */
  allowFailure?: boolean;
  timeoutMs?: number;
}

export function run(cmd: string, args: string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: { ...process.env, ...opts.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 300_000);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const result = { code: code ?? -1, stdout, stderr };
      if (code !== 0 && !opts.allowFailure) {
        reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`));
      } else resolve(result);
    });
    // A child may exit before it reads its input (EPIPE on the write): its exit status, not the
    // failed write, says what happened.
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input ?? '');
  });
}

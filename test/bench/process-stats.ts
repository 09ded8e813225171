/**
 * What a server process and its workers cost, read from /proc: CPU time (user + system) and peak
 * resident memory (VmHWM). A server with workers is a primary and its children; each is counted.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on Linux). */
const TICKS_PER_SEC = 100;

/** `pid` and its direct children (a primary's workers). */
export function processTree(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (stat && stat.ppid === pid) children.push(Number(entry));
  }
  return [pid, ...children];
}

export interface CpuTime {
  /** Seconds in the process's own code (JavaScript, V8, libuv, OpenSSL...). */
  user: number;
  /** Seconds in the kernel on its behalf (copying bytes in and out of files and sockets). */
  system: number;
}

/** CPU time used so far by `pid` and its children alive now. */
export function cpuTime(pid: number): CpuTime {
  let user = 0;
  let system = 0;
  for (const p of processTree(pid)) {
    const stat = readStat(p);
    user += stat?.userTicks ?? 0;
    system += stat?.systemTicks ?? 0;
  }
  return { user: user / TICKS_PER_SEC, system: system / TICKS_PER_SEC };
}

export interface MachineTicks {
  total: number;
  idle: number;
}

/** The whole machine's CPU time so far (the first line of /proc/stat), busy or idle (idle + iowait). */
export function machineTicks(): MachineTicks {
  const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/);
  const n = fields.slice(0, 8).map(Number);
  return { total: n.reduce((a, b) => a + b, 0), idle: (n[3] ?? 0) + (n[4] ?? 0) };
}

/** How many of the machine's cores were busy, on average, between two readings. */
export function busyCores(before: MachineTicks, after: MachineTicks, cores: number): number {
  const total = after.total - before.total;
  return total > 0 ? ((total - (after.idle - before.idle)) / total) * cores : 0;
}

export interface Costed<T> {
  result: T;
  /** CPU seconds the server's processes spent during `run`. */
  cpu: CpuTime;
  /** Cores of the whole machine busy during `run`, on average. */
  machineCores: number;
}

/** Runs `run` and says what it cost the server `pid` and the machine of `cores` cores. */
export async function costed<T>(pid: number, cores: number, run: () => Promise<T>): Promise<Costed<T>> {
  const cpuBefore = cpuTime(pid);
  const machineBefore = machineTicks();
  const result = await run();
  const machineAfter = machineTicks();
  const cpuAfter = cpuTime(pid);
  return { result, cpu: { user: cpuAfter.user - cpuBefore.user, system: cpuAfter.system - cpuBefore.system }, machineCores: busyCores(machineBefore, machineAfter, cores) };
}

export interface MainThreads {
  /** How many main threads were counted (the processes of the tree). */
  threads: number;
  /** Seconds the main threads (each process's event loop) ran on a core. */
  running: number;
  /** Seconds they were ready to run but waited for a core (the run queue). */
  waiting: number;
}

/**
 * What the main thread of `pid` and of each child (a primary's workers) did so far, from the
 * scheduler's own accounting (/proc/<pid>/task/<pid>/schedstat: ns on a core, ns in the run
 * queue). Over a pull, the wall time less both is the time the event loop had nothing to do: it
 * waited on the disk, the upstream or the clients. Zeros where the kernel keeps no schedstat.
 */
export function mainThreads(pid: number): MainThreads {
  let running = 0;
  let waiting = 0;
  const tree = processTree(pid);
  for (const p of tree) {
    try {
      const [run, wait] = readFileSync(`/proc/${p}/task/${p}/schedstat`, 'utf8').trim().split(/\s+/).map(Number);
      running += (run ?? 0) / 1e9;
      waiting += (wait ?? 0) / 1e9;
    } catch {
      // Gone meanwhile, or no schedstat in this kernel.
    }
  }
  return { threads: tree.length, running, waiting };
}

/** Peak resident memory (VmHWM) of one process, in bytes. */
export function peakRss(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m?.[1]) throw new Error(`no VmHWM for pid ${pid}`);
  return Number(m[1]) * 1024;
}

function readStat(pid: number): { ppid: number; userTicks: number; systemTicks: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // The command name (field 2) may hold spaces and parentheses: fields are counted after its end.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // After the name: state(3) ppid(4) ... utime(14) stime(15), so index = field number - 3.
  return { ppid: Number(fields[1]), userTicks: Number(fields[11]), systemTicks: Number(fields[12]) };
}

// The CPU time of the main thread alone, for tests that tell Sluice's own work from a loaded machine.
// `process.cpuUsage()` counts every thread of the process: the collector's and the compiler's helper threads
// run beside a main thread that the machine's load keeps waiting, and stretch it as much as the load stretches
// the wall clock. Linux gives a thread's own time on the CPU in /proc (schedstat, nanoseconds).
import { readFileSync } from 'node:fs';

const SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`;

function schedstatMs(): number | undefined {
  try {
    return Number(readFileSync(SCHEDSTAT, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return undefined;
  }
}

/** Milliseconds of CPU the main thread has run (every thread's where /proc does not say: not Linux). */
export const mainThreadCpuMs: () => number = schedstatMs() === undefined
  ? () => {
    const c = process.cpuUsage();
    return (c.user + c.system) / 1000;
  }
  : () => schedstatMs()!;

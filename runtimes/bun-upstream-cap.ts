// Bun's fetch sends at most `BUN_CONFIG_MAX_HTTP_REQUESTS` requests at once (256 when unset) and queues the
// rest without a word, and Bun reads the variable only as it starts. A gateway whose streams last minutes
// would hold its 257th caller behind them, so runtimes/bun.ts imports this module first: when the
// environment does not set the variable, the process replaces itself (execve: the same PID and arguments,
// before anything else runs) with it set to `UPSTREAM_REQUESTS_DEFAULT` (README "Runtimes"). The same restart
// tells JavaScriptCore's collector a smaller memory when the environment does not (runtimes/bun-start-env.ts).
import { totalmem } from 'node:os';
import { startEnv, UPSTREAM_REQUESTS_VAR } from './bun-start-env.ts';

/** The arguments that start this same program again: Bun's own flags, then the script, then its arguments. */
function restartArgs(
  p: Pick<typeof process, 'execPath' | 'execArgv' | 'argv'>,
  standalone: boolean,
): string[] {
  // In an executable, argv[1] is the embedded entrypoint's path, which the executable supplies itself.
  const rest = standalone ? p.argv.slice(2) : [...p.execArgv, ...p.argv.slice(1)];
  return [p.execPath, ...rest];
}

function raiseUpstreamCap(): void {
  const add = startEnv(process.env, totalmem());
  if (Object.keys(add).length === 0) return; // the operator's values, a cap of 256 included
  const execve = (process as { execve?: (file: string, args: string[], env: Record<string, string>) => never })
    .execve;
  if (typeof execve !== 'function') return warn(add, 'this Bun has no process.execve');
  const env = { ...process.env, ...add } as Record<string, string>;
  try {
    execve.call(process, process.execPath, restartArgs(process, Bun.isStandaloneExecutable), env);
  } catch (e) {
    warn(add, `restarting with it set failed: ${(e as Error).message}`);
  }
}

/** Only the fetch cap is worth a word: without the heap's setting a large configuration peaks higher, no more. */
function warn(add: Record<string, string>, why: string): void {
  if (add[UPSTREAM_REQUESTS_VAR] === undefined) return;
  process.stderr.write(
    `sluice: ${UPSTREAM_REQUESTS_VAR} is not set and ${why}: Bun's fetch sends at most 256 upstream requests ` +
      `at once and queues the rest; set ${UPSTREAM_REQUESTS_VAR} in the gateway's environment\n`,
  );
}

raiseUpstreamCap();

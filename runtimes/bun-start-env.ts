// What Bun reads only as it starts, and what Sluice starts it with where the environment sets nothing
// (runtimes/bun-upstream-cap.ts restarts the process with it): the cap on fetch requests in flight (README
// "Runtimes"), and the memory JavaScriptCore's collector sizes the heap's growth by (docs/performance.md
// "Configuration at scale").

export const UPSTREAM_REQUESTS_VAR = 'BUN_CONFIG_MAX_HTTP_REQUESTS';
/** The largest value Bun takes: the upstream requests in flight are bounded by the callers' own. */
export const UPSTREAM_REQUESTS_DEFAULT = '65535';

export const HEAP_RAM_VAR = 'BUN_JSC_forceRAMSize';
/**
 * The machine's memory as JavaScriptCore's collector is told it. A heap under a quarter of that memory grows to
 * twice what survived the last full collection before the next one, under half of it to 1.5 times, above that to
 * 1.24 times: told a large machine's real memory, a large configuration's heap grows to about twice what it holds,
 * while a usual configuration's heap stays under a quarter of this and grows as before (docs/performance.md
 * "Configuration at scale").
 */
export const HEAP_RAM_BYTES = 1 << 30;

/** The variables to add to `env` before Bun starts again (none: no restart). An operator's own values are kept. */
export function startEnv(env: Record<string, string | undefined>, totalMemory: number): Record<string, string> {
  const add: Record<string, string> = {};
  if (env[UPSTREAM_REQUESTS_VAR] === undefined) add[UPSTREAM_REQUESTS_VAR] = UPSTREAM_REQUESTS_DEFAULT;
  // A machine with less memory than this already has the tighter growth.
  if (env[HEAP_RAM_VAR] === undefined && totalMemory > HEAP_RAM_BYTES) add[HEAP_RAM_VAR] = String(HEAP_RAM_BYTES);
  return add;
}

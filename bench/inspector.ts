// A CPU profile of another process through its V8 inspector (`--inspect=127.0.0.1:PORT`), for runtimes without
// `--cpu-prof` (Deno): the same `.cpuprofile` JSON that bench/profile-summary.ts reads.
import { WebSocket } from 'undici';

interface Reply {
  id?: number;
  result?: Record<string, unknown>;
  error?: { message: string };
}

/** Profiles the process whose inspector listens on `port` while `during` runs; its result and the profile. */
export async function profileOverInspector<T>(
  port: number,
  intervalUs: number,
  during: () => Promise<T>,
): Promise<{ result: T; profile: unknown }> {
  const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json() as {
    webSocketDebuggerUrl: string;
  }[];
  if (!targets[0]) throw new Error(`no inspector target on 127.0.0.1:${port}`);
  const ws = new WebSocket(targets[0].webSocketDebuggerUrl);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve());
    ws.addEventListener('error', () => reject(new Error(`inspector on 127.0.0.1:${port}: no connection`)));
  });
  const waiting = new Map<number, (r: Reply) => void>();
  ws.addEventListener('message', (e) => {
    const r = JSON.parse(String(e.data)) as Reply;
    if (r.id !== undefined) waiting.get(r.id)?.(r);
  });
  let next = 0;
  const call = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const id = ++next;
      waiting.set(id, (r) => {
        waiting.delete(id);
        if (r.error) reject(new Error(`${method}: ${r.error.message}`));
        else resolve(r.result ?? {});
      });
      ws.send(JSON.stringify({ id, method, params }));
    });
  try {
    await call('Profiler.enable');
    await call('Profiler.setSamplingInterval', { interval: intervalUs });
    await call('Profiler.start');
    const result = await during();
    const { profile } = await call('Profiler.stop');
    return { result, profile };
  } finally {
    ws.close();
  }
}

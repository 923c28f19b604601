// `Platform.parseYamlOffThread` over node:worker_threads (Node, Bun and Deno): the worker is this very
// module (in the Node bundle, dist/node.mjs), started with a marker in its workerData, so no second file
// has to ship; in the Bun executable it is this module embedded as an entrypoint of its own (build.mjs
// --binary). On Deno a worker that finished a parse is kept for the next one (docs/configuration.md
// "Reloading").
import { setPriority } from 'node:os';
import { dirname, join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { type YamlPiece, type YamlPieces, yamlPieces } from '../src/resources/yaml-pieces.ts';

const MARKER = 'sluice-yaml-thread';
/** The worker's nice value: requests go first, yet the worker gets a core often enough to release a lock. */
const WORKER_NICE = 10;
/** This module's name inside the Bun executable: build.mjs --binary compiles it as a second entrypoint. */
export const EMBEDDED_NAME = 'yaml-thread.js';

/** The worker the last finished parse left, unreferenced, when workers are kept. */
let idle: Worker | undefined;
/** How many workers this process started for parses (tests read it). */
export let workersStarted = 0;

/**
 * `Platform.parseYamlOffThread`. `keepWorker`: a worker that handed over a whole parse serves the next one,
 * its heap collected in between. For Deno, whose `new Worker` holds the event loop until the new isolate is
 * up (about 100 ms, a stall on every reload otherwise); elsewhere a worker starts without one and is ended
 * after each parse, which frees its heap at once.
 */
export function yamlThread(opts: { keepWorker: boolean }): (text: string) => YamlPieces {
  return (text) => parseYamlOffThread(text, opts.keepWorker);
}

/** Parse `text` on a worker thread; each `next()` asks the worker for the following piece. */
function parseYamlOffThread(text: string, keepWorker: boolean): YamlPieces {
  const worker = idle ?? startWorker();
  idle = undefined;
  worker.ref();
  let waiting: { resolve: (p: YamlPiece) => void; reject: (e: Error) => void } | undefined;
  let failed: Error | undefined;
  /** The worker handed over its last piece: it holds nothing of this parse and may serve the next. */
  let finished = false;
  const fail = (e: Error) => {
    failed ??= e;
    waiting?.reject(failed);
    waiting = undefined;
  };
  const onMessage = (p: YamlPiece) => {
    if (p.type === 'done' || p.type === 'errors') finished = true;
    waiting?.resolve(p);
    waiting = undefined;
  };
  const onExit = (code: number) => fail(new Error(`the YAML worker exited (code ${code})`));
  worker.on('message', onMessage);
  worker.on('error', fail);
  worker.on('exit', onExit);
  worker.postMessage({ parse: text });
  return {
    next() {
      if (failed) return Promise.reject(failed);
      return new Promise<YamlPiece>((resolve, reject) => {
        waiting = { resolve, reject };
        worker.postMessage('next');
      });
    },
    close() {
      worker.off('message', onMessage);
      worker.off('error', fail);
      worker.off('exit', onExit);
      if (keepWorker && finished && failed === undefined && idle === undefined) {
        worker.postMessage('collect');
        worker.unref();
        idle = worker;
      } else void worker.terminate();
      failed ??= new Error('closed');
    },
  };
}

function startWorker(): Worker {
  workersStarted++;
  return new Worker(workerModule(), { workerData: { [MARKER]: true } });
}

/**
 * The module the worker runs. In a Bun executable `import.meta.url` still names the source file, which is
 * not there at run time, and the executable's main module would start a gateway: the worker is the
 * entrypoint embedded beside the main one, named by its path in the executable's file system.
 */
function workerModule(): URL | string {
  const bun = (globalThis as { Bun?: { isStandaloneExecutable?: boolean; main: string } }).Bun;
  return bun?.isStandaloneExecutable ? join(dirname(bun.main), EMBEDDED_NAME) : new URL(import.meta.url);
}

/**
 * In the worker: parse each text it is sent, then answer each `next` with a piece. The worker runs below
 * the event loop's thread, but not at the bottom: it shares locks with that thread (the runtime's task
 * queues, the address space), and a thread starved of a core while it holds one stalls the event loop with it.
 */
function serve(): void {
  try {
    // Linux keeps a nice value per thread: this lowers the worker's alone.
    setPriority(WORKER_NICE);
  } catch {
    // Not permitted or not implemented: the parse runs at the process's priority.
  }
  let next: (() => YamlPiece) | undefined;
  parentPort!.on('message', (m: 'next' | 'collect' | { parse: string }) => {
    if (m === 'collect') return collectGarbage();
    if (m !== 'next') {
      next = yamlPieces(m.parse);
      return;
    }
    const p: YamlPiece = next ? next() : { type: 'done' };
    if (p.type === 'done' || p.type === 'errors') next = undefined; // the parse's memory goes with it
    parentPort!.postMessage(p);
  });
}

/**
 * A full collection of this worker's heap, kept between parses: an idle isolate is never collected, and the
 * last parse's garbage (the document's syntax tree) would stay resident. Skipped where the runtime has no way.
 */
function collectGarbage(): void {
  try {
    setFlagsFromString('--expose-gc');
    (runInNewContext('gc') as () => void)();
  } catch {
    // No gc to expose here: the heap shrinks when the next parse's allocations collect it.
  }
}

if (!isMainThread && (workerData as Record<string, unknown> | null)?.[MARKER] === true) {
  serve();
}

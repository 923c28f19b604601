// `Platform.parseYamlOffThread` over node:worker_threads (Node, Bun and Deno): the worker is this very
// module (in the Node bundle, dist/node.mjs), started with a marker in its workerData, so no second file
// has to ship; in the Bun executable it is this module embedded as an entrypoint of its own (build.mjs
// --binary). One worker per parse, ended once its pieces are handed over.
import { setPriority } from 'node:os';
import { dirname, join } from 'node:path';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { type YamlPiece, type YamlPieces, yamlPieces } from '../src/resources/yaml-pieces.ts';

const MARKER = 'sluice-yaml-thread';
/** The worker's nice value: requests go first, yet the worker gets a core often enough to release a lock. */
const WORKER_NICE = 10;
/** This module's name inside the Bun executable: build.mjs --binary compiles it as a second entrypoint. */
export const EMBEDDED_NAME = 'yaml-thread.js';

/** Parse `text` on a worker thread; each `next()` asks the worker for the following piece. */
export function parseYamlOffThread(text: string): YamlPieces {
  const worker = new Worker(workerModule(), { workerData: { [MARKER]: true, text } });
  let waiting: { resolve: (p: YamlPiece) => void; reject: (e: Error) => void } | undefined;
  let failed: Error | undefined;
  const fail = (e: Error) => {
    failed ??= e;
    waiting?.reject(failed);
    waiting = undefined;
  };
  worker.on('message', (p: YamlPiece) => {
    waiting?.resolve(p);
    waiting = undefined;
  });
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`the YAML worker exited (code ${code})`)));
  return {
    next() {
      if (failed) return Promise.reject(failed);
      return new Promise<YamlPiece>((resolve, reject) => {
        waiting = { resolve, reject };
        worker.postMessage('next');
      });
    },
    close() {
      failed ??= new Error('closed');
      void worker.terminate();
    },
  };
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
 * In the worker: parse once, then answer each `next` with a piece. The worker runs below the event loop's
 * thread, but not at the bottom: it shares locks with that thread (the runtime's task queues, the address
 * space), and a thread starved of a core while it holds one stalls the event loop with it.
 */
function serve(text: string): void {
  try {
    // Linux keeps a nice value per thread: this lowers the worker's alone.
    setPriority(WORKER_NICE);
  } catch {
    // Not permitted or not implemented: the parse runs at the process's priority.
  }
  const next = yamlPieces(text);
  parentPort!.on('message', () => parentPort!.postMessage(next()));
}

if (!isMainThread && (workerData as Record<string, unknown> | null)?.[MARKER] === true) {
  serve((workerData as { text: string }).text);
}

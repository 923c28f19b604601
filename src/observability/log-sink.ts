// Log lines are batched and written once per event-loop turn, since a synchronous write per access-log line
// is a large share of the gateway's CPU under load (docs/performance.md). Order is kept; the runtimes call
// `flush()` before exiting, so no line is lost.

export interface LineSink {
  write(line: string): void;
  flush(): void;
}

/** Past this many pending bytes the batch is written at once, so a burst cannot grow memory unbounded. */
const MAX_PENDING = 64 * 1024;

/**
 * `schedule` runs the write once the turn's work is done: the runtime's `setImmediate` (a zero-delay timer costs
 * more to arm each time than the write saves).
 */
export function batchedSink(writeText: (text: string) => void, schedule: (run: () => void) => void): LineSink {
  let pending = '';
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending === '') return;
    const text = pending;
    pending = '';
    writeText(text);
  };
  return {
    write(line) {
      pending += `${line}\n`;
      if (pending.length >= MAX_PENDING) flush();
      else if (!scheduled) {
        scheduled = true;
        schedule(flush);
      }
    },
    flush,
  };
}

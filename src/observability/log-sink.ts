// Log lines are batched and written at most once per short window, since a write per access-log line is a
// large share of the gateway's CPU, under load and at one caller alike (docs/performance.md "Decisions on the
// hot path"). Order is kept; the runtimes call `flush()` before exiting, so no line is lost.

export interface LineSink {
  write(line: string): void;
  flush(): void;
}

/** Past this many pending bytes the batch is written at once, so a burst cannot grow memory unbounded. */
const MAX_PENDING = 64 * 1024;
/** How long a line may wait for others to share its write: short against anyone reading the log. */
export const FLUSH_MS = 20;

/** `schedule` runs the flush later (default: after `FLUSH_MS`); it is asked once per batch. */
export function batchedSink(
  writeText: (text: string) => void,
  schedule: (flush: () => void) => void = (flush) => void setTimeout(flush, FLUSH_MS),
): LineSink {
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

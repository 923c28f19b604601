// A sleep that an AbortSignal cuts short (it resolves, never rejects): retry backoff, reconnect backoff
// and shutdown all wait with it.
import type { CancelSignal } from './cancel.ts';

export function sleep(ms: number, signal?: CancelSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

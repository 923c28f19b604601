// What is left of a refused request body, read and dropped after the answer (docs/security.md "Safe defaults:
// bodies and connections"): a runtime closes a connection whose request it has not read to the end, and a close
// with bytes unread sends a reset, which can take with it an answer the caller has not read yet.

/** How long a refused body's rest is read, in all and without a byte (nginx's lingering_time and _timeout). */
export const DISCARD_MAX_MS = 30_000;
export const DISCARD_IDLE_MS = 5000;

type Reader = ReadableStreamDefaultReader<Uint8Array>;

/**
 * Read and drop the rest of `reader`'s body in the background, so the runtime keeps the connection until the caller
 * has sent it and the caller reads the answer before any close. Ends at the body's end, or cancels the reader (the
 * runtime then closes the connection) after `idleMs` without a byte or `maxMs` in all; never holds a byte.
 */
export async function discardRest(reader: Reader, idleMs = DISCARD_IDLE_MS, maxMs = DISCARD_MAX_MS): Promise<void> {
  const stop = () => void reader.cancel().catch(() => {});
  const end = Date.now() + maxMs;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    for (;;) {
      // The end is checked per chunk too: a body that is always ready resolves its reads without a turn for timers.
      const left = end - Date.now();
      if (left <= 0) return stop();
      timer = setTimeout(stop, Math.min(idleMs, left));
      const r = await reader.read();
      clearTimeout(timer);
      if (r.done) return;
    }
  } catch {
    // The caller broke the body or left: the runtime closes the connection.
  } finally {
    clearTimeout(timer);
  }
}

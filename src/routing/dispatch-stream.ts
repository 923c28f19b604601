// The caller's side of a streamed dispatch (docs/routing.md "Deadlines and streams"): the SSE body the pump
// reads, whether the retry loop already produced a live stream or is still failing over behind keep-alive
// comments (the early commit), the silence limit between chunks, and the settlement once it ended.
import { type StreamEnd, type TokenCounts, UpstreamStreamError } from '../providers/types.ts';
import { upstreamErrorParts } from '../providers/upstream-error.ts';
import { CHUNKS_DONE } from '../util/bytes.ts';
import type { Cancel } from '../util/cancel.ts';
import { type Clock, systemClock } from '../util/clock.ts';
import { IdleTimer } from '../util/idle-timer.ts';
import type { AttemptRecorder } from './dispatch-record.ts';
import {
  type Answer,
  type AttemptWatch,
  closeLive,
  type DispatchResult,
  type LiveStream,
  type Run,
  type ServedBy,
  type Target,
} from './dispatch-types.ts';

/**
 * The `stream` result of a dispatch whose loop is `run`. `answer` turns the loop's result into the caller's
 * answer; `served` is known when the loop had already produced its stream.
 */
export function streamResult(
  run: Promise<Run>,
  controller: Cancel,
  answer: (run: Run) => Answer,
  recorder: AttemptRecorder,
  served?: ServedBy,
  watch?: AttemptWatch,
  headers?: Record<string, string>,
  clock: Clock = systemClock,
): DispatchResult {
  const s = new CallerStream(run, controller, answer, recorder, watch, clock);
  return {
    kind: 'stream',
    ...(served ? { served } : {}),
    ...(headers ? { headers } : {}),
    chunks: { [Symbol.asyncIterator]: () => s },
    abort: () => s.abort(),
    settle: (end) => s.settle(end),
    ttftMs: () => s.ttftMs(),
    counted: () => s.counted(),
    servedHeaders: () => s.servedHeaders(),
  };
}

/** The chunks the caller's pump reads, from whichever live stream the loop produces, and its settlement. */
class CallerStream implements AsyncIterator<Uint8Array> {
  private live: { target: Target; live: LiveStream } | undefined;
  private settled = false;
  /** The live stream's rest under the silence limit, once there is one. */
  private rest: SilenceLimited | undefined;
  private over = false;

  constructor(
    private readonly run: Promise<Run>,
    private readonly controller: Cancel,
    private readonly answer: (run: Run) => Answer,
    private readonly recorder: AttemptRecorder,
    private readonly watch: AttemptWatch | undefined,
    private readonly clock: Clock,
  ) {
    // A stream the loop produced after the caller's body had already ended is nobody's: close it.
    void run.then((r) => {
      if (!this.settled || this.live) return;
      for (const o of r.kind === 'aborted' ? r.attempts.map((a) => a.outcome) : [r.outcome]) {
        if (o.kind === 'response' && o.live) closeLive(o.live);
      }
    }, () => {});
  }

  next(): Promise<IteratorResult<Uint8Array>> {
    if (this.rest) return this.rest.next();
    if (this.over) return Promise.resolve(CHUNKS_DONE);
    return this.first().then((r) => {
      if (r.done) this.over = true;
      return r;
    }, (e) => {
      this.over = true;
      throw e;
    });
  }

  return(): Promise<IteratorResult<Uint8Array>> {
    this.over = true;
    this.rest?.stop();
    return Promise.resolve(CHUNKS_DONE);
  }

  /** The serving adapter's own token count (ProviderResult `counted`), once the stream ended. */
  counted(): TokenCounts | undefined {
    return this.live?.live.counted?.();
  }

  /** The serving attempt's headers for the caller's answer, once a target answered. */
  servedHeaders(): Record<string, string> | undefined {
    return this.live?.live.headers;
  }

  /** The serving attempt's start to its first chunk (ms), once the caller has it. */
  ttftMs(): number | undefined {
    const l = this.live?.live;
    return l?.firstAt !== undefined ? l.firstAt - l.startedAt : undefined;
  }

  abort(): void {
    this.controller.abort();
    this.live?.live.abort();
  }

  /** How the caller's stream ended: the live target's health and deployment metrics, its resources freed. */
  settle(end: StreamEnd): void {
    if (this.settled) return;
    this.settled = true;
    if (!this.live) {
      this.controller.abort(); // the caller left while the loop was still failing over
      return;
    }
    const { target: t, live: l } = this.live;
    l.end();
    if (end === 'client_closed') l.abort();
    if (end === 'complete' || end === 'client_closed') this.recorder.streamEnded(t, undefined);
    else this.recorder.streamEnded(t, end === 'upstream_timeout' ? { kind: 'timeout' } : { kind: 'transport' });
  }

  /** The first chunk once the loop has a live stream; the loop's failure as an in-band error. */
  private async first(): Promise<IteratorResult<Uint8Array>> {
    const a = this.answer(await this.run);
    if (a.kind === 'aborted') return CHUNKS_DONE;
    if (a.kind === 'error') {
      throw new UpstreamStreamError(
        a.failure.kind === 'upstream_timeout' ? 'upstream_timeout' : 'upstream_error',
        a.failure.message,
      );
    }
    if (a.kind === 'response') {
      // Only the upstream's message (scrubbed by the pump), never its raw body.
      const { message } = upstreamErrorParts(a.body);
      throw new UpstreamStreamError('upstream_error', `upstream answered ${a.status}: ${message}`);
    }
    if (this.settled || this.over) {
      closeLive(a.live);
      return CHUNKS_DONE;
    }
    this.live = a;
    this.rest = new SilenceLimited(a.live, a.target.silenceMs);
    if (a.live.first) return { done: false, value: a.live.first };
    // Committed at the head (deployment-default budget): the first chunk comes under the silence limit, and
    // a stream that ends before sending anything is an upstream error, not an empty answer.
    const r = await this.rest.next();
    if (r.done) {
      throw new UpstreamStreamError('upstream_error', 'the upstream closed the stream before sending anything');
    }
    a.live.firstAt ??= this.clock();
    this.watch?.firstChunk();
    return r;
  }
}

/**
 * The rest of a live stream; a silence longer than `silenceMs` (0 = none) aborts it with `upstream_timeout`.
 * Written as an iterator, not an async generator: it runs once per SSE chunk, and each generator layer (with
 * `yield*` between them) costs several promise turns per chunk (docs/performance.md).
 */
export class SilenceLimited implements AsyncIterator<Uint8Array> {
  private silence: IdleTimer | undefined;
  private timedOut = false;
  private stopped = false;

  constructor(private readonly live: LiveStream, private readonly silenceMs: number) {}

  async next(): Promise<IteratorResult<Uint8Array>> {
    if (this.stopped) return CHUNKS_DONE;
    // Only time spent waiting on the upstream counts as silence; the timer starts with the first wait.
    if (this.silenceMs > 0) {
      if (this.silence) this.silence.touch();
      else {
        this.silence = new IdleTimer(this.silenceMs, () => {
          this.timedOut = true;
          this.live.abort();
        });
      }
    }
    let r: IteratorResult<Uint8Array>;
    try {
      r = await this.live.rest.next();
    } catch (e) {
      this.stop();
      throw this.timedOut ? this.timeout() : e;
    }
    if (this.timedOut) {
      this.stop();
      throw this.timeout();
    }
    if (r.done) this.stop();
    else this.silence?.pause(); // a slow caller is not a silent upstream
    return r;
  }

  stop(): void {
    this.stopped = true;
    this.silence?.stop();
  }

  private timeout(): UpstreamStreamError {
    return new UpstreamStreamError('upstream_timeout', `upstream sent nothing for ${this.silenceMs} ms`);
  }
}

/** `{ value }` if `p` settles within `ms`, else undefined (the timer never outlives the race). */
export async function settledWithin<T>(p: Promise<T>, ms: number): Promise<{ value: T } | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(resolve, ms, undefined);
  });
  try {
    return await Promise.race([p.then((value) => ({ value })), late]);
  } finally {
    clearTimeout(timer);
  }
}

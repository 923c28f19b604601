// The Realtime relay between the caller's WebSocket and the upstream's (docs/realtime.md "Relay"): frames both
// ways unchanged, usage summed from the upstream's events, the idle cap, close codes relayed, the drain's end, and
// the content checks a text frame waits for before it goes on (docs/realtime.md "Guardrails"). The upstream's
// error frames and close reason pass the secret scrubber first (docs/security.md "Secrets in answers and logs").
import type { RelaySocket, WsFrame } from '../platform.ts';
import type { Scrub } from '../http/scrub.ts';

/** Tokens the upstream reported over a session. */
export interface RealtimeUsage {
  input: number;
  output: number;
  cached: number;
}

/** How a session ended, for its accounting and its access-log status. */
export interface SessionEnd {
  usage: RealtimeUsage;
  /** 200 closed by either side; 400 a content check refused a frame; 502 upstream error; 504 idle timeout; 503 drain. */
  status: number;
  /** Who closed: `client`, `upstream`, `idle`, `drain`, `policy` (a content check). */
  by: 'client' | 'upstream' | 'idle' | 'drain' | 'policy';
}

/** A text frame's content check: the error frame that refuses it (the session then ends), or undefined. */
export type FrameCheck = (text: string) => Promise<string | undefined>;

export interface RelayOptions {
  /** No frame either way for this long closes both sides with 1001 `idle timeout`; 0 = no cap. */
  idleMs: number;
  /** Timers (a test gives its own). */
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (t: unknown) => void;
  /**
   * Checks on text frames: the caller's (`input`) and the upstream's (`output`). A frame waits for its verdict, and
   * the frames behind it in its direction wait with it, so order is kept; a refused frame is never relayed.
   */
  checks?: { input?: FrameCheck; output?: FrameCheck };
  /**
   * Redacts the configured secrets from the upstream's words (an upstream echoes the key it was sent): its text
   * frames that carry an error, before their check and the caller, and its close reason.
   */
  scrub?: Scrub;
}

/** A running relay: `end` resolves once both sides are closed (or given up on). */
export interface Relay {
  readonly usage: RealtimeUsage;
  readonly end: Promise<SessionEnd>;
  /** Close both sides with 1001 (the drain window ended). */
  goAway(): void;
}

/** Close codes that may not be sent in a close frame: relayed as a close without status. */
const UNSENDABLE = new Set([1005, 1006, 1015]);

/** What the caller gets when a check could not decide (it threw): the session ends, nothing is relayed. */
export const CHECK_FAILED_FRAME = JSON.stringify({
  type: 'error',
  error: { type: 'server_error', message: 'the content check of a frame failed; the session is closed' },
});

type Step = () => void | Promise<void>;

/**
 * One direction's frames and close, run in arrival order: at once without a check (the common case costs
 * nothing), else each after the one before it settled.
 */
function lane(checked: boolean): (step: Step) => void {
  if (!checked) return (step) => void step();
  let tail: Promise<void> = Promise.resolve();
  return (step) => {
    tail = tail.then(step).catch(() => {});
  };
}

export function startRelay(client: RelaySocket, upstream: RelaySocket, opts: RelayOptions): Relay {
  const setTimer = opts.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
  const clearTimer = opts.clearTimer ?? ((t) => clearTimeout(t as ReturnType<typeof setTimeout>));
  const usage: RealtimeUsage = { input: 0, output: 0, cached: 0 };
  let finish!: (e: SessionEnd) => void;
  const end = new Promise<SessionEnd>((r) => (finish = r));
  let done = false;
  let idle: unknown;
  const settle = (status: number, by: SessionEnd['by']) => {
    if (done) return;
    done = true;
    if (idle !== undefined) clearTimer(idle);
    finish({ usage, status, by });
  };
  const closeBoth = (code: number, reason: string, status: number, by: SessionEnd['by']) => {
    client.close(code, reason);
    upstream.close(code, reason);
    settle(status, by);
  };
  const touch = () => {
    if (opts.idleMs <= 0 || done) return;
    if (idle !== undefined) clearTimer(idle);
    idle = setTimer(() => closeBoth(1001, 'idle timeout', 504, 'idle'), opts.idleMs);
  };
  touch();
  const input = opts.checks?.input;
  const output = opts.checks?.output;
  const scrub = opts.scrub;
  // AISIX's refusal: the error frame, then 1011 `content policy`; the upstream is let go.
  const refuse = (errorFrame: string) => {
    if (done) return;
    client.send(errorFrame);
    client.close(1011, 'content policy');
    upstream.close();
    settle(400, 'policy');
  };
  /** The frame's verdict: undefined to relay it, else the error frame refusing it. */
  const verdict = (check: FrameCheck | undefined, frame: WsFrame): Promise<string | undefined> | undefined =>
    check && typeof frame === 'string' ? check(frame).catch(() => CHECK_FAILED_FRAME) : undefined;
  /** Relays the frame once its verdict says so (at once when it has none to wait for). */
  const pass = (pending: Promise<string | undefined> | undefined, relay: () => void): Promise<void> | void => {
    if (!pending) {
      if (!done) relay();
      return;
    }
    return pending.then((refusal) => {
      if (done) return;
      if (refusal !== undefined) refuse(refusal);
      else relay();
    });
  };
  const fromClient = lane(input !== undefined);
  const fromUpstream = lane(output !== undefined);
  client.listen({
    message(frame) {
      if (done) return;
      touch();
      fromClient(() => pass(verdict(input, frame), () => upstream.send(frame)));
    },
    close() {
      fromClient(() => {
        // AISIX sends the upstream a close without a code when the caller leaves.
        upstream.close();
        settle(200, 'client');
      });
    },
  });
  upstream.listen({
    message(frame) {
      if (done) return;
      touch();
      // Counted before its check, as AISIX does: a refused answer was still generated and billed.
      addUsage(usage, frame);
      const out = scrub && typeof frame === 'string' ? scrubbedFrame(frame, scrub) : frame;
      fromUpstream(() => pass(verdict(output, out), () => client.send(out)));
    },
    close(code, reason) {
      fromUpstream(() => {
        if (code === 1006) client.close(1011, 'upstream error');
        else if (UNSENDABLE.has(code)) client.close();
        else client.close(code, scrub && reason !== '' ? scrubbedReason(reason, scrub) : reason);
        settle(code === 1006 ? 502 : 200, 'upstream');
      });
    },
  });
  return { usage, end, goAway: () => closeBoth(1001, 'server shutting down', 503, 'drain') };
}

/**
 * An upstream text frame with every secret redacted, when it carries an error (its `type` or a member is the JSON
 * string `"error"`): OpenAI's `error` event quotes a rejected key. Other frames are returned as they are without
 * being searched, so audio costs one scan for the marker. A frame is rewritten only when a secret was found, as
 * JSON with each string (values and names) redacted, so the caller still parses it; text that is not JSON is
 * redacted as text.
 */
export function scrubbedFrame(frame: string, scrub: Scrub): string {
  if (!frame.includes('"error"')) return frame;
  const text = scrub(frame);
  if (text === frame) return frame;
  let event: unknown;
  try {
    event = JSON.parse(frame);
  } catch {
    return text;
  }
  return JSON.stringify(scrubbedStrings(event, scrub));
}

function scrubbedStrings(v: unknown, scrub: Scrub): unknown {
  if (typeof v === 'string') return scrub(v);
  if (Array.isArray(v)) return v.map((x) => scrubbedStrings(x, scrub));
  if (typeof v !== 'object' || v === null) return v;
  // fromEntries defines own members, so a `__proto__` member stays a member.
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [scrub(k), scrubbedStrings(x, scrub)]));
}

/** The longest close reason a close frame carries, in UTF-8 bytes. */
const MAX_CLOSE_REASON_BYTES = 123;
const utf8 = new TextEncoder();

/** An upstream's close reason with every secret redacted, scrubbed whole, then cut to fit a close frame. */
export function scrubbedReason(reason: string, scrub: Scrub): string {
  let out = scrub(reason, MAX_CLOSE_REASON_BYTES);
  // A redaction may lengthen the text, and a character may take several bytes.
  while (utf8.encode(out).length > MAX_CLOSE_REASON_BYTES) out = scrub(reason, out.length - 1);
  return out;
}

/**
 * Adds a frame's reported tokens: `response.done` (`response.usage`), and an input transcription's when its
 * `usage.type` is `tokens`. Other frames cost one prefix check, not a parse.
 */
export function addUsage(usage: RealtimeUsage, frame: WsFrame): void {
  if (typeof frame !== 'string') return;
  const head = frame.slice(0, 120);
  const done = head.includes('"response.done"');
  const transcribed = !done && head.includes('"conversation.item.input_audio_transcription.completed"');
  if (!done && !transcribed) return;
  let event: unknown;
  try {
    event = JSON.parse(frame);
  } catch {
    return;
  }
  if (!isObject(event)) return;
  if (done && event.type === 'response.done' && isObject(event.response)) {
    const u = event.response.usage;
    if (!isObject(u)) return;
    usage.input += count(u.input_tokens);
    usage.output += count(u.output_tokens);
    const details = u.input_token_details;
    if (isObject(details)) usage.cached += count(details.cached_tokens);
    return;
  }
  if (event.type === 'conversation.item.input_audio_transcription.completed' && isObject(event.usage)) {
    if (event.usage.type !== 'tokens') return;
    usage.input += count(event.usage.input_tokens);
    usage.output += count(event.usage.output_tokens);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0;
}

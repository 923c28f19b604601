// Guardrails on a Realtime session's frames (docs/realtime.md "Guardrails"): the chain of the model, the caller's
// key, its team and the environment, resolved once at the handshake. Each text frame is checked whole, as AISIX
// does — the caller's as a user message on the input hook, the upstream's as an answer on the output hook — but a
// frame that carries only base64 audio is not (no guardrail reads audio, and a remote one would be called for
// every audio chunk). A mask never rewrites a frame; a block ends the session with AISIX's error event.
import type { ChainDeps } from '../guardrails/chain.ts';
import { checkAnswer, checkRequest, runsOn } from '../guardrails/guard.ts';
import { blockMessage } from '../guardrails/messages.ts';
import type { Guardrail } from '../guardrails/types.ts';
import { CHECK_FAILED_FRAME, type FrameCheck } from '../realtime/relay.ts';
import { GUARDRAIL_RECORD } from './guardrail-record.ts';
import type { RequestRecord } from './record.ts';

/** Events whose one payload is base64 audio, and the member that holds it. */
const AUDIO_EVENTS: Readonly<Record<string, string>> = {
  'input_audio_buffer.append': 'audio',
  'response.output_audio.delta': 'delta',
  'response.audio.delta': 'delta',
};
/** Members of an audio event that are ids and positions, never text. */
const ID_MEMBERS = new Set(['type', 'event_id', 'item_id', 'response_id', 'output_index', 'content_index']);

/**
 * The text of a frame the chain reads: the frame as it is, or nothing for an audio event with no member beyond
 * its audio and its ids (any other member, even on an audio event, keeps the frame checked whole).
 */
export function scannedText(frame: string): string | undefined {
  if (!frame.includes('audio')) return frame;
  let event: unknown;
  try {
    event = JSON.parse(frame);
  } catch {
    return frame;
  }
  if (typeof event !== 'object' || event === null || Array.isArray(event)) return frame;
  const fields = event as Record<string, unknown>;
  const audio = typeof fields.type === 'string' ? AUDIO_EVENTS[fields.type] : undefined;
  if (audio === undefined) return frame;
  for (const k of Object.keys(fields)) if (k !== audio && !ID_MEMBERS.has(k)) return frame;
  return undefined;
}

/** AISIX's error event of a refused frame. */
export function blockedFrame(side: 'request' | 'response', guardrail: string): string {
  return JSON.stringify({
    type: 'error',
    error: { type: 'invalid_request_error', code: 'content_filtered', message: blockMessage(side, guardrail) },
  });
}

/** The relay's checks for `chain`, or undefined when no member checks either hook. */
export function frameChecks(
  chain: readonly Guardrail[],
  deps: ChainDeps,
  model: string,
  rec: RequestRecord,
): { input?: FrameCheck; output?: FrameCheck } | undefined {
  const onInput = runsOn(chain, 'input');
  const onOutput = runsOn(chain, 'output');
  if (!onInput && !onOutput) return undefined;
  const input: FrameCheck = async (frame) => {
    const text = scannedText(frame);
    if (text === undefined) return undefined;
    const r = await checkRequest(chain, 'chat', 'openai', { messages: [{ role: 'user', content: text }] }, deps, model);
    if (r.verdict) rec.facet(GUARDRAIL_RECORD).ran(r.verdict);
    return r.refusal ? blocked(rec, 'request', r.refusal.guardrail) : undefined;
  };
  const output: FrameCheck = async (frame) => {
    const text = scannedText(frame);
    if (text === undefined) return undefined;
    const answer = JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: text } }] });
    const r = await checkAnswer(chain, 'chat', 'openai', answer, deps, model);
    if (r.verdict) rec.facet(GUARDRAIL_RECORD).ran(r.verdict);
    return r.refusal ? blocked(rec, 'response', r.refusal.guardrail) : undefined;
  };
  return {
    ...(onInput ? { input: failClosed(input, rec) } : {}),
    ...(onOutput ? { output: failClosed(output, rec) } : {}),
  };
}

/** A check that throws refuses its frame (the relay ends the session), named on the record. */
function failClosed(check: FrameCheck, rec: RequestRecord): FrameCheck {
  return (frame) =>
    check(frame).catch(() => {
      rec.failed('guardrail_error', 'the content check of a frame failed');
      return CHECK_FAILED_FRAME;
    });
}

function blocked(rec: RequestRecord, side: 'request' | 'response', guardrail: string): string {
  rec.failed('content_filter', blockMessage(side, guardrail));
  return blockedFrame(side, guardrail);
}

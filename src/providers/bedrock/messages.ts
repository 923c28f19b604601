// `/v1/messages` to an `anthropic.*` model on Bedrock, natively (docs/configuration.md "AWS Bedrock"):
// the caller's Messages body goes to InvokeModel / InvokeModelWithResponseStream with Bedrock's
// `anthropic_version`, so prompt caching, thinking and betas survive; the answer is Anthropic's own.
// The stream's `chunk` events carry each Messages event base64-encoded: they become Anthropic SSE.
import { namedEvent } from '../sse.ts';
import { isRecord, type Json, str } from '../translate/shared.ts';
import { type ProviderCall, type ProviderResult, UpstreamStreamError } from '../types.ts';
import { decodeEventStream, EventStreamError } from './eventstream.ts';
import { sendBedrock } from './runtime.ts';
import type { AwsCredentials } from './sign.ts';

const BEDROCK_ANTHROPIC_VERSION = 'bedrock-2023-05-31';
const utf8 = new TextDecoder();

/** The caller's Messages body as Bedrock takes it: no `model`/`stream`, the version, betas in the body. */
export function bedrockMessagesBody(c: ProviderCall): Json {
  const { model: _m, stream: _s, ...rest } = c.body;
  const body: Json = { ...rest, anthropic_version: BEDROCK_ANTHROPIC_VERSION };
  const beta = c.callerHeaders?.get('anthropic-beta');
  if (beta) body.anthropic_beta = beta.split(',').map((b) => b.trim()).filter(Boolean);
  return body;
}

function base64Json(text: unknown): Json | undefined {
  if (typeof text !== 'string') return undefined;
  try {
    const v: unknown = JSON.parse(utf8.decode(Uint8Array.from(atob(text), (ch) => ch.charCodeAt(0))));
    return isRecord(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

async function* anthropicEvents(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  let stopped = false;
  try {
    for await (const m of decodeEventStream(chunks)) {
      if (m.headers[':message-type'] !== 'event') {
        const type = String(m.headers[':exception-type'] ?? '');
        throw new UpstreamStreamError(
          'upstream_error',
          type === 'throttlingException' ? 'upstream rate limited' : 'upstream reported a stream error',
        );
      }
      if (m.headers[':event-type'] !== 'chunk') continue;
      const outer: unknown = JSON.parse(utf8.decode(m.payload));
      const ev = isRecord(outer) ? base64Json(outer.bytes) : undefined;
      const type = ev && str(ev.type);
      if (!ev || !type) continue;
      if (type === 'message_stop') stopped = true;
      yield namedEvent(type, ev);
    }
  } catch (e) {
    if (e instanceof EventStreamError || e instanceof SyntaxError) {
      throw new UpstreamStreamError('upstream_error', 'upstream sent a corrupt event stream');
    }
    throw e;
  }
  if (!stopped) throw new UpstreamStreamError('upstream_error', 'upstream stream ended before message_stop');
}

export async function bedrockMessages(c: ProviderCall, cred: AwsCredentials, id: string): Promise<ProviderResult> {
  const op = c.stream ? 'invoke-with-response-stream' : 'invoke';
  const accept = c.stream ? 'application/vnd.amazon.eventstream' : 'application/json';
  const sent = await sendBedrock({ c, cred, id, op, body: bedrockMessagesBody(c), accept });
  if (!sent.ok) return sent.answer;
  const { res } = sent;
  if (c.stream) return { kind: 'stream', chunks: anthropicEvents(res.body), cancel: () => res.discard() };
  return {
    kind: 'response',
    status: res.status,
    body: await res.text(),
    contentType: 'application/json',
    retryAfter: null,
  };
}

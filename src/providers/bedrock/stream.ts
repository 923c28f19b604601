// ConverseStream's events (decoded from the binary event stream) as OpenAI chat chunks ending with
// `data: [DONE]` (docs/configuration.md "AWS Bedrock"). An exception frame, a corrupt frame or a stream cut
// before `messageStop` throws an `UpstreamStreamError` with a canned message: AWS's text names accounts.
import { dataEvent, DONE_EVENT } from '../sse.ts';
import { isRecord, type Json, num, str } from '../translate/shared.ts';
import { UpstreamStreamError } from '../types.ts';
import { converseUsage, finishReason } from './converse.ts';
import { decodeEventStream, type EventMessage, EventStreamError } from './eventstream.ts';

const utf8 = new TextDecoder();

/** The status an in-stream exception stands for (AISIX's table), or undefined when it names none. */
function exceptionStatus(type: string, payload: Json): number | undefined {
  switch (type) {
    case 'internalServerException':
      return 500;
    case 'modelStreamErrorException':
      return num(payload.originalStatusCode) ?? 502;
    case 'throttlingException':
      return 429;
    case 'validationException':
      return 400;
    case 'serviceUnavailableException':
      return 503;
    default:
      return undefined;
  }
}

function exceptionMessage(status: number | undefined): string {
  if (status === 429) return 'upstream rate limited';
  if (status === 400) return 'upstream rejected the streaming request';
  return status === undefined ? 'upstream reported a stream error' : `upstream reported stream error ${status}`;
}

function payloadJson(m: EventMessage): Json {
  try {
    const v: unknown = JSON.parse(utf8.decode(m.payload));
    return isRecord(v) ? v : {};
  } catch {
    return {};
  }
}

/** Decoded messages, with a corrupt frame turned into the stream error the caller sees. */
async function* messages(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<EventMessage> {
  try {
    yield* decodeEventStream(chunks);
  } catch (e) {
    if (e instanceof EventStreamError) {
      throw new UpstreamStreamError('upstream_error', 'upstream sent a corrupt event stream');
    }
    throw e;
  }
}

export async function* converseStreamToChat(
  chunks: AsyncIterable<Uint8Array>,
  model: string,
  id: string,
  includeUsage: boolean,
): AsyncGenerator<Uint8Array> {
  const created = Math.floor(Date.now() / 1000);
  const chunk = (delta: Json, finish: string | null = null) =>
    dataEvent({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
  /** Converse content block index → OpenAI tool-call index (dense from 0, text blocks not counted). */
  const toolIndex = new Map<number, number>();
  let started = false;
  let stopped = false;
  for await (const m of messages(chunks)) {
    const kind = m.headers[':message-type'];
    const body = payloadJson(m);
    if (kind === 'exception' || kind === 'error') {
      const type = String(m.headers[':exception-type'] ?? m.headers[':error-code'] ?? '');
      throw new UpstreamStreamError('upstream_error', exceptionMessage(exceptionStatus(type, body)));
    }
    switch (m.headers[':event-type']) {
      case 'messageStart':
        if (!started) yield chunk({ role: 'assistant', content: '' });
        started = true;
        break;
      case 'contentBlockStart': {
        const start = isRecord(body.start) ? body.start : {};
        if (!isRecord(start.toolUse)) break;
        const index = toolIndex.size;
        toolIndex.set(num(body.contentBlockIndex) ?? 0, index);
        yield chunk({
          tool_calls: [{
            index,
            id: str(start.toolUse.toolUseId) ?? '',
            type: 'function',
            function: { name: str(start.toolUse.name) ?? '', arguments: '' },
          }],
        });
        break;
      }
      case 'contentBlockDelta': {
        const delta = isRecord(body.delta) ? body.delta : {};
        if (typeof delta.text === 'string') yield chunk({ content: delta.text });
        else if (isRecord(delta.toolUse) && typeof delta.toolUse.input === 'string') {
          const index = toolIndex.get(num(body.contentBlockIndex) ?? 0) ?? 0;
          yield chunk({ tool_calls: [{ index, function: { arguments: delta.toolUse.input } }] });
        } else if (isRecord(delta.reasoningContent) && typeof delta.reasoningContent.text === 'string') {
          yield chunk({ reasoning_content: delta.reasoningContent.text });
        }
        break;
      }
      case 'messageStop':
        stopped = true;
        yield chunk({}, finishReason(body.stopReason));
        break;
      case 'metadata':
        if (includeUsage) {
          yield dataEvent({
            id,
            object: 'chat.completion.chunk',
            created,
            model,
            choices: [],
            usage: converseUsage(body.usage),
          });
        }
        break;
      default:
        break; // contentBlockStop, unknown events
    }
  }
  if (!stopped) throw new UpstreamStreamError('upstream_error', 'upstream stream ended before messageStop');
  yield DONE_EVENT;
}

// What the usage events keep of a model call's answer (docs/usage-events.md "Content"), as a call watch
// (src/proxy/call-watch.ts) the usage hook's `begin` returns while some exporter takes events: the answer's
// finish reason and, under `content_mode: full`, the prompt as sent upstream and the completion the caller got,
// scrubbed.
import type { Scrub } from '../http/scrub.ts';
import { CompletionCollector } from '../telemetry/content.ts';
import { finishReasonOf } from '../telemetry/finish-reason.ts';
import { capturedAnswer } from './content.ts';
import type { UsagePart } from './facts.ts';

/** The most of a streamed completion kept for an event (each exporter then cuts it to its own cap). */
const MAX_STREAM_CAPTURE = 1_048_576;

export class UsageWatch {
  private collector: CompletionCollector | undefined = undefined;

  /** `handler`: the route's kind of call (`chat`, `embeddings`, `responses`…), which says where the text is. */
  constructor(private readonly part: UsagePart, private readonly handler: string) {}

  sending(body: Record<string, unknown>, scrub: () => Scrub): void {
    if (this.part.captureBytes !== undefined) this.part.prompt = scrub()(JSON.stringify(body));
  }

  answered(body: string, scrub: () => Scrub): void {
    this.part.finishReason = finishReasonOf(body);
    if (this.part.prompt !== undefined) this.part.completion = scrub()(capturedAnswer(this.handler, body));
  }

  streaming(): ((chunk: Uint8Array) => void) | undefined {
    if (this.part.prompt === undefined) return undefined;
    const collector = this.collector = new CompletionCollector(MAX_STREAM_CAPTURE);
    return (chunk) => collector.push(chunk);
  }

  streamEnded(finishReason: string | undefined, scrub: () => Scrub): void {
    this.part.finishReason = finishReason;
    if (this.collector) this.part.completion = scrub()(this.collector.completion);
  }
}

// A stream's tokens at its end: what the upstream's events or the adapter reported, else the local estimate
// of the prompt and the produced text (docs/aisix-compatibility.md "Translation and token accounting"). The
// stream's text is kept for it only until a usage appears, and at most `MAX_COLLECTED_BYTES` of it.
import { StreamText } from '../providers/answer-text.ts';
import { type Counting, estimateTokens } from '../providers/estimate.ts';
import type { TokenCounts } from '../providers/types.ts';
import { fromCounts, isReported, type StreamEnding, type StreamUsage, type Usage } from './usage.ts';

/** The estimate of an answer whose output tokens `output` counts (answer.ts `answerUsage`), counted so. */
export type Estimate = (output: () => Promise<number>, counting: Counting) => Promise<Usage | undefined>;

export class StreamCount implements StreamEnding {
  /** The text kept for an estimate; dropped once a usage is reported or the estimate is made. */
  private text: StreamText | undefined;
  private estimating: Promise<Usage | undefined> | undefined;
  private estimated: { usage: Usage | undefined } | undefined;
  /** The caller left: estimated then, not again when the upstream's failure (its abort) ends the stream later. */
  private left = false;

  constructor(
    private readonly meter: StreamUsage,
    /** The adapter's own count (ProviderResult `counted`). */
    private readonly counted: (() => TokenCounts | undefined) | undefined,
    private readonly estimate: Estimate,
    maxEventBytes: number | undefined,
  ) {
    this.text = new StreamText(maxEventBytes);
  }

  observe(chunk: Uint8Array, text: string): void {
    if (this.text === undefined) return;
    // The adapter's count, once defined, is the record: the bytes may state what it did not (a translated
    // stream's `message_start` carries a local count of the prompt).
    const counted = this.counted?.();
    if (counted ? isReported(fromCounts(counted)) : this.meter.reported) this.text = undefined;
    else this.text.observe(chunk, text);
  }

  /** The estimate is made before the caller sees the end, so a token limit is charged before its next request. */
  ended(): Promise<void> {
    return this.left || isReported(this.reported()) ? Promise.resolve() : this.estimateOnce().then(() => {});
  }

  /**
   * What the stream used: at once when reported or estimated, else once the estimate is made. A stream the
   * caller left (`left`) is estimated from the prompt and what was relayed, counted without building a
   * tokenizer table (docs/translation.md "Interrupted streams"): the upstream bills the prompt all the same.
   */
  final(left: boolean): Usage | undefined | Promise<Usage | undefined> {
    const reported = this.reported();
    if (isReported(reported)) return reported;
    if (this.estimated) return this.estimated.usage;
    if (left) this.left = true;
    return this.estimateOnce(left ? 'built-only' : 'full');
  }

  private reported(): Usage | undefined {
    return fromCounts(this.counted?.()) ?? this.meter.usage();
  }

  private estimateOnce(counting: Counting = 'full'): Promise<Usage | undefined> {
    if (this.estimating) return this.estimating;
    const text = this.text ?? new StreamText();
    this.text = undefined;
    const output = async () => Math.ceil(await estimateTokens(await text.text(), undefined, counting) * text.scale());
    this.estimating = this.estimate(output, counting)
      .then((usage) => {
        this.estimated = { usage };
        return usage;
      });
    return this.estimating;
  }
}

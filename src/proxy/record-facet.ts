// A feature's part of a request's record (docs/architecture.md "A request"): the feature's own fields and
// what they say about the request's log lines, samples and trace, so `RequestRecord` gains nothing per feature.
import type { RequestOutcome } from '../telemetry/trace.ts';

/** One request's part of one feature: made on the feature's first write to the record, read once at the end. */
export interface RecordFacet {
  /** Its access-log values, in the order of its part's `fields`; an absent one is `undefined`. */
  accessLogValues(): readonly unknown[];
  /** False: no upstream's answer reached the caller (a cached answer, a refused one): no provider-call line. */
  readonly providerCall?: boolean;
  /** False: the request's tokens were spent before (a cached answer): no spend sample. */
  readonly charged?: boolean;
  /** Its part of the request's trace outcome (traced requests only). */
  traced?(outcome: RequestOutcome): void;
}

/** A feature's part: its access-log fields, and how one request's facet is made. */
export interface RecordPart<F extends RecordFacet> {
  readonly name: string;
  /** Its access-log fields, in order; their place in the line is the part's in `RECORD_PARTS` (record.ts). */
  readonly fields: readonly string[];
  create(): F;
}

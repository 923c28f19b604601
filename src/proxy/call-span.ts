// A tool or agent call's part of its request's trace (record-facet.ts; docs/operations.md "Tracing"): AISIX
// names the span after the call (`execute_tool <tool>`, `invoke_agent <agent>`), puts the surface's attributes
// on the carrier span, and places one CLIENT span over the upstream request when the call reached one.
import type { RequestOutcome } from '../telemetry/trace.ts';
import type { RecordFacet, RecordPart } from './record-facet.ts';

/** A name longer than this (bytes) leaves the span's name bare. */
const MAX_NAME_BYTES = 64;
/** Caller-chosen attribute values are cut to this many bytes. */
export const MAX_ATTRIBUTE_BYTES = 256;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** `text` cut to `max` UTF-8 bytes, never inside a character. */
export function cutBytes(text: string, max = MAX_ATTRIBUTE_BYTES): string {
  const bytes = encoder.encode(text);
  if (bytes.length <= max) return text;
  return decoder.decode(bytes.slice(0, max)).replace(/\uFFFD$/, '');
}

/** AISIX's span name: the operation and its target, or the bare operation for an empty or long target. */
export function callSpanName(operation: string, target: string): string {
  return target === '' || encoder.encode(target).length > MAX_NAME_BYTES ? operation : `${operation} ${target}`;
}

export class CallSpan implements RecordFacet {
  operation = '';
  target = '';
  attributes: Record<string, string | number> = {};
  /** ms since arrival (the record's clock). */
  upstream: { start: number; end: number } | undefined = undefined;

  /** The upstream request began or settled, at `ms` since arrival. */
  upstreamAt(phase: 'start' | 'end', ms: number): void {
    if (phase === 'start') this.upstream = { start: ms, end: ms };
    else if (this.upstream) this.upstream.end = ms;
  }

  accessLogValues(): readonly unknown[] {
    return [];
  }

  traced(o: RequestOutcome): void {
    if (this.operation === '') return;
    o.operation = this.operation;
    o.spanName = callSpanName(this.operation, this.target);
    o.callAttributes = this.attributes;
    if (this.upstream) o.upstreamCall = this.upstream;
  }
}

/** Set by the MCP handler on a `tools/call` and by the A2A handler on a call. */
export const CALL_SPAN: RecordPart<CallSpan> = {
  name: 'call_span',
  fields: [],
  create: () => new CallSpan(),
};

// The OTLP/HTTP JSON request body (opentelemetry-proto's JSON mapping, as AISIX writes it): one resource,
// one scope, every span of a batch in one `spans` array. No compression, no protobuf.
import { VERSION } from '../version.ts';
import type { OtlpSpan } from './spans.ts';

/** AISIX's resource `service.name`, so a trace query written for an AISIX fleet finds Sluice's spans. */
export const SERVICE_NAME = 'aisix-dp';
export const SCOPE_NAME = 'aisix-obs.otlp_http_sink';
export const USER_AGENT = `sluice/${VERSION}`;

/** One record (one request's spans) as JSON text, written once when it is queued: `{…},{…}`. */
export function serializeRecord(spans: readonly OtlpSpan[]): string {
  return JSON.stringify(spans).slice(1, -1);
}

/** The export request around an empty `spans` array, split where the spans go. */
const [BODY_HEAD, BODY_TAIL] = (() => {
  const empty = JSON.stringify({
    resourceSpans: [{
      resource: {
        attributes: [
          { key: 'service.name', value: { stringValue: SERVICE_NAME } },
          { key: 'service.version', value: { stringValue: VERSION } },
        ],
      },
      scopeSpans: [{ scope: { name: SCOPE_NAME }, spans: [] }],
    }],
  });
  const at = empty.lastIndexOf('[]') + 1;
  return [empty.slice(0, at), empty.slice(at)];
})();

/**
 * `{"resourceSpans":[…]}` for a batch of serialized records: joined, never parsed or serialized again, so a
 * batch costs no long synchronous turn of the event loop.
 */
export function exportBodyOf(records: readonly string[]): string {
  return BODY_HEAD + records.join(',') + BODY_TAIL;
}

/** `{"resourceSpans":[…]}` for a batch of records (each record: one request's spans). */
export function exportRequestBody(records: readonly (readonly OtlpSpan[])[]): string {
  return exportBodyOf(records.map(serializeRecord));
}

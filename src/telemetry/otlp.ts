// The OTLP/HTTP JSON request body (opentelemetry-proto's JSON mapping, as AISIX writes it): one resource,
// one scope, every span of a batch in one `spans` array. No compression, no protobuf.
import { VERSION } from '../version.ts';
import type { OtlpSpan } from './spans.ts';

/** AISIX's resource `service.name`, so a trace query written for an AISIX fleet finds Sluice's spans. */
export const SERVICE_NAME = 'aisix-dp';
export const SCOPE_NAME = 'aisix-obs.otlp_http_sink';
export const USER_AGENT = `sluice/${VERSION}`;

/** `{"resourceSpans":[…]}` for a batch of records (each record: one request's spans). */
export function exportRequestBody(records: readonly (readonly OtlpSpan[])[]): string {
  const spans: OtlpSpan[] = [];
  for (const r of records) for (const s of r) spans.push(s);
  return JSON.stringify({
    resourceSpans: [{
      resource: {
        attributes: [
          { key: 'service.name', value: { stringValue: SERVICE_NAME } },
          { key: 'service.version', value: { stringValue: VERSION } },
        ],
      },
      scopeSpans: [{ scope: { name: SCOPE_NAME }, spans }],
    }],
  });
}

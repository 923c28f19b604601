// A passthrough route's part of a request's record (record-facet.ts; docs/endpoints.md "Passthrough routes"):
// the end user the route's `identity_header` named (AISIX's usage-event `client_identity`, for per-person audit),
// control characters removed and cut to 256 characters as AISIX records it.
import type { RecordFacet, RecordPart } from './record-facet.ts';

/** AISIX's cap on a recorded identity (the value arrives from the wire). */
export const MAX_CLIENT_IDENTITY = 256;

export class PassthroughRecord implements RecordFacet {
  clientIdentity: string | undefined = undefined;

  accessLogValues(): readonly unknown[] {
    return [this.clientIdentity];
  }
}

export const PASSTHROUGH_RECORD: RecordPart<PassthroughRecord> = {
  name: 'passthrough',
  fields: ['client_identity'],
  create: () => new PassthroughRecord(),
};

/** The identity header's value as recorded: control characters removed, at most `MAX_CLIENT_IDENTITY` characters. */
export function clientIdentity(value: string | null): string | undefined {
  if (value === null) return undefined;
  // deno-lint-ignore no-control-regex -- removing control characters is the point
  const clean = value.replace(/[\u0000-\u001f\u007f]/g, '').slice(0, MAX_CLIENT_IDENTITY);
  return clean === '' ? undefined : clean;
}

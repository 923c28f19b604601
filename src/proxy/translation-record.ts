// The translation's part of a request's record (record-facet.ts): what it dropped from the request, as the
// serving target's `x-sluice-dropped` header lists it (docs/translation.md "Nothing dropped in silence").
import type { RecordFacet, RecordPart } from './record-facet.ts';

export class DroppedRecord implements RecordFacet {
  items: string | undefined = undefined;

  accessLogValues(): readonly unknown[] {
    return [this.items];
  }
}

export const DROPPED_RECORD: RecordPart<DroppedRecord> = {
  name: 'translation',
  fields: ['dropped'],
  create: () => new DroppedRecord(),
};

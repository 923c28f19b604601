// The audio, image and rerank endpoints' usage on AISIX's basis (docs/media-endpoints.md "Accounting"): rerank's
// tokens, and the media part of a request's record (the audio seconds and characters in the access log).
import { rerankTokens } from '../media/usage.ts';
import type { RecordFacet, RecordPart } from './record-facet.ts';
import type { Usage } from './usage.ts';

/** A rerank answer's usage: its input tokens, whichever vendor's shape states them. */
export function rerankUsage(body: string): Usage | undefined {
  const input = rerankTokens(body);
  return input === undefined ? undefined : { input, output: 0 };
}

/** The media part of a request's record: the basis audio is priced on. */
export class MediaRecord implements RecordFacet {
  /** The audio a transcription or translation covered (AISIX's `audio_duration_seconds`). */
  audioSeconds: number | undefined = undefined;
  /** The characters a speech request asked to be spoken. */
  characters: number | undefined = undefined;

  accessLogValues(): readonly unknown[] {
    return [this.audioSeconds, this.characters];
  }
}

export const MEDIA_RECORD: RecordPart<MediaRecord> = {
  name: 'media',
  fields: ['audio_duration_seconds', 'input_characters'],
  create: () => new MediaRecord(),
};

// The resources file's YAML parsed on another thread (docs/configuration.md "Reloading"): the thread runs
// `yamlPieces` and hands its result back one piece at a time, each piece asked for by the event loop's
// side, so no single turn there decodes the whole file. `assembleYaml` puts the pieces back together.
import type { YamlPiece, YamlPieces } from '../platform.ts';
import { FileReport, parseYaml } from '../util/report.ts';

export type { YamlPiece, YamlPieces };

/** Rows per piece: small enough that decoding one is a short turn of the event loop. */
const ROWS_PER_PIECE = 500;

/** The thread's side: parse `text`, then one piece per call, `done` once everything was handed over. */
export function yamlPieces(text: string): () => YamlPiece {
  const scratch = new FileReport('resources file', '');
  const src = parseYaml(text, scratch);
  if (!src) {
    const errors = scratch.entries.map((e) => ({ message: e.message, ...(e.line ? { line: e.line } : {}) }));
    return () => ({ type: 'errors', errors });
  }
  const queue: { key: string; rows: unknown[] }[] = [];
  let value = src.value;
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const head: Record<string, unknown> = { ...value };
    for (const [key, v] of Object.entries(head)) {
      if (!Array.isArray(v)) continue;
      head[key] = [];
      for (let i = 0; i < v.length; i += ROWS_PER_PIECE) queue.push({ key, rows: v.slice(i, i + ROWS_PER_PIECE) });
    }
    value = head;
  }
  let sentHead = false;
  return () => {
    if (!sentHead) {
      sentHead = true;
      return { type: 'head', value };
    }
    const next = queue.shift();
    return next ? { type: 'rows', ...next } : { type: 'done' };
  };
}

/** What `parseYaml` gives the pipeline, from the pieces of another thread. */
export type Assembled = { ok: true; value: unknown } | { ok: false; errors: { message: string; line?: number }[] };

/**
 * The event loop's side: ask for pieces until `done`, waiting `between` after each so requests run
 * between them. Rejects when the thread fails; the caller then parses on its own thread.
 */
export async function assembleYaml(pieces: YamlPieces, between: () => Promise<void>): Promise<Assembled> {
  try {
    const first = await pieces.next();
    if (first.type === 'errors') return { ok: false, errors: first.errors };
    if (first.type !== 'head') throw new Error(`unexpected ${first.type} piece first`);
    const value = first.value;
    for (;;) {
      await between();
      const p = await pieces.next();
      if (p.type === 'done') return { ok: true, value };
      if (p.type !== 'rows') throw new Error(`unexpected ${p.type} piece`);
      const rows = (value as Record<string, unknown[]>)[p.key]!;
      for (const row of p.rows) rows.push(row);
    }
  } finally {
    pieces.close();
  }
}

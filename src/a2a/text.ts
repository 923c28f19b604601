// The words of an A2A call (docs/a2a.md "Usage"): the caller's message text and the agent's answer text, read
// as AISIX reads them for its token estimate — the text parts of `params.message`; the artifacts' text (an
// `append` update extends its artifact, any other replaces it) and the latest status or message text. Both
// A2A 0.3's `kind`-tagged results and 1.0's `task` / `message` / `statusUpdate` / `artifactUpdate` wrappers.

/** Each text is kept to this many characters: a task may stream for hours; past it the estimate is a floor. */
export const MAX_TEXT = 1_048_576;

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The parts of the call's `params.message`, or none. */
export function messageParts(rpc: Record<string, unknown>): unknown[] {
  const params = rpc.params;
  const message = isRecord(params) ? params.message : undefined;
  return isRecord(message) && Array.isArray(message.parts) ? message.parts : [];
}

/** The text parts of a part list, joined with `\n`. */
export function partsText(parts: unknown): string {
  if (!Array.isArray(parts)) return '';
  const out: string[] = [];
  for (const p of parts) if (isRecord(p) && typeof p.text === 'string' && p.text !== '') out.push(p.text);
  return out.join('\n');
}

function capped(s: string): string {
  return s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) : s;
}

/** The caller's message text (what the prompt estimate counts). */
export function requestText(rpc: Record<string, unknown>): string {
  return capped(partsText(messageParts(rpc)));
}

/** A `result` with a 1.0 wrapper taken off; a 0.3 result as it is. */
export function unwrapResult(result: unknown): Record<string, unknown> | undefined {
  if (!isRecord(result)) return undefined;
  for (const w of ['task', 'message', 'statusUpdate', 'artifactUpdate']) {
    const inner = result[w];
    if (isRecord(inner)) return inner;
  }
  return result;
}

/** The agent's words over one call, as each answer or event goes by. */
export class ResultText {
  private readonly artifacts = new Map<string, string>();
  private latest = '';

  observe(result: unknown): void {
    const r = unwrapResult(result);
    if (!r) return;
    if (isRecord(r.artifact)) this.artifact(r.artifact, r.append === true);
    if (Array.isArray(r.artifacts)) { for (const a of r.artifacts) if (isRecord(a)) this.artifact(a, false); }
    if (isRecord(r.status) && isRecord(r.status.message)) {
      const t = partsText(r.status.message.parts);
      if (t !== '') this.latest = capped(t);
    }
    if (Array.isArray(r.parts)) {
      const t = partsText(r.parts);
      if (t !== '') this.latest = capped(t);
    }
  }

  private artifact(a: Record<string, unknown>, append: boolean): void {
    const id = typeof a.artifactId === 'string' ? a.artifactId : '';
    const t = partsText(a.parts);
    const before = append ? this.artifacts.get(id) ?? '' : '';
    this.artifacts.set(id, capped(before + t));
  }

  /** The artifacts in the order they first came, then the latest status or message text. */
  joined(): string {
    const all = [...this.artifacts.values(), this.latest].filter((t) => t !== '');
    return capped(all.join('\n'));
  }
}

// `kind: aliyun_ai_guardrail` (docs/guardrails.md "Aliyun"): Aliyun AI Guardrails, action `MultiModalGuard`.
// `Data.Suggestion` decides: `block` blocks, `mask` rewrites the text with Aliyun's desensitized version where
// it can be written back (whole bodies, a held-back stream) and blocks where it cannot (a streamed window),
// anything else allows. A streamed answer's windows carry its id as `sessionId` and `chatId`.
import { ALIYUN_MSG } from '../messages.ts';
import type { AliyunAiGuardrailRow } from '../schema.ts';
import { ALLOW, type CheckContext, type Hook, joined, type Outcome, type Segment } from '../types.ts';
import { isRecord } from './http.ts';
import { callAliyun, pieces, type RpcResult } from './aliyun-rpc.ts';

type Reply = Extract<RpcResult, { ok: true }>;
type Check = (s: readonly Segment[], hook: Hook, ctx: CheckContext) => Promise<Outcome>;
/** A text's verdict: its rewritten text and the labels masked, or the outcome that ends the check. */
type Masked = { text: string; labels: string[] } | { end: Outcome };

export function serviceCode(level: 'pro' | 'basic', hook: Hook): string {
  const base = hook === 'input' ? 'query_security_check' : 'response_security_check';
  return level === 'basic' ? base : `${base}_pro`;
}

/** One row's calls to the service, its log line and its refusal. */
interface AiRow {
  call(service: string, content: string, ctx: CheckContext, sessionId?: string): ReturnType<typeof callAliyun>;
  logged(r: Reply, service: string, msg: string, ctx: CheckContext): void;
  block(why: string): Outcome;
}

function aiRow(row: AliyunAiGuardrailRow): AiRow {
  return {
    call: (service, content, ctx, sessionId) =>
      callAliyun(row, {
        action: 'MultiModalGuard',
        service,
        serviceParameters: sessionId === undefined ? { content } : { content, sessionId, chatId: sessionId },
        configError: ALIYUN_MSG.aiConfigError,
        notActivated: ALIYUN_MSG.aiNotActivated,
      }, ctx),
    logged: (r, service, msg, ctx) =>
      ctx.log?.('info', msg, {
        service,
        aliyun_request_id: r.requestId,
        aliyun_code: r.code,
        aliyun_suggestion: suggestionOf(r),
        aliyun_labels: labelsOf(r).join(','),
      }),
    block: (why) => ({ kind: 'block', reason: `aliyun AI guardrail: ${why} (row: ${row.name})` }),
  };
}

export function buildAliyunAiGuardrail(row: AliyunAiGuardrailRow): Check {
  const a = aiRow(row);
  return async (segments, hook, ctx) => {
    const service = serviceCode(row.service_level, hook);
    const text = joined(segments);
    if (text.trim() === '') return ALLOW;
    if (ctx.writeBack === false) return checkWindow(a, text, service, hook, ctx);
    return checkAndMask(a, segments, text, service, ctx);
  };
}

/** A streamed window: what is sent cannot be rewritten, so `mask` refuses. */
async function checkWindow(a: AiRow, text: string, service: string, hook: Hook, ctx: CheckContext): Promise<Outcome> {
  const sessionId = hook === 'output' ? ctx.responseId || crypto.randomUUID() : undefined;
  for (const piece of pieces(text)) {
    const r = await a.call(service, piece, ctx, sessionId);
    if (!r.ok) return r.outcome;
    const s = suggestionOf(r);
    if (s !== 'block' && s !== 'mask') continue;
    a.logged(r, service, ALIYUN_MSG.aiBlocked, ctx);
    return a.block(s === 'block' ? 'suggestion block' : 'content requires masking');
  }
  return ALLOW;
}

/** Text that can be rewritten: a verdict, and where Aliyun masks, each segment's desensitized text in its place. */
async function checkAndMask(
  a: AiRow,
  segments: readonly Segment[],
  text: string,
  service: string,
  ctx: CheckContext,
): Promise<Outcome> {
  const filled = segments.filter((s) => s.text !== '');
  // One segment: the joined text is that segment, so its pieces' answers are its masks.
  if (filled.length === 1) {
    const m = await maskText(a, text, service, ctx);
    if ('end' in m) return m.end;
    if (m.labels.length === 0) return ALLOW;
    return { kind: 'mask', texts: segments.map((s) => (s.text === '' ? s.text : m.text)), counts: countOf(m.labels) };
  }
  // Several: one verdict on the joined text first; only a `mask` pays a call per segment, which keeps each
  // desensitized text in its place.
  let needsMask = false;
  for (const piece of pieces(text)) {
    const r = await a.call(service, piece, ctx);
    if (!r.ok) return r.outcome;
    const s = suggestionOf(r);
    if (s === 'block') {
      a.logged(r, service, ALIYUN_MSG.aiBlocked, ctx);
      return a.block('suggestion block');
    }
    if (s === 'mask') needsMask = true;
  }
  if (!needsMask) return ALLOW;
  const texts: string[] = [];
  const labels: string[] = [];
  for (const s of segments) {
    if (s.text.trim() === '') {
      texts.push(s.text);
      continue;
    }
    const m = await maskText(a, s.text, service, ctx);
    if ('end' in m) return m.end;
    texts.push(m.text);
    labels.push(...m.labels);
  }
  return { kind: 'mask', texts, counts: countOf(labels) };
}

/** Every piece of `text` checked; a `mask` piece takes Aliyun's desensitized text. */
async function maskText(a: AiRow, text: string, service: string, ctx: CheckContext): Promise<Masked> {
  let out = '';
  const labels: string[] = [];
  for (const piece of pieces(text)) {
    const r = await a.call(service, piece, ctx);
    if (!r.ok) return { end: r.outcome };
    const s = suggestionOf(r);
    if (s === 'block') {
      a.logged(r, service, ALIYUN_MSG.aiBlocked, ctx);
      return { end: a.block('suggestion block') };
    }
    if (s !== 'mask') {
      out += piece;
      continue;
    }
    const masked = desensitizedOf(r);
    a.logged(r, service, ALIYUN_MSG.aiMasking, ctx);
    // Masking asked and nothing to mask with: the text must not go out as it is.
    if (masked === undefined) return { end: a.block('content requires masking and no desensitized text was given') };
    out += masked;
    const found = labelsOf(r);
    // A mask is counted even when Aliyun names no label for it.
    labels.push(...(found.length > 0 ? found : ['aliyun_ai_guardrail']));
  }
  return { text: out, labels };
}

/** `Data.Suggestion`, lower-cased; missing is `pass`. */
function suggestionOf(r: Reply): string {
  return typeof r.data.Suggestion === 'string' && r.data.Suggestion !== '' ? r.data.Suggestion.toLowerCase() : 'pass';
}

function results(r: Reply): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  if (!Array.isArray(r.data.Detail)) return out;
  for (const d of r.data.Detail) {
    if (!isRecord(d) || !Array.isArray(d.Result)) continue;
    for (const x of d.Result) if (isRecord(x)) out.push(x);
  }
  return out;
}

/** The detected labels (names only): every `Detail[].Result[].Label` but `nonLabel`. */
function labelsOf(r: Reply): string[] {
  const out: string[] = [];
  for (const x of results(r)) {
    if (typeof x.Label === 'string' && x.Label !== '' && x.Label !== 'nonLabel') out.push(x.Label);
  }
  return out;
}

/** The last non-empty `Detail[].Result[].Ext.Desensitization` (`Ext` an object or a JSON string). */
function desensitizedOf(r: Reply): string | undefined {
  let found: string | undefined;
  for (const x of results(r)) {
    let ext = x.Ext;
    if (typeof ext === 'string') {
      try {
        ext = JSON.parse(ext);
      } catch {
        continue;
      }
    }
    if (isRecord(ext) && typeof ext.Desensitization === 'string' && ext.Desensitization !== '') {
      found = ext.Desensitization;
    }
  }
  return found;
}

function countOf(labels: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const l of labels) counts[l] = (counts[l] ?? 0) + 1;
  return counts;
}

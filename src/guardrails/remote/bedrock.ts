// `kind: bedrock`: AWS Bedrock's ApplyGuardrail, SigV4-signed (docs/guardrails.md "Remote kinds"). Each
// non-empty segment is one text block of `POST {endpoint}/guardrail/{id}/version/{version}/apply` with
// `source` INPUT or OUTPUT. `action` NONE allows; GUARDRAIL_INTERVENED blocks when any assessment blocks,
// and masks with `outputs[].text` when the only interventions are ANONYMIZED sensitive information.
import { AwsV4Signer } from 'aws4fetch';
import type { Built } from '../keyword.ts';
import type { BedrockRow } from '../schema.ts';
import { ALLOW, type CheckContext, type Hook, type Outcome, type Segment } from '../types.ts';
import { isRecord, join, loggable, malformed } from './http.ts';

const SERVICE = 'bedrock';

/** Signing keys by secret, day, region and service (aws4fetch's cache); cleared when it grows. */
const signingKeys = new Map<string, ArrayBuffer>();

type Failure = { kind: 'unavailable'; tag: string; reason: string };
const failure = (kind: 'timeout' | 'throttled' | '5xx', reason: string): Failure => ({
  kind: 'unavailable',
  tag: `${SERVICE}_${kind}`,
  reason,
});

export function buildBedrock(
  row: BedrockRow,
): Built<(s: readonly Segment[], hook: Hook, ctx: CheckContext) => Promise<Outcome>> {
  const path = `/guardrail/${encodeURIComponent(row.guardrail_id)}/version/${
    encodeURIComponent(row.guardrail_version)
  }/apply`;
  const timeoutMs = row.latency_mode.kind === 'timed' ? row.latency_mode.timeout_ms : undefined;
  return {
    ok: true,
    value: async (segments, hook, ctx) => {
      const sent: number[] = []; // content block index → segment index
      const content: { text: { text: string } }[] = [];
      segments.forEach((s, i) => {
        if (s.text === '') return;
        sent.push(i);
        content.push({ text: { text: s.text } });
      });
      // Bedrock refuses an empty content list: nothing to check.
      if (content.length === 0) return ALLOW;
      const base = ctx.bedrockEndpointUrl || `https://bedrock-runtime.${row.region}.amazonaws.com`;
      const body = JSON.stringify({ source: hook === 'input' ? 'INPUT' : 'OUTPUT', content });
      const r = await apply(ctx, row, join(base, path), body, timeoutMs);
      return 'kind' in r ? r : decide(r.body, segments, sent);
    },
  };
}

/** One signed call; `timeoutMs` undefined (`serial`): only the caller's hang-up ends it early. */
async function apply(
  ctx: CheckContext,
  row: BedrockRow,
  url: string,
  body: string,
  timeoutMs: number | undefined,
): Promise<{ body: unknown } | Failure> {
  const ac = new AbortController();
  let timedOut = false;
  const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
    timedOut = true;
    ac.abort();
  }, timeoutMs);
  const onCallerGone = () => ac.abort();
  ctx.signal?.addEventListener('abort', onCallerGone, { once: true });
  try {
    const res = await ctx.fetch({
      url,
      method: 'POST',
      headers: await signed(row, url, body),
      body,
      signal: ac.signal,
    });
    const text = await res.text();
    if (res.status === 429 || (res.status === 400 && text.includes('ThrottlingException'))) {
      return failure('throttled', `HTTP ${res.status}`);
    }
    // AISIX folds every other AWS error (access denied, validation, 5xx) into `bedrock_5xx`.
    if (res.status >= 300) return failure('5xx', `HTTP ${res.status}: ${loggable(ctx, text, 256)}`);
    try {
      return { body: JSON.parse(text) };
    } catch {
      return failure('5xx', `HTTP ${res.status} with a body that is not JSON`);
    }
  } catch (e) {
    if (timedOut) return failure('timeout', `no answer within ${timeoutMs} ms`);
    return failure('5xx', `transport: ${(e as Error).message}`);
  } finally {
    clearTimeout(timer);
    ctx.signal?.removeEventListener('abort', onCallerGone);
  }
}

async function signed(row: BedrockRow, url: string, body: string): Promise<Record<string, string>> {
  if (signingKeys.size > 256) signingKeys.clear();
  const signer = new AwsV4Signer({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body,
    accessKeyId: row.aws_credentials.access_key_id,
    secretAccessKey: row.aws_credentials.secret_access_key,
    service: 'bedrock',
    region: row.region,
    cache: signingKeys,
  });
  const out: Record<string, string> = {};
  (await signer.sign()).headers.forEach((v, k) => {
    // `host` is signed from the URL; the HTTP client sends it.
    if (k !== 'host') out[k] = v;
  });
  return out;
}

/** ApplyGuardrail's answer as a verdict: a hard block, a mask by position, or allow. */
function decide(body: unknown, segments: readonly Segment[], sent: number[]): Outcome {
  if (!isRecord(body) || typeof body.action !== 'string') return malformed(SERVICE, 'no string `action`');
  if (body.action === 'NONE') return ALLOW;
  if (body.action !== 'GUARDRAIL_INTERVENED') return malformed(SERVICE, `unknown action ${body.action}`);
  const assessments = Array.isArray(body.assessments) ? body.assessments.filter(isRecord) : [];
  const blocking = assessments.map(hardBlock).find((b) => b !== undefined);
  if (blocking !== undefined) return { kind: 'block', reason: `bedrock guardrail intervened (${blocking})` };
  const outputs = Array.isArray(body.outputs) ? body.outputs : [];
  const texts = outputs.map((o) => (isRecord(o) && typeof o.text === 'string' ? o.text : undefined));
  // The masked text is written back by position: without one text per block sent, the disposition of some
  // text is unknown, and it is refused rather than released unmasked.
  if (texts.length !== sent.length || texts.some((t) => t === undefined)) {
    return { kind: 'block', reason: 'bedrock guardrail anonymized content that cannot be mapped back' };
  }
  const out = segments.map((s) => s.text);
  sent.forEach((seg, i) => (out[seg] = texts[i]!));
  return { kind: 'mask', texts: out, counts: anonymizedCounts(assessments) };
}

const list = (v: unknown): Record<string, unknown>[] => (Array.isArray(v) ? v.filter(isRecord) : []);
const field = (r: Record<string, unknown>, k: string): Record<string, unknown> => {
  const v = r[k];
  return isRecord(v) ? v : {};
};

/**
 * The policy of one assessment that blocks (AISIX's reading): any topic, content filter or word hit, a
 * contextual-grounding filter BLOCKED, a PII entity or regex BLOCKED. Undefined: nothing blocks.
 */
function hardBlock(a: Record<string, unknown>): string | undefined {
  if (list(field(a, 'topicPolicy').topics).length > 0) return 'topicPolicy';
  if (list(field(a, 'contentPolicy').filters).length > 0) return 'contentPolicy';
  const words = field(a, 'wordPolicy');
  if (list(words.customWords).length > 0 || list(words.managedWordLists).length > 0) return 'wordPolicy';
  if (list(field(a, 'contextualGroundingPolicy').filters).some((f) => f.action === 'BLOCKED')) {
    return 'contextualGroundingPolicy';
  }
  const sip = field(a, 'sensitiveInformationPolicy');
  if ([...list(sip.piiEntities), ...list(sip.regexes)].some((e) => e.action === 'BLOCKED')) {
    return 'sensitiveInformationPolicy';
  }
  return undefined;
}

/** PII entity types and regex names that were ANONYMIZED → spans (`redacted_entity_counts`). */
function anonymizedCounts(assessments: Record<string, unknown>[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const a of assessments) {
    const sip = field(a, 'sensitiveInformationPolicy');
    for (const e of list(sip.piiEntities)) {
      if (e.action === 'ANONYMIZED') counts[String(e.type)] = (counts[String(e.type)] ?? 0) + 1;
    }
    for (const r of list(sip.regexes)) {
      if (r.action === 'ANONYMIZED') counts[String(r.name)] = (counts[String(r.name)] ?? 0) + 1;
    }
  }
  return counts;
}

// One `guardrails` row → the Guardrail the chain runs (docs/guardrails.md "Loading"). A row that parses but
// cannot be built (a pattern RE2 refuses, a threshold out of range, a kind Sluice does not run) is an error
// the source reports as a rejected row: never skipped and served unscreened, as AISIX does.
import { buildKeyword } from './keyword.ts';
import { buildPii } from './pii.ts';
import { buildPromptShield, buildTextModeration } from './remote/azure.ts';
import { buildAliyunTextModeration } from './remote/aliyun.ts';
import { buildAliyunAiGuardrail } from './remote/aliyun-ai.ts';
import { buildSemantic } from './semantic.ts';
import { buildBedrock } from './remote/bedrock.ts';
import { buildLakera } from './remote/lakera.ts';
import { buildOpenAiModeration } from './remote/openai-moderation.ts';
import { buildPresidio } from './remote/presidio.ts';
import type { GuardrailRow, RemoteRow } from './schema.ts';
import {
  type CheckContext,
  DEFAULT_STREAM,
  type Guardrail,
  type Hook,
  type Outcome,
  type Segment,
  type StreamPolicy,
} from './types.ts';

export type BuildResult =
  /** `guardrail` undefined: the row is disabled or inert (no patterns, no detectors) and runs nowhere. */
  | { ok: true; guardrail: Guardrail | undefined; warnings: string[] }
  | { ok: false; error: string };

type Check = Guardrail['check'];

export function buildGuardrail(id: string, row: GuardrailRow): BuildResult {
  const made = checkOf(row);
  if (!made.ok) return made;
  const warnings: string[] = [];
  if (row.enforcement_mode !== 'block' && row.enforcement_mode !== 'monitor') warnings.push('unknown_enforcement_mode');
  if (!row.enabled || made.inert) return { ok: true, guardrail: undefined, warnings };
  const remote = 'output_fail_open' in row;
  return {
    ok: true,
    warnings,
    guardrail: {
      id,
      name: row.name,
      kind: row.kind,
      input: row.hook_point !== 'output',
      output: row.hook_point !== 'input',
      monitor: row.enforcement_mode === 'monitor',
      failOpen: remote ? row.fail_open : true,
      outputFailOpen: remote ? (row as RemoteRow).output_fail_open : true,
      mandatory: row.mandatory,
      createdAt: row.created_at,
      stream: streamPolicy(row),
      secrets: rowSecrets(row),
      check: made.check,
    },
  };
}

/** The credential members of a remote row (src/http/scrub.ts adds them to what it redacts). */
function rowSecrets(row: GuardrailRow): string[] {
  const out: string[] = [];
  const r = row as Partial<Record<'api_key' | 'access_key_id' | 'access_key_secret', unknown>>;
  for (const v of [r.api_key, r.access_key_id, r.access_key_secret]) if (typeof v === 'string') out.push(v);
  if (row.kind === 'bedrock') out.push(row.aws_credentials.access_key_id, row.aws_credentials.secret_access_key);
  return out;
}

function checkOf(
  row: GuardrailRow,
): { ok: true; check: Check; inert: boolean } | { ok: false; error: string } {
  const local = (
    b: { ok: true; value: (s: readonly Segment[], h: Hook) => Outcome | Promise<Outcome> } | {
      ok: false;
      error: string;
    },
    inert: boolean,
  ) => b.ok ? { ok: true as const, check: ((s, h) => b.value(s, h)) as Check, inert } : b;
  const remote = (
    b: { ok: true; value: (s: readonly Segment[], ctx: CheckContext) => Promise<Outcome> } | {
      ok: false;
      error: string;
    },
  ) => b.ok ? { ok: true as const, check: ((s, _h, ctx) => b.value(s, ctx)) as Check, inert: false } : b;
  switch (row.kind) {
    case 'keyword':
      return local(buildKeyword(row), row.patterns.length === 0);
    case 'pii':
      return local(buildPii(row), row.detectors.length === 0 && row.custom_patterns.length === 0);
    case 'openai_moderation':
      return remote(buildOpenAiModeration(row));
    case 'presidio':
      return remote(buildPresidio(row));
    case 'lakera':
      return remote(buildLakera(row));
    case 'azure_content_safety': {
      const b = buildPromptShield(row);
      return b.ok ? { ok: true, check: b.value, inert: false } : b;
    }
    case 'azure_content_safety_text_moderation': {
      const b = buildTextModeration(row);
      return b.ok ? { ok: true, check: b.value, inert: false } : b;
    }
    case 'aliyun_text_moderation':
      return { ok: true, check: buildAliyunTextModeration(row), inert: false };
    case 'bedrock': {
      const b = buildBedrock(row);
      return b.ok ? { ok: true, check: b.value, inert: false } : b;
    }
    case 'aliyun_ai_guardrail':
      return { ok: true, check: buildAliyunAiGuardrail(row), inert: false };
    case 'semantic': {
      // The only local kind that reads the context: it reports the spans it left unjudged.
      const b = buildSemantic(row);
      return b.ok ? { ok: true, check: b.value, inert: false } : b;
    }
  }
}

/** How the kind holds back a streamed answer for its output check (AISIX's `stream_output_policy`). */
function streamPolicy(row: GuardrailRow): StreamPolicy {
  // AISIX holds a semantic answer whole and releases it unchecked over the cap: the kind only masks.
  if (row.kind === 'semantic') return { kind: 'buffer', maxBytes: 262_144, failOpen: true };
  if (
    (row.kind === 'azure_content_safety_text_moderation' || row.kind === 'aliyun_text_moderation' ||
      row.kind === 'aliyun_ai_guardrail') &&
    row.stream_processing_mode === 'window'
  ) {
    return { kind: 'window', size: row.window_size, overlap: row.window_overlap_size };
  }
  if ('max_buffer_bytes' in row && typeof row.max_buffer_bytes === 'number') {
    const failOpen = 'on_buffer_exceeded' in row && row.on_buffer_exceeded === 'fail_open';
    return { kind: 'buffer', maxBytes: row.max_buffer_bytes, failOpen };
  }
  return DEFAULT_STREAM;
}

// `kind: aliyun_text_moderation` (docs/guardrails.md "Aliyun"): Aliyun's TextModerationPlus. The input hook
// asks `llm_query_moderation`, the output hook `llm_response_moderation` with the answer's id as `sessionId`;
// every 2000-character piece is checked; a returned `Data.RiskLevel` at or over `risk_level_threshold` blocks.
import { ALIYUN_MSG } from '../messages.ts';
import type { AliyunTextModerationRow } from '../schema.ts';
import { ALLOW, type CheckContext, type Hook, joined, type Outcome, type Segment } from '../types.ts';
import { isRecord } from './http.ts';
import { callAliyun, pieces } from './aliyun-rpc.ts';

export { percentEncode, signV1 } from './aliyun-rpc.ts';

const RANK: Record<string, number> = { none: 0, low: 1, medium: 2, high: 3 };

export function buildAliyunTextModeration(
  row: AliyunTextModerationRow,
): (s: readonly Segment[], hook: Hook, ctx: CheckContext) => Promise<Outcome> {
  const threshold = RANK[row.risk_level_threshold]!;
  return async (segments, hook, ctx) => {
    const text = joined(segments);
    if (text.trim() === '') return ALLOW;
    const service = hook === 'input' ? 'llm_query_moderation' : 'llm_response_moderation';
    // One response is one session in Aliyun's console, whichever window or piece a call carries.
    const sessionId = hook === 'output' ? ctx.responseId || crypto.randomUUID() : undefined;
    for (const content of pieces(text)) {
      const r = await callAliyun(row, {
        action: 'TextModerationPlus',
        service,
        serviceParameters: sessionId === undefined ? { content } : { content, sessionId },
        configError: ALIYUN_MSG.textConfigError,
      }, ctx);
      if (!r.ok) return r.outcome;
      const level = typeof r.data.RiskLevel === 'string' && r.data.RiskLevel !== ''
        ? r.data.RiskLevel.toLowerCase()
        : 'none';
      if ((RANK[level] ?? 0) < threshold) continue;
      ctx.log?.('info', ALIYUN_MSG.textBlocked, {
        service,
        aliyun_request_id: r.requestId,
        aliyun_code: r.code,
        aliyun_risk_level: level,
        aliyun_labels: labelsOf(r.data.Result),
      });
      return { kind: 'block', reason: `aliyun text moderation: risk level ${level} >= threshold` };
    }
    return ALLOW;
  };
}

/** The `Label`s of a result list, comma-joined (names only, never the risk words). */
export function labelsOf(result: unknown): string {
  if (!Array.isArray(result)) return '';
  const out: string[] = [];
  for (const r of result) if (isRecord(r) && typeof r.Label === 'string' && r.Label !== '') out.push(r.Label);
  return out.join(',');
}

// The request record's access-log line (docs/aisix-compatibility.md "Logs"): the features' parts
// (src/proxy/record-facet.ts) keep their fields' places, so the line is the same whichever feature wrote it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Verdict } from '../../src/guardrails/chain.ts';
import type { Guardrail } from '../../src/guardrails/types.ts';
import { CACHE_RECORD } from '../../src/proxy/cache-record.ts';
import { GUARDRAIL_RECORD } from '../../src/proxy/guardrail-record.ts';
import { ACCESS_LOG_LAYOUT, RequestRecord } from '../../src/proxy/record.ts';
import { DROPPED_RECORD } from '../../src/proxy/translation-record.ts';

const CORE = [
  'method',
  'path',
  'status',
  'latency_ms',
  'provider',
  'model',
  'api_key_id',
  'prompt_tokens',
  'completion_tokens',
  'total_tokens',
  'usage_estimated',
  'request_id',
  'provider_request_id',
  'served_by_model',
  'routing_attempt_count',
  'routing_fallback_count',
  'error_kind',
  'error',
  'peer',
  'downstream_request_id',
  'ttft_ms',
];

function record(): RequestRecord {
  return new RequestRecord(0, 'POST', '/v1/chat/completions', 'req-1', '127.0.0.1:9', undefined);
}

function verdict(): Verdict {
  return {
    blocked: { guardrail: {} as Guardrail, reason: 'r' },
    segments: [],
    masked: true,
    counts: { EMAIL: 2 },
    hits: [
      { guardrail_name: 'a', hook: 'output', action: 'masked', reason: 'x' },
      { guardrail_name: 'b', hook: 'output', action: 'would_block' },
    ],
    applied: [{ name: 'a', kind: 'regex', hook: 'output' }, { name: 'a', kind: 'regex', hook: 'output' }],
  };
}

describe('RequestRecord access-log line', () => {
  test('the fields are the core ones, then cache, dropped, guardrail, media and passthrough fields, in order', () => {
    assert.deepEqual(ACCESS_LOG_LAYOUT.names, [
      ...CORE,
      'cache_status',
      'cache_hit_layer',
      'cache_similarity',
      'cache_hit_saved_input_tokens',
      'cache_hit_saved_output_tokens',
      'dropped',
      'guardrail_blocked',
      'guardrail_bypassed_reason',
      'applied_guardrails',
      'guardrail_monitor_hits',
      'guardrail_enforced_hits',
      'redacted_entity_counts',
      'audio_duration_seconds',
      'input_characters',
      'client_identity',
    ]);
  });

  test('a request no feature wrote to has every feature field absent', () => {
    const v = record().accessLogValues(200, 5);
    assert.equal(v.length, ACCESS_LOG_LAYOUT.names.length);
    assert.deepEqual(v.slice(CORE.length), new Array(15).fill(undefined));
  });

  test("each feature's values land under its own fields", () => {
    const rec = record();
    rec.facet(CACHE_RECORD).hit('semantic', 0.93, { input: 7, output: 3 });
    rec.facet(DROPPED_RECORD).items = 'tools';
    rec.facet(GUARDRAIL_RECORD).ran(verdict());
    const v = rec.accessLogValues(200, 5);
    assert.equal(v.length, ACCESS_LOG_LAYOUT.names.length);
    const line = Object.fromEntries(ACCESS_LOG_LAYOUT.names.map((n, i) => [n, v[i]]));
    assert.equal(line.cache_status, 'hit');
    assert.equal(line.cache_hit_layer, 'semantic');
    assert.equal(line.cache_similarity, 0.93);
    assert.equal(line.cache_hit_saved_input_tokens, 7);
    assert.equal(line.cache_hit_saved_output_tokens, 3);
    assert.equal(line.dropped, 'tools');
    assert.equal(line.guardrail_blocked, true);
    assert.equal(line.guardrail_bypassed_reason, undefined);
    assert.deepEqual(line.applied_guardrails, [{ kind: 'regex', hook: 'output' }]);
    assert.deepEqual(line.guardrail_monitor_hits, [{ guardrail_name: 'b', hook: 'output', action: 'would_block' }]);
    assert.deepEqual(line.guardrail_enforced_hits, [
      { guardrail_name: 'a', hook: 'output', action: 'masked', reason: undefined },
    ]);
    assert.deepEqual(line.redacted_entity_counts, { EMAIL: 2 });
  });

  test('a cache miss writes only its status', () => {
    const rec = record();
    rec.facet(CACHE_RECORD).status = 'bypass';
    const v = rec.accessLogValues(200, 5);
    assert.deepEqual(v.slice(CORE.length, CORE.length + 5), ['bypass', undefined, undefined, undefined, undefined]);
  });
});

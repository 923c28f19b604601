// The reserve step (src/proxy/admission.ts) on a call nothing limits: the no-op permit at once, without asking
// the limiter or waiting a turn; a limited call still goes through the limiter (docs/performance.md "Decisions on
// the hot path, and their measured reasons").
// Run: node --import tsx --test test/unit/reserve-step.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EXTRA_SUBJECTS, reserveStep } from '../../src/proxy/admission.ts';
import { CallState } from '../../src/proxy/call-state.ts';
import type { ModelCall } from '../../src/proxy/pipeline.ts';
import { NO_OP_PERMIT, RateLimiter, type RateLimitSubject } from '../../src/routing/rate-limit.ts';

function callWith(keyLimit: unknown, modelLimit: unknown, extra?: readonly RateLimitSubject[]): ModelCall {
  const state = new CallState();
  if (extra) state.set(EXTRA_SUBJECTS, extra);
  const key = { id: 'k-1', rate_limit: keyLimit };
  const model = { id: 'm-1', display_name: 'gpt', rate_limit: modelLimit };
  // A model call's members the step reads, and nothing else.
  return { caller: { key }, resolved: { model }, state } as unknown as ModelCall;
}

/** A limiter that counts what it is asked. */
function countingLimiter() {
  const real = new RateLimiter();
  const asked: (readonly RateLimitSubject[])[] = [];
  return {
    asked,
    acquire: (subjects: readonly RateLimitSubject[]) => {
      asked.push(subjects);
      return real.acquire(subjects);
    },
  };
}

describe('reserve step', () => {
  test('a call nothing limits gets the no-op permit synchronously; the limiter is not asked', () => {
    const limiter = countingLimiter();
    for (const [k, m] of [[undefined, undefined], [undefined, null]] as const) {
      const call = callWith(k, m);
      const r = reserveStep(limiter).run(call);
      assert.equal(r, undefined, 'a result, not a promise');
      assert.equal(call.permit, NO_OP_PERMIT);
      assert.equal(call.limitHeaders, undefined);
    }
    assert.equal(limiter.asked.length, 0);
  });

  test('a key limit, a model limit or a policy subject still goes through the limiter', async () => {
    const limiter = countingLimiter();
    const policy: RateLimitSubject = { scope: 'policy', id: 'p-1', limits: { rpm: 10 } };
    const calls = [
      callWith({ rpm: 10 }, undefined),
      callWith(undefined, { rpm: 10 }),
      callWith(undefined, null, [policy]),
    ];
    for (const call of calls) {
      const r = reserveStep(limiter).run(call);
      assert.ok(r instanceof Promise);
      assert.equal(await r, undefined);
      assert.ok(call.permit !== undefined);
    }
    assert.equal(limiter.asked.length, 3);
    assert.equal(limiter.asked[2]!.length, 3, 'the key, the model and the policy');
    assert.ok(calls[0]!.limitHeaders?.['x-ratelimit-limit-requests'] !== undefined, 'the key limit sets its headers');
  });
});

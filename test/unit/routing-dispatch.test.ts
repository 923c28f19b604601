// The dispatcher's pure resolutions: AISIX's `effective_timeouts` (docs/aisix-compatibility.md "Resources") and the
// usage-event status bucket (docs/aisix-compatibility.md "Metrics"). The behaviour through real upstreams is in routing-integration.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { statusBucket, timeoutBudget } from '../../src/routing/dispatch.ts';

const up = { timeout_ms: 6_000_000, stream_timeout_ms: 0 };

test('timeout: target → group → upstream.timeout_ms; an explicit 0 is no deadline and stops the chain', () => {
  assert.equal(timeoutBudget({}, undefined, up).timeoutMs, 6_000_000);
  assert.equal(timeoutBudget({}, { timeout: 200 }, up).timeoutMs, 200);
  assert.equal(timeoutBudget({ timeout: 50 }, { timeout: 200 }, up).timeoutMs, 50);
  assert.equal(timeoutBudget({ timeout: 0 }, { timeout: 200 }, up).timeoutMs, 0);
  assert.equal(timeoutBudget({}, { timeout: 0 }, { timeout_ms: 300, stream_timeout_ms: 0 }).timeoutMs, 0);
});

test('stream budget: resource stream_timeout (0 defers), then the resource timeout, then the deployment', () => {
  // Deployment defaults only: stream_timeout_ms, else timeout_ms; never withholds the 200.
  assert.deepEqual(timeoutBudget({}, undefined, up), {
    timeoutMs: 6_000_000,
    silenceMs: 6_000_000,
    streamConfigured: false,
  });
  assert.deepEqual(
    timeoutBudget({}, undefined, { timeout_ms: 6_000_000, stream_timeout_ms: 500 }),
    { timeoutMs: 6_000_000, silenceMs: 500, streamConfigured: false },
  );
  // A resource stream_timeout (target first, then the group) is a configured budget.
  assert.deepEqual(timeoutBudget({ stream_timeout: 300 }, { stream_timeout: 900 }, up).silenceMs, 300);
  assert.deepEqual(timeoutBudget({ stream_timeout: 0 }, { stream_timeout: 900 }, up), {
    timeoutMs: 6_000_000,
    silenceMs: 900,
    streamConfigured: true,
  });
  // The group's stream_timeout beats the target's timeout, and covers a target whose timeout is 0.
  assert.deepEqual(timeoutBudget({ timeout: 0 }, { stream_timeout: 900 }, up), {
    timeoutMs: 0,
    silenceMs: 900,
    streamConfigured: true,
  });
  // No resource stream_timeout: the resource-resolved timeout is the stream budget (configured), 0 = none.
  assert.deepEqual(timeoutBudget({ stream_timeout: 0 }, { timeout: 400 }, up), {
    timeoutMs: 400,
    silenceMs: 400,
    streamConfigured: true,
  });
  assert.deepEqual(timeoutBudget({ timeout: 0 }, undefined, { timeout_ms: 300, stream_timeout_ms: 100 }), {
    timeoutMs: 0,
    silenceMs: 0,
    streamConfigured: false,
  });
});

test('usage-event status_code buckets: 2xx|3xx|4xx|5xx|other; timeout 504, transport 502', () => {
  const res = (status: number) => ({ kind: 'response' as const, status });
  assert.equal(statusBucket(res(200)), '2xx');
  assert.equal(statusBucket(res(304)), '3xx');
  assert.equal(statusBucket(res(429)), '4xx');
  assert.equal(statusBucket(res(503)), '5xx');
  assert.equal(statusBucket(res(101)), 'other');
  assert.equal(statusBucket(res(799)), 'other');
  // The edges of each class.
  for (
    const [status, want] of [[199, 'other'], [299, '2xx'], [300, '3xx'], [499, '4xx'], [500, '5xx'], [599, '5xx'], [
      600,
      'other',
    ], [0, 'other']] as const
  ) {
    assert.equal(statusBucket(res(status)), want, String(status));
  }
  assert.equal(statusBucket({ kind: 'timeout' }), '5xx');
  assert.equal(statusBucket({ kind: 'transport', message: 'reset' }), '5xx');
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type DirectModel, type Model, ModelSchema, type RoutingModel } from '../../src/resources/schema.ts';
import { epochTime, failureReason, ModelHealth } from '../../src/routing/health.ts';

const T0 = Date.parse('2025-06-01T12:00:00.250Z');

/** AISIX requires every background_model_check member but ignore_statuses (docs/aisix-compatibility.md "Resources"). */
const FULL_CHECK = {
  enabled: true,
  interval_seconds: 60,
  timeout_seconds: 10,
  prompt: 'ping',
  max_tokens: 1,
  stale_after_seconds: 31_536_000,
};

function direct(extra: Record<string, unknown> = {}, id = 'm1'): DirectModel {
  const check = extra.background_model_check as Record<string, unknown> | undefined;
  const parsed = ModelSchema.parse({
    display_name: `model-${id}`,
    model_name: 'gpt-4o',
    provider_key_id: 'pk',
    ...extra,
    ...(check ? { background_model_check: { ...FULL_CHECK, ...check } } : {}),
  });
  return { ...parsed, id, kind: 'direct' } as DirectModel;
}

function routingModel(): RoutingModel {
  const parsed = ModelSchema.parse({ display_name: 'router', routing: { targets: [{ model: 'model-m1' }] } });
  return { ...parsed, id: 'r1', kind: 'routing' } as RoutingModel;
}

function clock(start = T0) {
  const c = { t: start, now: () => c.t, advance: (secs: number) => void (c.t += secs * 1000) };
  return c;
}

test('a fresh model is healthy with a bare row', () => {
  const h = new ModelHealth({ now: () => T0 });
  const m = direct();
  assert.equal(h.state(m), 'healthy');
  assert.deepEqual(h.statusRow(m), { id: 'm1', display_name: 'model-m1', kind: 'direct', status: 'healthy' });
  assert.equal(h.deploymentState(m), 0);
});

test('routing models are always not_applicable', () => {
  const h = new ModelHealth({ now: () => T0 });
  const r = routingModel();
  assert.equal(h.recordFailure(r, { kind: 'response', status: 503 }), false);
  assert.deepEqual(h.statusRow(r), { id: 'r1', display_name: 'router', kind: 'routing', status: 'not_applicable' });
  assert.equal(h.deploymentState(r), undefined);
});

test('cooldown defaults: a 503 cools the model for 30 s, a success clears it', () => {
  const c = clock();
  const h = new ModelHealth({ now: c.now });
  const m = direct();
  assert.equal(h.recordFailure(m, { kind: 'response', status: 503 }), true);
  assert.equal(h.state(m), 'cooldown');
  const row = h.statusRow(m);
  assert.equal(row.status, 'cooldown');
  assert.equal(row.status_reason, 'upstream_server_error');
  assert.deepEqual(row.cooldown_until, epochTime(T0 + 30_000));
  assert.equal(h.deploymentState(m), 2);
  assert.equal(h.cooledDownTotal('m1'), 1);
  h.recordSuccess(m);
  assert.deepEqual(h.statusRow(m), { id: 'm1', display_name: 'model-m1', kind: 'direct', status: 'healthy' });
});

test('Retry-After: 180 → cooldown_until ≈ now + 180 s; capped at max_seconds', () => {
  const h = new ModelHealth({ now: () => T0 });
  const m = direct();
  h.recordFailure(m, { kind: 'response', status: 429, retryAfterSecs: 180 });
  const row = h.statusRow(m);
  assert.deepEqual(row.cooldown_until, {
    secs_since_epoch: Math.floor(T0 / 1000) + 180,
    nanos_since_epoch: 250_000_000,
  });
  assert.equal(row.status_reason, 'upstream_rate_limited');

  const capped = direct({ cooldown: { max_seconds: 60 } }, 'm2');
  h.recordFailure(capped, { kind: 'response', status: 429, retryAfterSecs: 180 });
  assert.deepEqual(h.statusRow(capped).cooldown_until, epochTime(T0 + 60_000));

  const ignoresHeader = direct({ cooldown: { honor_retry_after: false, default_seconds: 7 } }, 'm3');
  h.recordFailure(ignoresHeader, { kind: 'response', status: 429, retryAfterSecs: 180 });
  assert.deepEqual(h.statusRow(ignoresHeader).cooldown_until, epochTime(T0 + 7_000));
});

test('cooldown off (enabled: false or default_seconds: 0) never shows cooldown', () => {
  const h = new ModelHealth({ now: () => T0 });
  for (const cooldown of [{ enabled: false }, { default_seconds: 0 }]) {
    const m = direct({ cooldown });
    assert.equal(h.recordFailure(m, { kind: 'response', status: 503, retryAfterSecs: 100 }), false);
    assert.equal(h.recordFailure(m, { kind: 'timeout' }), false);
    assert.equal(h.state(m), 'healthy');
    assert.equal(h.statusRow(m).cooldown_until, undefined);
    assert.equal(h.cooledDownTotal(m.id), 0);
  }
});

test('turning cooldown off by reload hides a running cooldown', () => {
  const h = new ModelHealth({ now: () => T0 });
  h.recordFailure(direct(), { kind: 'response', status: 503 });
  assert.equal(h.state(direct({ cooldown: { enabled: false } })), 'healthy');
});

test('trigger rules: statuses, timeout, transport; non-triggers do nothing', () => {
  const h = new ModelHealth({ now: () => T0 });
  const m = direct({ cooldown: { trigger_statuses: [500], trigger_on_timeout: false, trigger_on_transport: true } });
  assert.equal(h.recordFailure(m, { kind: 'response', status: 503 }), false);
  assert.equal(h.recordFailure(m, { kind: 'response', status: 400 }), false);
  assert.equal(h.recordFailure(m, { kind: 'timeout' }), false);
  assert.equal(h.state(m), 'healthy');
  assert.equal(h.recordFailure(m, { kind: 'transport' }), true);
  assert.equal(h.statusRow(m).status_reason, 'transport_error');
});

test('failure reasons', () => {
  assert.equal(failureReason({ kind: 'response', status: 401 }), 'upstream_auth_failure');
  assert.equal(failureReason({ kind: 'response', status: 403 }), 'upstream_auth_failure');
  assert.equal(failureReason({ kind: 'response', status: 408 }), 'upstream_request_timeout');
  assert.equal(failureReason({ kind: 'response', status: 429 }), 'upstream_rate_limited');
  assert.equal(failureReason({ kind: 'response', status: 504 }), 'upstream_server_error');
  assert.equal(failureReason({ kind: 'response', status: 418 }), 'upstream_status_failure');
  assert.equal(failureReason({ kind: 'timeout' }), 'request_timeout');
  assert.equal(failureReason({ kind: 'transport' }), 'transport_error');
});

test('a lapsed cooldown reads healthy and drops its reason', () => {
  const c = clock();
  const h = new ModelHealth({ now: c.now });
  const m = direct();
  h.recordFailure(m, { kind: 'timeout' });
  assert.equal(h.statusRow(m).status_reason, 'request_timeout');
  c.advance(30);
  assert.deepEqual(h.statusRow(m), { id: 'm1', display_name: 'model-m1', kind: 'direct', status: 'healthy' });
  assert.equal(h.deploymentState(m), 0);
});

test('a failure during a cooldown extends it and counts once; a new one after it lapses counts again', () => {
  const c = clock();
  const h = new ModelHealth({ now: c.now });
  const m = direct();
  h.recordFailure(m, { kind: 'response', status: 500 });
  c.advance(10);
  h.recordFailure(m, { kind: 'response', status: 502 });
  assert.deepEqual(h.statusRow(m).cooldown_until, epochTime(T0 + 40_000));
  assert.equal(h.cooledDownTotal('m1'), 1);
  c.advance(31);
  h.recordFailure(m, { kind: 'response', status: 500 });
  assert.equal(h.cooledDownTotal('m1'), 2);
});

const checked = { background_model_check: { interval_seconds: 30 } };

test('background check 503 → unhealthy with last_check_status; success clears it', () => {
  const c = clock();
  const h = new ModelHealth({ now: c.now });
  const m = direct(checked);
  h.recordCheck(m, { status: 503 });
  assert.equal(h.state(m), 'unhealthy');
  assert.deepEqual(h.statusRow(m), {
    id: 'm1',
    display_name: 'model-m1',
    kind: 'direct',
    status: 'unhealthy',
    last_checked_at: epochTime(T0),
    last_check_status: 503,
    status_reason: 'background_check_failed',
  });
  assert.equal(h.deploymentState(m), 2);
  // A request success does not clear a background mark.
  h.recordSuccess(m);
  assert.equal(h.state(m), 'unhealthy');
  c.advance(30);
  h.recordCheck(m, { status: 200 });
  assert.deepEqual(h.statusRow(m), {
    id: 'm1',
    display_name: 'model-m1',
    kind: 'direct',
    status: 'healthy',
    last_checked_at: epochTime(T0 + 30_000),
    last_check_status: 200,
  });
});

test('background timeout → unhealthy with 408; an error → unhealthy without a status', () => {
  const h = new ModelHealth({ now: () => T0 });
  const a = direct(checked, 'a');
  h.recordCheck(a, { timeout: true });
  assert.equal(h.statusRow(a).last_check_status, 408);
  assert.equal(h.state(a), 'unhealthy');
  const b = direct(checked, 'b');
  h.recordCheck(b, { error: 'ECONNREFUSED' });
  assert.equal(h.state(b), 'unhealthy');
  assert.equal(h.statusRow(b).last_check_status, undefined);
});

test('an ignored 429 stays healthy with reason ignored_transient_error', () => {
  const h = new ModelHealth({ now: () => T0 });
  const m = direct({ background_model_check: { ignore_statuses: [429, 408] } });
  h.recordCheck(m, { status: 429 });
  assert.deepEqual(h.statusRow(m), {
    id: 'm1',
    display_name: 'model-m1',
    kind: 'direct',
    status: 'healthy',
    last_checked_at: epochTime(T0),
    last_check_status: 429,
    status_reason: 'ignored_transient_error',
  });
  h.recordCheck(m, { timeout: true });
  assert.equal(h.state(m), 'healthy');
  assert.equal(h.statusRow(m).last_check_status, 408);
});

test('an ignored status leaves an unhealthy model unhealthy', () => {
  const h = new ModelHealth({ now: () => T0 });
  const m = direct({ background_model_check: { ignore_statuses: [429] } });
  h.recordCheck(m, { status: 500 });
  h.recordCheck(m, { status: 429 });
  assert.equal(h.state(m), 'unhealthy');
  assert.equal(h.statusRow(m).status_reason, 'background_check_failed');
  assert.equal(h.statusRow(m).last_check_status, 429);
});

test('a stale unhealthy mark reads healthy and drops the reason', () => {
  const c = clock();
  const h = new ModelHealth({ now: c.now });
  const m = direct({ background_model_check: { stale_after_seconds: 120 } });
  h.recordCheck(m, { status: 503 });
  c.advance(120);
  assert.equal(h.state(m), 'unhealthy');
  c.advance(1);
  assert.equal(h.state(m), 'healthy');
  assert.deepEqual(h.statusRow(m), {
    id: 'm1',
    display_name: 'model-m1',
    kind: 'direct',
    status: 'healthy',
    last_checked_at: epochTime(T0),
    last_check_status: 503,
  });
  assert.equal(h.deploymentState(m), 0);
});

test('unhealthy wins over cooldown; the row still carries cooldown_until', () => {
  const h = new ModelHealth({ now: () => T0 });
  const m = direct(checked);
  h.recordCheck(m, { status: 503 });
  h.recordFailure(m, { kind: 'response', status: 503 });
  const row = h.statusRow(m);
  assert.equal(row.status, 'unhealthy');
  assert.deepEqual(row.cooldown_until, epochTime(T0 + 30_000));
});

test('disabling background checks by reload drops the mark', () => {
  const h = new ModelHealth({ now: () => T0 });
  h.recordCheck(direct(checked), { status: 503 });
  assert.equal(h.state(direct({ background_model_check: { enabled: false } })), 'healthy');
  assert.equal(h.state(direct()), 'healthy');
});

test('state survives a reload while the id stays; retain drops vanished ids', () => {
  const h = new ModelHealth({ now: () => T0 });
  h.recordFailure(direct({}, 'keep'), { kind: 'response', status: 500 });
  h.recordFailure(direct({}, 'gone'), { kind: 'response', status: 500 });
  h.retain(new Set(['keep', 'other']));
  const reloaded: Model = direct({ model_name: 'gpt-4o-2' }, 'keep');
  assert.equal(h.state(reloaded), 'cooldown');
  assert.equal(h.cooledDownTotal('keep'), 1);
  assert.equal(h.cooledDownTotal('gone'), 0);
  assert.equal(h.state(direct({}, 'gone')), 'healthy');
});

test('epochTime splits ms into seconds and sub-second nanos', () => {
  assert.deepEqual(epochTime(1_700_000_000_123), { secs_since_epoch: 1_700_000_000, nanos_since_epoch: 123_000_000 });
  assert.deepEqual(epochTime(1_700_000_000_000), { secs_since_epoch: 1_700_000_000, nanos_since_epoch: 0 });
});

test('row keys come out in the wire order of docs/routing.md', () => {
  const h = new ModelHealth({ now: () => T0 });
  const m = direct({ background_model_check: { ignore_statuses: [429] } });
  h.recordFailure(m, { kind: 'response', status: 500 });
  h.recordCheck(m, { status: 429 });
  assert.deepEqual(Object.keys(JSON.parse(JSON.stringify(h.statusRow(m)))), [
    'id',
    'display_name',
    'kind',
    'status',
    'cooldown_until',
    'last_checked_at',
    'last_check_status',
    'status_reason',
  ]);
});

test('recordOutcome: 2xx clears, failures go through the trigger rules with the parsed Retry-After', () => {
  const h = new ModelHealth({ now: () => T0 });
  const m = direct();
  assert.equal(h.recordOutcome(m, { kind: 'response', status: 400 }), false);
  assert.equal(h.state(m), 'healthy');
  assert.equal(h.recordOutcome(m, { kind: 'response', status: 429, retryAfter: '90' }, 90), true);
  assert.deepEqual(h.statusRow(m).cooldown_until, epochTime(T0 + 90_000));
  assert.equal(h.recordOutcome(m, { kind: 'response', status: 200 }), false);
  assert.equal(h.state(m), 'healthy');
  assert.equal(h.recordOutcome(m, { kind: 'transport', message: 'reset' }), true);
  assert.equal(h.statusRow(m).status_reason, 'transport_error');
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type DirectModel, type Model, ModelSchema } from '../../src/resources/schema.ts';
import { BackgroundChecker, type Timers } from '../../src/routing/background.ts';
import { type CheckResult, ModelHealth } from '../../src/routing/health.ts';

/** Hand-driven timers: `advance(ms)` fires what falls due, in order. */
class FakeTimers implements Timers {
  now = 0;
  private seq = 0;
  private readonly pending = new Map<number, { at: number; fn: () => void }>();
  setTimeout = (fn: () => void, ms: number): unknown => {
    const id = ++this.seq;
    this.pending.set(id, { at: this.now + ms, fn });
    return id;
  };
  clearTimeout = (handle: unknown): void => void this.pending.delete(handle as number);
  async advance(ms: number): Promise<void> {
    const end = this.now + ms;
    for (;;) {
      await flush();
      const due = [...this.pending.entries()].filter(([, t]) => t.at <= end).sort((a, b) =>
        a[1].at - b[1].at || a[0] - b[0]
      );
      if (due.length === 0) break;
      const [id, t] = due[0]!;
      this.pending.delete(id);
      this.now = t.at;
      t.fn();
    }
    this.now = end;
    await flush();
  }
  get count(): number {
    return this.pending.size;
  }
}

/** Let settled promises run their callbacks (no wall-clock wait). */
async function flush(): Promise<void> {
  for (let i = 0; i < 5; i++) await Promise.resolve();
}

const FULL_CHECK = {
  enabled: true,
  interval_seconds: 60,
  timeout_seconds: 10,
  prompt: 'ping',
  max_tokens: 1,
  stale_after_seconds: 31_536_000,
};

function model(
  id: string,
  check: Record<string, unknown> | null = { interval_seconds: 10, timeout_seconds: 2 },
): DirectModel {
  const parsed = ModelSchema.parse({
    display_name: `model-${id}`,
    model_name: 'gpt-4o',
    provider_key_id: 'pk',
    // AISIX requires every member but ignore_statuses (docs/aisix-compatibility.md "Resources"): Sluice's former defaults.
    ...(check ? { background_model_check: { ...FULL_CHECK, ...check } } : {}),
  });
  return { ...parsed, id, kind: 'direct' } as DirectModel;
}

/** A check whose every call is answered by the test through `resolve`. */
function controlledCheck() {
  const calls: { id: string; signal: AbortSignal; resolve: (r: CheckResult) => void }[] = [];
  const check = (m: DirectModel, signal: AbortSignal): Promise<CheckResult> =>
    new Promise((resolve) => calls.push({ id: m.id, signal, resolve }));
  return { calls, check };
}

function setup(opts: { maxConcurrent?: number } = {}) {
  const timers = new FakeTimers();
  const health = new ModelHealth({ now: () => timers.now });
  const ctl = controlledCheck();
  const checker = new BackgroundChecker({ health, check: ctl.check, timers, ...opts });
  return { timers, health, checker, ...ctl };
}

test('checks each enabled direct model at once, then every interval_seconds after the previous ended', async () => {
  const { timers, health, checker, calls } = setup();
  const m = model('a');
  checker.update([m, model('off', { enabled: false, interval_seconds: 10 }), model('none', null)]);
  assert.deepEqual(checker.modelIds(), ['a']);
  assert.deepEqual(calls.map((c) => c.id), ['a']);
  await timers.advance(1000);
  calls[0]!.resolve({ status: 503 });
  await flush();
  assert.equal(health.state(m), 'unhealthy');
  await timers.advance(9_999);
  assert.equal(calls.length, 1);
  await timers.advance(1);
  assert.equal(calls.length, 2);
  calls[1]!.resolve({ status: 200 });
  await flush();
  assert.equal(health.state(m), 'healthy');
  checker.stop();
});

test('per-model intervals are independent', async () => {
  const { timers, checker, calls } = setup();
  checker.update([model('fast', { interval_seconds: 5 }), model('slow', { interval_seconds: 20 })]);
  for (let i = 0; i < 40; i++) {
    for (const c of calls) c.resolve({ status: 200 });
    await timers.advance(1000);
  }
  const count = (id: string): number => calls.filter((c) => c.id === id).length;
  assert.equal(count('fast'), 1 + 8);
  assert.equal(count('slow'), 1 + 2);
  checker.stop();
});

test('concurrency is bounded (default 4); queued checks start as slots free', async () => {
  const { checker, calls, timers } = setup();
  checker.update(['a', 'b', 'c', 'd', 'e', 'f'].map((id) => model(id, { interval_seconds: 60, timeout_seconds: 30 })));
  assert.equal(calls.length, 4);
  assert.equal(checker.running, 4);
  calls[0]!.resolve({ status: 200 });
  await flush();
  assert.equal(calls.length, 5);
  calls[1]!.resolve({ status: 200 });
  await flush();
  assert.deepEqual(calls.map((c) => c.id), ['a', 'b', 'c', 'd', 'e', 'f']);
  assert.equal(checker.running, 4);
  await timers.advance(0);
  checker.stop();
  assert.equal(checker.running, 0);
});

test('maxConcurrent is configurable', () => {
  const { checker, calls } = setup({ maxConcurrent: 2 });
  checker.update(['a', 'b', 'c'].map((id) => model(id)));
  assert.equal(calls.length, 2);
  checker.stop();
});

test('a check that outlives timeout_seconds is aborted and recorded as 408', async () => {
  const { timers, health, checker, calls } = setup();
  const m = model('a', { interval_seconds: 10, timeout_seconds: 2 });
  checker.update([m]);
  await timers.advance(2000);
  assert.equal(calls[0]!.signal.aborted, true);
  assert.equal(health.state(m), 'unhealthy');
  assert.equal(health.statusRow(m).last_check_status, 408);
  calls[0]!.resolve({ status: 200 }); // too late: ignored
  await flush();
  assert.equal(health.state(m), 'unhealthy');
  assert.equal(checker.running, 0);
  checker.stop();
});

test('an ignored status keeps the model healthy with ignored_transient_error', async () => {
  const { health, checker, calls } = setup();
  const m = model('a', { interval_seconds: 10, ignore_statuses: [429] });
  checker.update([m]);
  calls[0]!.resolve({ status: 429 });
  await flush();
  assert.equal(health.state(m), 'healthy');
  assert.equal(health.statusRow(m).status_reason, 'ignored_transient_error');
  checker.stop();
});

test('a check that throws is recorded as a failure without a status', async () => {
  const timers = new FakeTimers();
  const health = new ModelHealth({ now: () => timers.now });
  const checker = new BackgroundChecker({
    health,
    timers,
    check: async () => {
      throw new Error('ECONNREFUSED');
    },
  });
  const m = model('a');
  checker.update([m]);
  await flush();
  assert.equal(health.state(m), 'unhealthy');
  assert.equal(health.statusRow(m).last_check_status, undefined);
  checker.stop();
});

test('update keeps the schedule of unchanged ids, reschedules changed intervals, cancels removed ones', async () => {
  const { timers, health, checker, calls } = setup();
  checker.update([model('keep'), model('change'), model('drop')]);
  assert.equal(calls.length, 3);
  for (const c of calls) c.resolve({ status: 200 });
  await flush();
  await timers.advance(4000);

  // Reload: keep (same interval, new model object), change (interval 30), drop (removed), add (new).
  const keep2 = model('keep');
  checker.update([keep2, model('change', { interval_seconds: 30 }), model('add')]);
  assert.deepEqual(calls.slice(3).map((c) => c.id), ['add'], 'only the new model is checked at once');
  await timers.advance(6000); // t = 10 s: keep is due on its old schedule
  assert.deepEqual(calls.slice(4).map((c) => c.id), ['keep']);
  calls[4]!.resolve({ status: 503 });
  await flush();
  assert.equal(health.state(keep2), 'unhealthy');
  await timers.advance(24_000); // t = 34 s: change is due 30 s after the reload at t = 4 s
  assert.ok(calls.slice(5).some((c) => c.id === 'change'));
  assert.ok(!calls.some((c, i) => i >= 3 && c.id === 'drop'));
  checker.stop();
});

test("a removed model's in-flight check is aborted and its result discarded", async () => {
  const { health, checker, calls } = setup();
  const m = model('a');
  checker.update([m]);
  checker.update([] as Model[]);
  assert.equal(calls[0]!.signal.aborted, true);
  calls[0]!.resolve({ status: 500 });
  await flush();
  assert.equal(health.state(m), 'healthy');
  assert.equal(checker.running, 0);
  checker.stop();
});

test('stop clears every timer and ignores later results', async () => {
  const { timers, health, checker, calls } = setup();
  const m = model('a');
  checker.update([m]);
  calls[0]!.resolve({ status: 200 });
  await flush();
  assert.ok(timers.count > 0);
  checker.stop();
  assert.equal(timers.count, 0);
  checker.update([m]);
  await timers.advance(60_000);
  assert.equal(calls.length, 1);
  assert.equal(health.state(m), 'healthy');
});

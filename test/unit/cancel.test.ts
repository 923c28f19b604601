// Cancel: the request path's AbortSignal stand-in (src/util/cancel.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import { startMockUpstream } from '../support/mock-upstream.ts';
import { Cancel, toAbortSignal } from '../../src/util/cancel.ts';
import { sleep } from '../../src/util/sleep.ts';

test('abort runs each listener once, in order; removed and late listeners do not run; the reason is kept', () => {
  const c = new Cancel();
  const calls: string[] = [];
  const a = () => calls.push('a');
  const b = () => calls.push('b');
  const d = () => calls.push('d');
  c.addEventListener('abort', a);
  c.addEventListener('abort', b);
  c.addEventListener('abort', d);
  c.removeEventListener('abort', b);
  assert.equal(c.aborted, false);
  c.abort('why');
  c.abort('again');
  c.addEventListener('abort', () => calls.push('late'));
  assert.deepEqual(calls, ['a', 'd']);
  assert.equal(c.aborted, true);
  assert.equal(c.reason, 'why');
});

test('toAbortSignal: an AbortSignal passes through; a Cancel is followed, reason included', () => {
  const ac = new AbortController();
  assert.equal(toAbortSignal(ac.signal), ac.signal);
  const c = new Cancel();
  const s = toAbortSignal(c);
  assert.equal(s.aborted, false);
  c.abort('gone');
  assert.equal(s.aborted, true);
  assert.equal(s.reason, 'gone');
  const already = new Cancel();
  already.abort('before');
  assert.equal(toAbortSignal(already).reason, 'before');
});

test('sleep ends early when a Cancel aborts', async () => {
  const c = new Cancel();
  const t0 = Date.now();
  const done = sleep(10_000, c);
  c.abort();
  await done;
  assert.ok(Date.now() - t0 < 1000);
});

test('undici takes a Cancel as its signal: aborting it aborts the request in flight', async () => {
  const mock = await startMockUpstream();
  let release!: () => void;
  mock.script({
    hold: new Promise<void>((r) => {
      release = r;
    }),
  });
  const agent = new Agent();
  try {
    const c = new Cancel();
    const arrived = mock.waitForRequests(1);
    // undici's types name AbortSignal; it duck-types the object (see runtimes/node.ts).
    const pending = request(`${mock.base}/chat/completions`, {
      method: 'POST',
      body: '{}',
      signal: c as unknown as AbortSignal,
      dispatcher: agent,
    });
    await arrived;
    c.abort('sluice:caller-gone');
    await assert.rejects(pending, (e: unknown) => e === 'sluice:caller-gone');
  } finally {
    release();
    await agent.close();
    await mock.close();
  }
});

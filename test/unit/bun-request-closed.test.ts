// RequestClosed: `request.signal` as the core's `ConnInfo.closed` on Bun.serve (runtimes/bun-request-closed.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RequestClosed } from '../../runtimes/bun-request-closed.ts';

/** A request whose signal counts the native listeners added to and removed from it. */
function counted(): { req: Request; caller: AbortController; adds: () => number; removes: () => number } {
  const caller = new AbortController();
  const req = new Request('http://127.0.0.1/v1/chat/completions', { method: 'POST', signal: caller.signal });
  let adds = 0;
  let removes = 0;
  const signal = req.signal;
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  signal.addEventListener = ((...a: Parameters<typeof add>) => (adds++, add(...a))) as typeof add;
  signal.removeEventListener = ((...a: Parameters<typeof remove>) => (removes++, remove(...a))) as typeof remove;
  return { req, caller, adds: () => adds, removes: () => removes };
}

test('one native listener for every attempt: added on the first, never removed', () => {
  const { req, adds, removes } = counted();
  const closed = new RequestClosed(req);
  for (let i = 0; i < 3; i++) {
    const l = () => {};
    closed.addEventListener('abort', l);
    closed.removeEventListener('abort', l);
  }
  assert.equal(adds(), 1);
  assert.equal(removes(), 0);
});

test('the caller leaving runs the listeners still added, once; a removed one does not run', () => {
  const { req, caller } = counted();
  const closed = new RequestClosed(req);
  const calls: string[] = [];
  const gone = () => calls.push('gone');
  const left = () => calls.push('removed');
  closed.addEventListener('abort', gone);
  closed.addEventListener('abort', left);
  closed.removeEventListener('abort', left);
  assert.equal(closed.aborted, false);
  caller.abort(new Error('hung up'));
  assert.deepEqual(calls, ['gone']);
  assert.equal(closed.aborted, true);
  assert.equal((closed.reason as Error).message, 'hung up');
});

test('a listener added after the caller left does not run, as on an AbortSignal', () => {
  const { req, caller, adds } = counted();
  caller.abort();
  const closed = new RequestClosed(req);
  let ran = false;
  closed.addEventListener('abort', () => (ran = true));
  assert.equal(closed.aborted, true);
  assert.equal(ran, false);
  assert.equal(adds(), 0);
});

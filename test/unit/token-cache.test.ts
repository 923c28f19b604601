// The minted-token cache (src/providers/token-cache.ts) with an injected clock: one mint in flight per
// credential, replaced a minute before expiry, a waiter bounded by its own deadline, the mint cancelled
// once nobody waits, a failed mint not cached, and every live token listed for the scrubber.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type Grant, mintedTokens, TokenCache } from '../../src/providers/token-cache.ts';
import { Cancel, type CancelSignal } from '../../src/util/cancel.ts';

function latch<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

test('one mint for concurrent waiters; reused until a minute before expiry', async () => {
  let now = 1_000_000;
  const cache = new TokenCache(() => now);
  const grants: ReturnType<typeof latch<Grant>>[] = [];
  const mint = () => {
    const l = latch<Grant>();
    grants.push(l);
    return l.promise;
  };
  const waits = Array.from({ length: 5 }, () => cache.token('cred', mint, new Cancel()));
  assert.equal(grants.length, 1);
  assert.equal(cache.waiting(), 5);
  grants[0]!.resolve({ token: 'tok-one-SECRET', expiresInSecs: 3600 });
  assert.deepEqual(await Promise.all(waits), Array(5).fill('tok-one-SECRET'));
  assert.ok(mintedTokens(now).includes('tok-one-SECRET'));
  now += (3600 - 61) * 1000;
  assert.equal(await cache.token('cred', mint, new Cancel()), 'tok-one-SECRET');
  now += 2000; // inside the last minute: replaced
  const next = cache.token('cred', mint, new Cancel());
  assert.equal(grants.length, 2);
  grants[1]!.resolve({ token: 'tok-two-SECRET', expiresInSecs: 3600 });
  assert.equal(await next, 'tok-two-SECRET');
  // Only this test's tokens: other files sharing the process may have minted live ones.
  const left = mintedTokens(now + 3600_000).filter((t) => t === 'tok-one-SECRET' || t === 'tok-two-SECRET');
  assert.deepEqual(left, [], 'expired tokens leave the list');
});

test('a waiter leaves at its deadline; the mint is cancelled when the last one leaves; failures are not cached', async () => {
  const cache = new TokenCache();
  let mintSignal: CancelSignal | undefined;
  const pending = latch<Grant>();
  const mint = (s: CancelSignal) => {
    mintSignal = s;
    return pending.promise;
  };
  const a = new Cancel();
  const b = new Cancel();
  const wa = cache.token('c2', mint, a);
  const wb = cache.token('c2', mint, b);
  a.abort('deadline-a');
  await assert.rejects(wa, (e) => e === 'deadline-a');
  assert.equal(mintSignal!.aborted, false, 'another waiter still needs the mint');
  b.abort('deadline-b');
  await assert.rejects(wb, (e) => e === 'deadline-b');
  assert.equal(mintSignal!.aborted, true);
  pending.reject(new Error('aborted'));
  let calls = 0;
  const failing = () => {
    calls++;
    return Promise.reject(new Error('token endpoint down'));
  };
  await assert.rejects(cache.token('c3', failing, new Cancel()), /down/);
  await assert.rejects(cache.token('c3', failing, new Cancel()), /down/);
  assert.equal(calls, 2);
});

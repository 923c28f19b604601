// The drain report (issue 13): the pure derivation (verdict rules, edge cases), then black-box on Node,
// Bun and Deno — a balancer-like client that keeps routing for a known time after it saw `/readyz` fail,
// and the `drain report` line, `/status/drain` and `/admin/v1/health` that the gateway process produces.
// Run: node build.mjs && node --import tsx --test test/process/drain-report.test.ts
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { describe, test } from 'node:test';
import { drainReport, drainVerdict } from '../../src/lifecycle/drain-report.ts';
import { type DrainFacts, Lifecycle } from '../../src/lifecycle/state.ts';
import { startMockUpstream } from '../support/mock-upstream.ts';
import { CALLER_KEY, type GatewayProcess, resourcesFor, type RuntimeName, spawnGateway } from '../support/process.ts';
import { sleep } from '../support/until.ts';

const T0 = Date.parse('2026-01-01T00:00:00Z');

function facts(o: Partial<DrainFacts> = {}): DrainFacts {
  return {
    signalAt: T0,
    minDrainSecs: 10,
    readyzFailedProbes: 0,
    arrivals: 0,
    newConnections: 0,
    longestInFlightMs: 0,
    ...o,
  };
}

describe('drain report derivation', () => {
  test('verdict boundaries: last 10% of the window or after → too short; before 25% → generous; else ok', () => {
    assert.equal(drainVerdict(10, 9), 'window_too_short');
    assert.equal(drainVerdict(10, 8.999), 'ok');
    assert.equal(drainVerdict(10, 12), 'window_too_short');
    assert.equal(drainVerdict(10, 2.5), 'ok');
    assert.equal(drainVerdict(10, 2.499), 'window_generous');
    assert.equal(drainVerdict(10, 0), 'window_generous');
    assert.equal(drainVerdict(10, null), 'no_arrivals');
  });

  test('min_drain_secs 0: any arrival is after the window; none is no_arrivals', () => {
    assert.equal(drainVerdict(0, 0), 'window_too_short');
    assert.equal(drainVerdict(0, 0.3), 'window_too_short');
    assert.equal(drainVerdict(0, null), 'no_arrivals');
    const r = drainReport(facts({ minDrainSecs: 0, arrivals: 1, lastArrivalAt: T0 + 300, endedAt: T0 + 310 }), 0);
    assert.equal(r.verdict, 'window_too_short');
    assert.equal(r.recommended_min_drain_secs, 5);
  });

  test('a complete report: every field, recommendations rounded up to whole seconds', () => {
    const r = drainReport(
      facts({
        minDrainSecs: 3,
        readyzFailedProbes: 7,
        arrivals: 12,
        lastArrivalAt: T0 + 2_600,
        newConnections: 19,
        longestInFlightMs: 4_200,
        endedAt: T0 + 4_500,
      }),
      T0 + 99_999,
    );
    assert.deepEqual(r, {
      complete: true,
      signal_at: '2026-01-01T00:00:00.000Z',
      min_drain_secs: 3,
      readyz_failed_probes: 7,
      last_arrival_after_secs: 2.6,
      arrivals_while_draining: 12,
      new_connections_while_draining: 19,
      longest_in_flight_secs: 4.2,
      drain_secs: 4.5,
      verdict: 'ok',
      recommended_min_drain_secs: 6, // 2 × 2.6 = 5.2 → 6
      recommended_grace_period_secs: 21, // 6 + ceil(4.2) + 10
    });
  });

  test('no arrival: verdict no_arrivals and no recommendation (an idle replica says nothing)', () => {
    const r = drainReport(facts({ endedAt: T0 + 10_000 }), 0);
    assert.equal(r.verdict, 'no_arrivals');
    assert.equal(r.last_arrival_after_secs, null);
    assert.equal(r.recommended_min_drain_secs, null);
    assert.equal(r.recommended_grace_period_secs, null);
  });

  test('while draining: numbers so far, verdict withheld until the window has passed', () => {
    const f = facts({ minDrainSecs: 10, arrivals: 1, lastArrivalAt: T0 + 1000 });
    const early = drainReport(f, T0 + 4000);
    assert.equal(early.complete, false);
    assert.equal(early.drain_secs, 4);
    assert.equal(early.verdict, null);
    assert.equal(early.recommended_min_drain_secs, null);
    const late = drainReport(f, T0 + 10_000);
    assert.equal(late.complete, false);
    assert.equal(late.verdict, 'window_generous');
  });

  test('the lifecycle records only after the drain began, and counts only 503 readyz answers', () => {
    let now = T0;
    const l = new Lifecycle(() => now);
    l.serve();
    l.recordArrival();
    l.recordConnection();
    l.recordReadyz({ status: 503 });
    assert.equal(l.drain, undefined);
    const slow = l.acquire();
    now += 1000;
    l.beginDrain(5);
    now += 500;
    l.recordReadyz({ status: 200 });
    l.recordReadyz({ status: 503 });
    l.recordConnection();
    l.recordArrival();
    const fast = l.acquire();
    now += 100;
    fast();
    slow();
    slow(); // idempotent
    assert.deepEqual(l.drain, {
      signalAt: T0 + 1000,
      minDrainSecs: 5,
      readyzFailedProbes: 1,
      arrivals: 1,
      lastArrivalAt: T0 + 1500,
      newConnections: 1,
      longestInFlightMs: 1600, // the request in flight at the signal, arrival to release
    });
  });

  test("a slot taken with the caller's reading of the clock counts from that arrival", () => {
    let now = T0;
    const l = new Lifecycle(() => now);
    l.serve();
    const release = l.acquire(T0 - 2000); // arrived two seconds before the slot was taken
    l.beginDrain(5);
    now += 500;
    release();
    assert.equal(l.drain?.longestInFlightMs, 2500);
  });
});

// -- black-box ------------------------------------------------------------------------------------------

const RUNTIMES: RuntimeName[] = ['node', 'bun', 'deno'];

/** One request on its own connection (a balancer that opens a connection per request). */
function get(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, headers, timeout: 5000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

function post(url: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${CALLER_KEY}` },
      timeout: 10_000,
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

interface Observed {
  readyz503: number;
  routed: number;
  routeFailed: number;
  connectionsAnswered: number;
  connectionsFailed: number;
}

/**
 * After the gateway logged the start of its drain: probe `/readyz` until it answers 503, then keep routing
 * caller requests (and probing) every 100 ms for `propagationMs`, then stop — as a balancer whose
 * propagation is known. Every request opens its own connection, so connections are counted exactly.
 */
async function balancer(gw: GatewayProcess, propagationMs: number): Promise<Observed> {
  const o: Observed = { readyz503: 0, routed: 0, routeFailed: 0, connectionsAnswered: 0, connectionsFailed: 0 };
  const probe = async (): Promise<number> => {
    try {
      const s = await get(gw.url('/readyz'));
      o.connectionsAnswered++;
      if (s === 503) o.readyz503++;
      return s;
    } catch {
      o.connectionsFailed++;
      return 0;
    }
  };
  const deadline = Date.now() + 5000;
  while ((await probe()) !== 503) {
    assert.ok(Date.now() < deadline, '/readyz did not fail within 5 s of the signal');
    await sleep(20);
  }
  const sawFailure = Date.now();
  while (Date.now() - sawFailure < propagationMs) {
    try {
      const s = await get(gw.url('/v1/models'), { authorization: `Bearer ${CALLER_KEY}` });
      assert.equal(s, 200);
      o.routed++;
      o.connectionsAnswered++;
    } catch {
      o.routeFailed++;
      o.connectionsFailed++;
    }
    await probe();
    await sleep(100);
  }
  return o;
}

function config(minDrain: number): string {
  return `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { addr: "127.0.0.1:{{admin}}", admin_keys: [admin-key-SECRET] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: ${minDrain} }
`;
}

interface Scenario {
  name: string;
  windowSecs: number;
  propagationMs: number;
  verdict: string;
  /** A request held by the upstream for this long is in flight at the signal. */
  slowRequestMs?: number;
}

const SCENARIOS: Scenario[] = [
  { name: 'ok', windowSecs: 3, propagationMs: 1500, verdict: 'ok', slowRequestMs: 700 },
  { name: 'too short', windowSecs: 3, propagationMs: 2900, verdict: 'window_too_short' },
  { name: 'generous', windowSecs: 10, propagationMs: 200, verdict: 'window_generous' },
];

// deno-lint-ignore no-explicit-any -- JSON under test
async function json(url: string, headers: Record<string, string> = {}): Promise<any> {
  const r = await fetch(url, { headers });
  assert.equal(r.status, 200, url);
  return r.json();
}

async function runScenario(runtime: RuntimeName, s: Scenario, note: (m: string) => void): Promise<void> {
  const mock = await startMockUpstream();
  const gw = await spawnGateway({
    runtime,
    config: config(s.windowSecs),
    files: { 'resources.yaml': resourcesFor(mock.base) },
    env: { CALLER_KEY },
  });
  try {
    await gw.waitReady('/readyz', 'proxy', 30_000);
    let slow: Promise<number> | undefined;
    if (s.slowRequestMs) {
      mock.script({ delayMs: s.slowRequestMs });
      const arrived = mock.waitForRequests(1);
      slow = post(
        gw.url('/v1/chat/completions'),
        JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
      );
      await arrived;
    }
    gw.signal('SIGTERM');
    await gw.waitForLog('draining — /readyz now reports 503, still accepting new connections');
    const balancing = balancer(gw, s.propagationMs);

    // While the drain runs (early in the window), the status listener and the admin health show the report
    // so far: not complete, no verdict yet.
    const live = await json(gw.url('/status/drain', 'status'));
    assert.equal(live.phase, 'draining');
    assert.equal(live.drain.complete, false);
    assert.equal(live.drain.min_drain_secs, s.windowSecs);
    assert.equal(live.drain.verdict, null);
    assert.equal(live.drain.recommended_min_drain_secs, null);
    const health = await json(gw.url('/admin/v1/health', 'admin'), { authorization: 'Bearer admin-key-SECRET' });
    assert.equal(health.drain.min_drain_secs, s.windowSecs);
    assert.equal(health.drain.signal_at, live.drain.signal_at);
    const seen = await balancing;
    if (slow) assert.equal(await slow, 200);

    const line = await gw.waitForLog('drain report', s.windowSecs * 1000 + 15_000);
    assert.equal(await gw.waitForExit(15_000), 0);
    const ctx = `${runtime} ${s.name}: ${JSON.stringify(line)} client saw ${JSON.stringify(seen)}`;
    assert.equal(line.level, 'INFO', ctx);
    assert.equal(line.complete, true, ctx);
    assert.equal(line.signal_at, live.drain.signal_at, ctx);
    assert.equal(line.min_drain_secs, s.windowSecs, ctx);
    assert.equal(line.verdict, s.verdict, ctx);
    // Each answered request is one the gateway saw; one cut off by the closing listener may or may not be.
    assert.equal(line.readyz_failed_probes, seen.readyz503, ctx);
    assert.ok(
      (line.arrivals_while_draining as number) >= seen.routed &&
        (line.arrivals_while_draining as number) <= seen.routed + seen.routeFailed,
      ctx,
    );
    assert.ok(
      (line.new_connections_while_draining as number) >= seen.connectionsAnswered &&
        (line.new_connections_while_draining as number) <= seen.connectionsAnswered + seen.connectionsFailed,
      ctx,
    );
    const last = line.last_arrival_after_secs as number;
    const p = s.propagationMs / 1000;
    assert.ok(last >= p - 0.25 && last <= p + 0.5, `last arrival ${last} s for a ${p} s propagation\n${ctx}`);
    const drainSecs = line.drain_secs as number;
    assert.ok(drainSecs >= s.windowSecs && drainSecs < s.windowSecs + 3, ctx);
    const longest = line.longest_in_flight_secs as number;
    if (s.slowRequestMs) assert.ok(longest >= s.slowRequestMs / 1000 && longest < 2.5, ctx);
    else assert.ok(longest >= 0 && longest < 1, ctx);
    const recommended = Math.max(5, Math.ceil(2 * last));
    assert.equal(line.recommended_min_drain_secs, recommended, ctx);
    if (s.name === 'ok' || s.name === 'generous') assert.equal(recommended, 5, ctx);
    assert.equal(line.recommended_grace_period_secs, recommended + Math.ceil(longest) + 10, ctx);
    note(`${s.name}: ${JSON.stringify(line)}`); // docs/operations.md quotes one of these
    // The report precedes the clean exit line.
    const order = gw.logs.map((l) => l.msg);
    assert.ok(order.indexOf('drain report') < order.indexOf('sluice shut down cleanly'), ctx);
    assert.ok(order.indexOf('drain complete — closing listeners') < order.indexOf('drain report'), ctx);
  } finally {
    gw.kill();
    await mock.close();
  }
}

for (const runtime of RUNTIMES) {
  describe(`drain report on ${runtime}`, () => {
    test('ok (1.5 s of 3 s), too short (2.9 s of 3 s), generous (0.2 s of 10 s): every field', async (t) => {
      await Promise.all(SCENARIOS.map((s) => runScenario(runtime, s, (m) => t.diagnostic(m))));
    });
  });
}

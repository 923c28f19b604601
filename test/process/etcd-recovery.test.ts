// Black-box: how fast an etcd-mode gateway process notices that etcd went away and comes back, with the
// default backoff (1 s doubling to 60 s), against a real etcd:
// - etcd SIGKILLed until the reconnect backoff reaches 8 s, then restarted on the same data dir and port: a
//   change put right after etcd is healthy again is applied within 2 s (the backoff alone would wait until its
//   next attempt, seconds later);
// - a partition that stalls TCP without a reset (a pausable proxy in this file stops forwarding bytes and
//   keeps every socket open): `source.connected` turns false within 15 s with a WARN, and after the proxy
//   resumes the watch is back and a change made meanwhile is applied.
// Run: node build.mjs && node --import tsx --test test/process/etcd-recovery.test.ts
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as http from 'node:http';
import * as net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { MSG } from '../../src/observability/messages.ts';
import { EtcdClient, EtcdError } from '../../src/sources/etcd/client.ts';
import { isUnreachable } from '../../src/sources/etcd/supervisor.ts';
import { seeder, trio } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';
import { until } from '../support/until.ts';

const CALLER_HASH = createHash('sha256').update(CALLER_KEY).digest('hex');

function config(endpoint: string, prefix: string): string {
  return `etcd: { endpoints: ["${endpoint}"], prefix: ${prefix} }
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { addr: "127.0.0.1:{{admin}}", admin_keys: [admin-key-SECRET] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
`;
}

/** `source.connected` from /status/config, or undefined when the status listener does not answer. */
async function connected(g: GatewayProcess): Promise<boolean | undefined> {
  try {
    const r = await fetch(g.url('/status/config', 'status'), { signal: AbortSignal.timeout(2000) });
    const body = (await r.json()) as { source?: { connected?: boolean } };
    return body.source?.connected;
  } catch {
    return undefined;
  }
}

async function models(g: GatewayProcess): Promise<string[]> {
  try {
    const r = await fetch(g.url('/v1/models'), {
      headers: { authorization: `Bearer ${CALLER_KEY}` },
      signal: AbortSignal.timeout(2000),
    });
    if (r.status !== 200) return [];
    return ((await r.json()) as { data: { id: string }[] }).data.map((m) => m.id);
  } catch {
    return [];
  }
}

/** A TCP forwarder that can stop moving bytes without closing anything (a stalled partition). */
interface PausableProxy {
  endpoint: string;
  pause(): void;
  resume(): void;
  close(): Promise<void>;
}

async function startPausableProxy(targetPort: number): Promise<PausableProxy> {
  let paused = false;
  const sockets = new Set<net.Socket>();
  const own = (s: net.Socket): void => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    s.on('error', () => {});
    if (paused) s.pause();
  };
  const server = net.createServer((client) => {
    own(client);
    const upstream = net.connect(targetPort, '127.0.0.1');
    own(upstream);
    // No pipe(): its backpressure handling would resume a socket this proxy paused.
    client.on('data', (d) => upstream.write(d));
    upstream.on('data', (d) => client.write(d));
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    pause() {
      paused = true;
      for (const s of sockets) s.pause();
    },
    resume() {
      paused = false;
      for (const s of sockets) s.resume();
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

describe('etcd recovery and partition detection (gateway processes, default backoff)', {
  concurrency: true,
  timeout: 120_000,
}, () => {
  let etcd: EtcdServer;
  let mock: MockUpstream;
  const procs: GatewayProcess[] = [];
  const spawn = async (o: Parameters<typeof spawnGateway>[0]): Promise<GatewayProcess> => {
    const g = await spawnGateway(o);
    procs.push(g);
    return g;
  };

  before(async () => {
    [etcd, mock] = await Promise.all([startEtcd(), startMockUpstream()]);
  });
  after(async () => {
    await Promise.all(procs.map((g) => g.stop(10_000).catch(() => g.kill())));
    await Promise.all([etcd?.stop(), mock?.close()]);
  });

  test('etcd SIGKILLed until the backoff reaches 8 s, then restarted: a change is applied within 2 s of etcd answering', async () => {
    const own = await startEtcd();
    try {
      const P = '/rec-kill';
      const s = seeder(own.endpoint);
      for (const [k, v] of trio(P, mock.base, CALLER_HASH)) await s.put(k, v);
      const g = await spawn({ config: config(own.endpoint, P) });
      await g.waitReady('/readyz');
      await own.kill();
      // etcd stays down until the backoff reaches 8 s (1 + 2 + 4 s of failed attempts): without the probe, the
      // next attempt would come seconds after the restart.
      await g.waitForLog((l) => l.msg === MSG.etcdBackoff && (l.backoff_ms as number) >= 8000, 15_000);
      const backoffs = g.logs.filter((l) => l.msg === MSG.etcdBackoff).map((l) => l.backoff_ms as number);
      assert.ok(Math.max(...backoffs) >= 4000, `backoff grew: ${backoffs.join(',')}`);
      await own.restart();
      const healthy = Date.now();
      await s.put(`${P}/models/m2`, { display_name: 'gpt-after-kill', model_name: 'two', provider_key_id: 'pk1' });
      const ms = await until(
        async () => (await models(g)).includes('gpt-after-kill'),
        2000 - (Date.now() - healthy),
        'the change put after the restart is served',
        25,
      );
      console.log(`etcd restart → change applied: ${Date.now() - healthy} ms after etcd answered (${ms} ms polling)`);
      assert.equal(await connected(g), true);
      // The backoff still paced the WARN lines: one per failed reconnect attempt, not one per probe.
      assert.ok(backoffs.length <= 6, `WARN lines during the outage: ${backoffs.length}`);
    } finally {
      await own.stop();
    }
  });

  for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
    test(`${runtime}: a stalled TCP path to etcd is detected within 15 s and recovered after it resumes`, async () => {
      const proxy = await startPausableProxy(etcd.clientPort);
      try {
        const P = `/rec-stall-${runtime}`;
        const s = seeder(etcd.endpoint);
        for (const [k, v] of trio(P, mock.base, CALLER_HASH)) await s.put(k, v);
        const g = await spawn({ runtime, config: config(proxy.endpoint, P) });
        await g.waitReady('/readyz');
        await until(async () => (await connected(g)) === true, 10_000, 'connected', 25);
        proxy.pause();
        const detectMs = await until(async () => (await connected(g)) === false, 15_000, 'connected: false', 25);
        const warn = await g.waitForLog(MSG.etcdBackoff, 1000);
        assert.match(String(warn.error), /keep-alive|timeout|no answer|within/i, JSON.stringify(warn));
        // Still serving what it had, ready throughout.
        assert.ok((await models(g)).includes('gpt-test'));
        await s.put(`${P}/models/m2`, { display_name: 'gpt-during-stall', model_name: 'x', provider_key_id: 'pk1' });
        proxy.resume();
        const resumed = Date.now();
        await until(
          async () => (await models(g)).includes('gpt-during-stall'),
          10_000,
          'the change made during the stall is served',
          25,
        );
        const recoverMs = Date.now() - resumed;
        assert.equal(await connected(g), true);
        console.log(`${runtime}: stall detected after ${detectMs} ms; change applied ${recoverMs} ms after resume`);
      } finally {
        await proxy.close();
      }
    });
  }
});

test('isUnreachable: probing is for an etcd that could not be reached, not for one that refused', () => {
  assert.equal(isUnreachable(new EtcdError('refused', 'transport')), true);
  assert.equal(isUnreachable(new EtcdError('slow', 'timeout')), true);
  assert.equal(isUnreachable(new EtcdError('no leader', 'server', { status: 503 })), true);
  assert.equal(isUnreachable(new EtcdError('unavailable', 'server', { status: 500, grpcCode: 14 })), true);
  assert.equal(isUnreachable(new EtcdError('bad request', 'server', { status: 400, grpcCode: 3 })), false);
  assert.equal(isUnreachable(new EtcdError('denied', 'auth', { status: 401 })), false);
  assert.equal(isUnreachable(new EtcdError('handler', 'protocol')), false);
});

test('EtcdClient.ping: an answer with a leader or any non-5xx answer passes; refused, silent, 503 and no leader fail', async () => {
  const etcd = await startEtcd();
  const answers: Record<string, [number, string] | 'hang'> = {
    '/404': [404, 'not here'],
    '/503': [503, '{"message":"unavailable"}'],
    '/noleader': [200, '{"header":{},"leader":"0"}'],
    '/hang': 'hang',
  };
  const server = http.createServer((req, res) => {
    const a = answers[(req.url ?? '').replace('/v3/maintenance/status', '')];
    if (a === 'hang' || !a) return; // never answers
    res.writeHead(a[0]);
    res.end(a[1]);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  try {
    const client = new EtcdClient({ endpoints: [etcd.endpoint] });
    assert.equal(await client.ping({ timeoutMs: 1000 }), etcd.endpoint);
    const at = (path: string) => new EtcdClient({ endpoints: [`${base}${path}`] });
    assert.equal(await at('/404').ping({ timeoutMs: 1000 }), `${base}/404`);
    await assert.rejects(at('/503').ping({ timeoutMs: 1000 }), (e: EtcdError) => e.kind === 'server');
    await assert.rejects(at('/noleader').ping({ timeoutMs: 1000 }), /no leader/);
    const t0 = Date.now();
    await assert.rejects(at('/hang').ping({ timeoutMs: 300 }), (e: EtcdError) => e.kind === 'timeout');
    assert.ok(Date.now() - t0 < 2000);
    await etcd.kill();
    await assert.rejects(client.ping({ timeoutMs: 1000 }), (e: EtcdError) => e.kind === 'transport');
    // Several endpoints: the first that answers wins.
    const two = new EtcdClient({ endpoints: [etcd.endpoint, `${base}/404`] });
    assert.equal(await two.ping({ timeoutMs: 1000 }), `${base}/404`);
  } finally {
    server.closeAllConnections();
    server.close();
    await etcd.stop();
  }
});

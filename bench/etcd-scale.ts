// The seeds' 20,000-model configuration through the etcd source, end to end with real processes:
// a real etcd, 20,000 models (one range response well over 4 MiB), and bin/sluice in etcd mode.
// Prints: process start → first proxy bind, put → applied (one change), resident memory, and a restart
// from the snapshot cache with etcd unreachable.
//
// Run: node build.mjs && node --import tsx bench/etcd-scale.ts [models]
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encodeUtf8, prefixRange } from '../src/sources/etcd/client.ts';
import { base64Encode } from '../src/util/bytes.ts';
import { startEtcd } from '../test/support/etcd.ts';
import { type GatewayProcess, spawnGateway } from '../test/support/process.ts';
import { deadEndpoint } from '../test/support/process.ts';

const MODELS = Number(process.argv[2] ?? 20_000);
const PREFIX = '/aisix';
const CHANGES = 10;

function modelRow(i: number, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    display_name: `model-${String(i).padStart(5, '0')}`,
    provider: 'openai',
    model_name: `gpt-4o-mini-${i}`,
    provider_key_id: 'pk1',
    timeout: 30_000,
    retries: 1,
    cooldown: { enabled: true, default_seconds: 30, max_seconds: 600 },
    cost: { input_per_1k: 0.15, output_per_1k: 0.6 },
    ...extra,
  });
}

async function txnPut(endpoint: string, entries: [string, string][]): Promise<void> {
  for (let i = 0; i < entries.length; i += 128) {
    const success = entries.slice(i, i + 128).map(([k, v]) => ({
      request_put: { key: base64Encode(encodeUtf8(k)), value: base64Encode(encodeUtf8(v)) },
    }));
    const res = await fetch(`${endpoint}/v3/kv/txn`, { method: 'POST', body: JSON.stringify({ success }) });
    if (res.status !== 200) throw new Error(`txn: ${res.status} ${await res.text()}`);
    await res.arrayBuffer();
  }
}

async function put(endpoint: string, key: string, value: string): Promise<void> {
  const res = await fetch(`${endpoint}/v3/kv/put`, {
    method: 'POST',
    body: JSON.stringify({ key: base64Encode(encodeUtf8(key)), value: base64Encode(encodeUtf8(value)) }),
  });
  if (res.status !== 200) throw new Error(`put: ${res.status}`);
  await res.arrayBuffer();
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function until(what: string, check: () => Promise<boolean>, ms: number, every = 5): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, every));
  }
  throw new Error(`bench: ${what} not within ${ms} ms`);
}

async function statusConfig(
  g: GatewayProcess,
): Promise<{ applied?: { apply_seq: number; resource_counts: Record<string, number> } }> {
  const r = await fetch(g.url('/status/config', 'status'));
  return (await r.json()) as { applied?: { apply_seq: number; resource_counts: Record<string, number> } };
}

async function livez(g: GatewayProcess): Promise<boolean> {
  const r = await fetch(g.url('/livez'), { signal: AbortSignal.timeout(500) });
  await r.arrayBuffer();
  return r.status === 200;
}

function config(endpoint: string, cache: string): string {
  return `etcd: { endpoints: ["${endpoint}"], prefix: ${PREFIX} }
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
observability: { access_log: false, metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
managed: { snapshot_cache_path: ${cache} }
`;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const etcd = await startEtcd({ extraArgs: ['--quota-backend-bytes=4294967296'] });
  const dir = mkdtempSync(join(tmpdir(), 'sluice-bench-'));
  const cache = join(dir, 'snapshot-cache.json');
  const rows: string[][] = [];
  try {
    const entries: [string, string][] = [
      [
        `${PREFIX}/provider_keys/pk1`,
        JSON.stringify({
          display_name: 'openai',
          provider: 'openai',
          api_key: 'sk-bench',
          api_base: 'http://127.0.0.1:9/v1',
        }),
      ],
      [
        `${PREFIX}/api_keys/k1`,
        JSON.stringify({ display_name: 'caller', key_hash: 'a'.repeat(64), allowed_models: ['*'] }),
      ],
    ];
    for (let i = 0; i < MODELS; i++) entries.push([`${PREFIX}/models/m${i}`, modelRow(i)]);
    await txnPut(etcd.endpoint, entries);
    const range = await fetch(`${etcd.endpoint}/v3/kv/range`, {
      method: 'POST',
      body: JSON.stringify(prefixRange(`${PREFIX}/`)),
    });
    const rangeBytes = (await range.arrayBuffer()).byteLength;
    rows.push(['etcd range response', `${(rangeBytes / 1048576).toFixed(2)} MiB (${entries.length} keys)`]);

    // Cold start: process start → proxy /livez 200 (the first configuration applied and bound).
    const t0 = performance.now();
    const g = await spawnGateway({ config: config(etcd.endpoint, cache) });
    await until('first bind', () => livez(g), 60_000);
    const bindMs = performance.now() - t0;
    await until('20k applied', async () => (await statusConfig(g)).applied?.resource_counts.models === MODELS, 10_000);
    rows.push(['process start → first proxy bind (/livez 200)', `${bindMs.toFixed(0)} ms`]);
    await new Promise((r) => setTimeout(r, 1000)); // let the first cache write and GC settle
    rows.push(['RSS after load', `${rssMiB(g.proc.pid!).toFixed(0)} MiB`]);

    // One change at a time: put → apply_seq moves.
    const times: number[] = [];
    let rssAfterOne = NaN;
    for (let c = 0; c < CHANGES; c++) {
      const before = (await statusConfig(g)).applied!.apply_seq;
      const t = performance.now();
      await put(etcd.endpoint, `${PREFIX}/models/m${c}`, modelRow(c, { timeout: 40_000 + c }));
      await until('change applied', async () => (await statusConfig(g)).applied!.apply_seq > before, 10_000, 2);
      times.push(performance.now() - t);
      if (c === 0) {
        await new Promise((r) => setTimeout(r, 1000)); // the cache write follows the apply
        rssAfterOne = rssMiB(g.proc.pid!);
      }
    }
    rows.push([
      `put → applied, one change (median of ${CHANGES})`,
      `${median(times).toFixed(1)} ms (min ${Math.min(...times).toFixed(1)}, max ${Math.max(...times).toFixed(1)})`,
    ]);
    rows.push(['RSS after one change', `${rssAfterOne.toFixed(0)} MiB`]);
    await new Promise((r) => setTimeout(r, 1000));
    rows.push([`RSS after ${CHANGES} changes`, `${rssMiB(g.proc.pid!).toFixed(0)} MiB`]);
    rows.push(['snapshot cache file', `${(statSync(cache).size / 1048576).toFixed(2)} MiB`]);
    g.signal('SIGTERM');
    await g.waitForExit(30_000);

    // Restart with etcd unreachable: the cache applies before any network read.
    const t1 = performance.now();
    const g2 = await spawnGateway({ config: config(await deadEndpoint(), cache) });
    await until('bind from cache', () => livez(g2), 60_000);
    rows.push(['restart from the cache, etcd unreachable → first bind', `${(performance.now() - t1).toFixed(0)} ms`]);
    await new Promise((r) => setTimeout(r, 500));
    rows.push(['RSS after the cache restore', `${rssMiB(g2.proc.pid!).toFixed(0)} MiB`]);
    g2.signal('SIGTERM');
    await g2.waitForExit(30_000);
  } finally {
    await etcd.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const w = Math.max(...rows.map((r) => r[0]!.length));
  console.log(`\netcd source at scale: ${MODELS} models, node ${process.version}\n`);
  console.log(`| ${'measure'.padEnd(w)} | value |`);
  console.log(`|${'-'.repeat(w + 2)}|-------|`);
  for (const [k, v] of rows) console.log(`| ${k!.padEnd(w)} | ${v} |`);
}

await main();

// The standalone executable (docs/deploy.md "One executable"): `node build.mjs --binary` compiles it, the test
// copies it alone into an empty folder and runs it with PATH stripped, so no Node, npm or node_modules can
// help: the example boots and answers a streamed chat, `validate` and `probe-timeline` work, SIGTERM drains
// with the drain report and exit 0, a large resources file is parsed on the YAML worker embedded in the
// executable, `export` reads etcd, and the snapshot cache carries a restart with etcd gone.
// Run: node --import tsx --test test/process/binary.test.ts
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MSG } from '../../src/observability/messages.ts';
import { OFF_THREAD_MIN_BYTES } from '../../src/resources/pipeline.ts';
import { VERSION } from '../../src/version.ts';
import { bigResources, withYamlStage } from '../support/big-resources.ts';
import { seeder } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { baseConfig, CALLER_KEY, deadEndpoint, type GatewayProcess, spawnGateway } from '../support/process.ts';
import { until } from '../support/until.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const BUILT = join(ROOT, `dist/sluice-${process.platform}-${process.arch}`);
/** What the example's demo caller sends (examples/resources.yaml keeps only its hash). */
const DEMO_KEY = 'sk-sluice-demo';
/** No folder: nothing the executable could exec or load is on the path. */
const NO_PATH = { PATH: '/nonexistent' };

const example = (name: string) => readFileSync(join(ROOT, 'examples', name), 'utf8');
/** The example config.yaml on this test's ports; everything else as shipped. */
const exampleConfig = () =>
  example('config.yaml')
    .replace('127.0.0.1:3000', '127.0.0.1:{{proxy}}')
    .replace('127.0.0.1:3001', '127.0.0.1:{{admin}}')
    .replace('127.0.0.1:9090', '127.0.0.1:{{status}}');

let home: string;
let bin: string;

before(() => {
  const r = spawnSync(process.execPath, ['build.mjs', '--binary'], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, `node build.mjs --binary failed:\n${r.stderr}`);
  home = mkdtempSync(join(tmpdir(), 'sluice-binary-'));
  bin = join(home, 'sluice');
  copyFileSync(BUILT, bin);
});
after(() => rmSync(home, { recursive: true, force: true }));

/** Run the executable to completion (a one-shot command), PATH stripped. */
function run(args: string[], cwd = home): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(bin, args, { cwd, env: NO_PATH, encoding: 'utf8', timeout: 20_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function exampleGateway(env: Record<string, string> = {}): Promise<GatewayProcess> {
  return spawnGateway({
    executable: bin,
    config: exampleConfig(),
    files: { 'resources.yaml': example('resources.yaml') },
    env: { ...NO_PATH, ...env },
  });
}

describe('the standalone executable', () => {
  test('alone in its folder: it is one file and links no Node', () => {
    assert.equal(spawnSync('node', ['-v'], { env: NO_PATH }).error?.message.includes('ENOENT'), true);
    const r = run(['--version']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stderr.trim(), `sluice ${VERSION} (bun)`);
    const h = run(['--help']);
    assert.equal(h.status, 0);
    assert.match(h.stderr, /sluice validate --config <file>/);
  });

  test('validate --config and --resources on the example; a broken file is exit 1 with the report', () => {
    const dir = mkdtempSync(join(home, 'validate-'));
    copyFileSync(join(ROOT, 'examples/config.yaml'), join(dir, 'config.yaml'));
    copyFileSync(join(ROOT, 'examples/resources.yaml'), join(dir, 'resources.yaml'));
    const c = run(['validate', '--config', 'config.yaml'], dir);
    assert.equal(c.status, 0, c.stderr);
    assert.equal(c.stdout, 'OK: config.yaml with ./resources.yaml loaded 3 resource(s)\n');
    const r = run(['validate', '--resources', 'resources.yaml'], dir);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, 'OK: resources.yaml loaded 3 resource(s)\n');
    const bad = run(['validate', '--config', 'config.yaml'], home);
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /config file config\.yaml: cannot read it/);
  });

  test('boots on the example, streams a chat, and drains on SIGTERM under probe-timeline: report, exit 0', async () => {
    const g = await exampleGateway({ AISIX_SHUTDOWN__MIN_DRAIN_SECS: '1' });
    try {
      await g.waitReady('/readyz', 'proxy', 30_000);
      // Restarted in place with Bun's fetch cap lifted (runtimes/bun-upstream-cap.ts), its arguments intact.
      const environ = readFileSync(`/proc/${g.proc.pid}/environ`, 'utf8').split('\0');
      assert.ok(environ.includes('BUN_CONFIG_MAX_HTTP_REQUESTS=65535'), 'the executable runs with the cap lifted');
      const r = await fetch(g.url('/v1/chat/completions'), {
        method: 'POST',
        headers: { authorization: `Bearer ${DEMO_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', stream: true, messages: [{ role: 'user', content: 'hello binary' }] }),
      });
      assert.equal(r.status, 200);
      assert.match(r.headers.get('content-type') ?? '', /text\/event-stream/);
      const events = (await r.text()).split('\n\n').filter(Boolean).map((e) => e.replace(/^data: /, ''));
      assert.equal(events.at(-1), '[DONE]');
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as { choices: { delta: { content?: string } }[] });
      assert.ok(chunks.length > 2, 'streamed in several chunks');
      assert.equal(chunks.map((c) => c.choices[0]!.delta.content ?? '').join(''), 'hello binary');

      const tool = spawn(bin, [
        'probe-timeline',
        '--proxy',
        g.url('').replace(/\/$/, ''),
        '--status',
        g.url('', 'status').replace(/\/$/, ''),
        '--route',
        '/v1/models',
        '--key',
        DEMO_KEY,
        '--until-exit',
      ], { env: NO_PATH, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      tool.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      const toolExit = new Promise<number | null>((res) => tool.once('close', res));
      await until(() => out.includes('200/200/200/200'), 10_000, 'probe-timeline to see the gateway ready');

      g.signal('SIGTERM');
      const report = await g.waitForLog(MSG.drainReport, 15_000);
      assert.equal(report.complete, true);
      assert.equal(report.min_drain_secs, 1);
      assert.equal(await g.waitForExit(15_000), 0);
      assert.ok(g.logs.some((l) => l.msg === MSG.shutDownCleanly));
      assert.equal(await toolExit, 0, out);
      assert.match(out, /phases: .*200\/200\/200\/200 → 200\/503\/200\/200 → .*refused/);
      assert.match(out, /dropped requests: 0/);
    } finally {
      g.kill();
    }
  });
});

describe('the standalone executable parsing a large resources file', () => {
  const PARSED = 'resources file parsed';

  test('a SIGHUP reload of a file over the worker threshold is parsed on the embedded worker thread', async () => {
    const big = withYamlStage(bigResources(await deadEndpoint(), 3000, 'b'));
    assert.ok(big.length >= OFF_THREAD_MIN_BYTES, 'the file is large enough to be parsed off the event loop');
    const g = await spawnGateway({
      executable: bin,
      config: baseConfig().replace('observability: {', 'observability: { log_level: debug,'),
      files: { 'resources.yaml': example('resources.yaml') },
      env: { ...NO_PATH, CALLER_KEY },
    });
    try {
      await g.waitReady('/readyz', 'proxy', 30_000);
      const small = await g.waitForLog(PARSED, 10_000);
      assert.equal(small.parsed_on, 'event loop', 'a small file is parsed where it is read');
      writeFileSync(join(g.dir, 'resources.yaml'), big);
      const from = g.logs.length;
      g.signal('SIGHUP');
      const reloaded = await g.waitForLog(MSG.fileReloaded, 60_000);
      assert.equal(reloaded.resources, 6003);
      const lines = g.logs.slice(from);
      const parsed = lines.find((l) => l.msg === PARSED);
      assert.deepEqual({ bytes: parsed?.bytes, parsed_on: parsed?.parsed_on }, {
        bytes: Buffer.byteLength(big),
        parsed_on: 'worker thread',
      });
      assert.deepEqual(lines.filter((l) => l.level === 'WARN'), [], 'no fallback to the event loop');
    } finally {
      g.kill();
    }
  });
});

describe('the standalone executable in etcd mode', () => {
  let etcd: EtcdServer;
  before(async () => {
    etcd = await startEtcd();
  });
  after(() => etcd?.stop());

  const config = (endpoint: string, cache: string) =>
    `etcd: { endpoints: ["${endpoint}"], prefix: /bin-cache }
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
observability: { log_format: json, metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
managed: { snapshot_cache_path: ${cache} }
`;

  test('export works; it writes the snapshot cache, and a restart with etcd unreachable serves from it', async () => {
    const s = seeder(etcd.endpoint);
    await s.put('/bin-cache/provider_keys/pk1', { display_name: 'offline', provider: 'echo' });
    await s.put('/bin-cache/models/m1', {
      display_name: 'echo',
      provider: 'echo',
      model_name: 'echo',
      provider_key_id: 'pk1',
    });
    const hash = createHash('sha256').update(DEMO_KEY).digest('hex');
    await s.put('/bin-cache/api_keys/k1', { display_name: 'demo', key_hash: hash, allowed_models: ['*'] });
    const cache = join(home, 'snapshot.json');

    const exported = join(home, 'exported.yaml');
    const ex = run(['export', '--etcd', etcd.endpoint, '--prefix', '/bin-cache', '-o', exported]);
    assert.equal(ex.status, 0, ex.stderr);
    assert.match(readFileSync(exported, 'utf8'), /display_name: echo/);

    const a = await spawnGateway({ executable: bin, config: config(etcd.endpoint, cache), env: NO_PATH });
    try {
      await a.waitReady('/readyz', 'proxy', 30_000);
      await until(() => existsSync(cache), 10_000, 'the snapshot cache to be written');
      a.signal('SIGTERM');
      assert.equal(await a.waitForExit(), 0);
    } finally {
      a.kill();
    }

    const b = await spawnGateway({ executable: bin, config: config(await deadEndpoint(), cache), env: NO_PATH });
    try {
      await b.waitReady('/readyz', 'proxy', 10_000);
      // The log line travels a pipe, readiness a socket: either may come first.
      await b.waitForLog(MSG.cacheRestored, 10_000);
      const r = await fetch(b.url('/v1/chat/completions'), {
        method: 'POST',
        headers: { authorization: `Bearer ${DEMO_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content: 'from the cache' }] }),
      });
      assert.equal(r.status, 200, await r.clone().text());
      assert.match(await r.text(), /from the cache/);
      b.signal('SIGTERM');
      assert.equal(await b.waitForExit(), 0);
    } finally {
      b.kill();
    }
  });
});

// Black-box: the Node gateway as a real process (bin/sluice) against an in-test mock OpenAI upstream.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, resourcesFor, spawnGateway } from '../support/process.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
const SECRETS = ['sk-upstream-SECRET-value', CALLER_KEY, 'admin-key-SECRET'];

function assertNoSecret(where: string, text: string): void {
  for (const s of SECRETS) assert.ok(!text.includes(s), `${where} leaks a secret (${s.slice(0, 6)}…)`);
}

describe('node gateway process', () => {
  let mock: MockUpstream;
  let gw: GatewayProcess;

  before(async () => {
    mock = await startMockUpstream();
    gw = await spawnGateway({
      config: baseConfig(),
      files: { 'resources.yaml': resourcesFor(mock.base) },
      env: { CALLER_KEY },
    });
    await gw.waitReady();
  });
  after(async () => {
    await gw.stop();
    await mock.close();
  });

  test('the official openai client works through the gateway, JSON and streaming', async () => {
    const client = new OpenAI({ apiKey: CALLER_KEY, baseURL: gw.url('/v1'), maxRetries: 0 });
    const r = await client.chat.completions.create({
      model: 'gpt-test',
      messages: [{ role: 'user', content: 'hello' }],
    });
    assert.equal(r.choices[0]!.message.content, 'hi from mock');
    assert.equal(mock.requests.at(-1)!.json!.model, 'gpt-upstream');
    assert.equal(mock.requests.at(-1)!.headers.authorization, 'Bearer sk-upstream-SECRET-value');

    mock.script({
      sse: [{
        id: 'c',
        object: 'chat.completion.chunk',
        created: 1,
        model: 'gpt-upstream',
        choices: [{ index: 0, delta: { content: 'one' }, finish_reason: null }],
      }, {
        id: 'c',
        object: 'chat.completion.chunk',
        created: 1,
        model: 'gpt-upstream',
        choices: [{ index: 0, delta: { content: ' two' }, finish_reason: 'stop' }],
      }],
      chunkDelayMs: 20,
    });
    const stream = await client.chat.completions.create({
      model: 'gpt-test',
      stream: true,
      messages: [{ role: 'user', content: 'hello' }],
    });
    let text = '';
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
    assert.equal(text, 'one two');

    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ['gpt-test']);
  });

  test("the admin listener: AISIX's playground through the proxy pipeline; writes 405", async () => {
    // The official client, its base at the admin listener's /playground: POST /playground/chat/completions.
    const client = new OpenAI({ apiKey: CALLER_KEY, baseURL: gw.url('/playground', 'admin'), maxRetries: 0 });
    const before = mock.requests.length;
    const r = await client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'pg' }] });
    assert.equal(r.choices[0]!.message.content, 'hi from mock');
    assert.equal(mock.requests.length, before + 1);
    assert.equal(mock.requests.at(-1)!.headers.authorization, 'Bearer sk-upstream-SECRET-value');
    const admin = new OpenAI({ apiKey: 'admin-key-SECRET', baseURL: gw.url('/playground', 'admin'), maxRetries: 0 });
    await assert.rejects(
      admin.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] }),
      (e: { status?: number }) => e.status === 401,
    );
    const write = await fetch(gw.url('/admin/v1/models', 'admin'), { method: 'POST', body: '{}' });
    assert.equal(write.status, 405);
    assert.equal(write.headers.get('allow'), 'GET,HEAD');
    assertNoSecret('admin 405', await write.text());
  });

  test('errors reach the openai client with the right status', async () => {
    const client = new OpenAI({ apiKey: 'sk-wrong', baseURL: gw.url('/v1'), maxRetries: 0 });
    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'x' }] }),
      (e: { status?: number }) => e.status === 401,
    );
    const ok = new OpenAI({ apiKey: CALLER_KEY, baseURL: gw.url('/v1'), maxRetries: 0 });
    await assert.rejects(
      ok.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }),
      (e: { status?: number }) => e.status === 404,
    );
  });

  test('SIGHUP reloads a good file and keeps the previous snapshot on a bad one', async () => {
    const config0 = await (await fetch(gw.url('/status/config', 'status'))).json();
    assert.equal(config0.state, 'synced');
    const seq0 = config0.applied.apply_seq;

    writeFileSync(
      join(gw.dir, 'resources.yaml'),
      resourcesFor(
        mock.base,
        `  - display_name: second
    model_name: gpt-2
    provider_key: mock
`,
      ).replace(
        /api_keys:\n {2}- display_name: caller\n {4}key_env: CALLER_KEY\n {4}allowed_models: \["\*"\]\n(.*)$/s,
        (_m, rest) =>
          `${rest}api_keys:\n  - display_name: caller\n    key_env: CALLER_KEY\n    allowed_models: ["*"]\n`,
      ),
    );
    gw.signal('SIGHUP');
    const reloaded = await gw.waitForLog('resources file reloaded');
    assert.equal(reloaded.resources, 4);
    const config1 = await (await fetch(gw.url('/status/config', 'status'))).json();
    assert.equal(config1.state, 'synced');
    assert.equal(config1.applied.apply_seq, seq0 + 1);
    assert.equal(config1.applied.resource_counts.models, 2);

    writeFileSync(
      join(gw.dir, 'resources.yaml'),
      '_format_version: "1"\nmodels:\n  - display_name: broken\n    timeout: abc\n',
    );
    gw.signal('SIGHUP');
    const failed = await gw.waitForLog('resources file reload failed — keeping the previous snapshot');
    assert.equal(failed.level, 'WARN');
    const config2 = await (await fetch(gw.url('/status/config', 'status'))).json();
    assert.equal(config2.state, 'out_of_sync');
    assert.equal(config2.applied.apply_seq, seq0 + 1, 'the applied snapshot is unchanged');
    assert.equal(config2.last_reload.successful, false);
    assert.equal(config2.last_failure.last_error_kind, 'validate');
    assert.notEqual(config2.source.source_hash, config2.applied.config_hash);
    assert.ok(config2.rejected.length >= 1);
    // Still serving the previous snapshot, second model included.
    const r = await fetch(gw.url('/v1/chat/completions'), {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'second', messages: [{ role: 'user', content: 'x' }] }),
    });
    assert.equal(r.status, 200);
    await r.arrayBuffer();
    const ready = await fetch(gw.url('/readyz'));
    assert.equal(ready.status, 200);
  });

  test('no secret appears in status, admin, metrics or logs', async () => {
    const bodies = await Promise.all([
      fetch(gw.url('/status/config', 'status')),
      fetch(gw.url('/status/models', 'status')),
      fetch(gw.url('/metrics', 'status')),
      fetch(gw.url('/admin/v1/provider_keys', 'admin'), { headers: { authorization: 'Bearer admin-key-SECRET' } }),
      fetch(gw.url('/admin/v1/api_keys', 'admin'), { headers: { 'x-api-key': 'admin-key-SECRET' } }),
      fetch(gw.url('/admin/v1/models', 'admin'), { headers: { 'x-api-key': 'admin-key-SECRET' } }),
      fetch(gw.url('/admin/v1/health', 'admin'), { headers: { 'x-api-key': 'admin-key-SECRET' } }),
    ].map(async (p) => {
      const r = await p;
      assert.equal(r.status, 200, r.url);
      return [r.url, await r.text()] as const;
    }));
    for (const [url, text] of bodies) assertNoSecret(url, text);
    const pk = JSON.parse(bodies[3]![1]);
    assert.equal(pk[0].value.api_key, '[redacted]');
    assertNoSecret('logs', gw.logs.map((l) => JSON.stringify(l)).join('\n') + gw.rawErr.join('\n'));
  });
});

describe('node gateway boot and validate', () => {
  test('validate: exit 0 with the OK line, exit 1 with the aggregated report', () => {
    const ok = spawnSync(join(ROOT, 'bin/sluice'), ['validate', '--resources', join(ROOT, 'examples/resources.yaml')], {
      encoding: 'utf8',
    });
    assert.equal(ok.status, 0, ok.stderr);
    assert.match(ok.stdout, /^OK: .*examples\/resources\.yaml loaded 3 resource\(s\)$/m, 'the OK line is on stdout');

    const dir = join(ROOT, '.tmp');
    spawnSync('mkdir', ['-p', dir]);
    const bad = join(dir, 'bad-resources.yaml');
    writeFileSync(
      bad,
      'models:\n  - display_name: a\n    provider_key: nope\n    model_name: x\n  - display_name: a\n    model_name: y\n',
    );
    const r = spawnSync(join(ROOT, 'bin/sluice'), ['validate', '--resources', bad], { encoding: 'utf8' });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /^resources file .*bad-resources\.yaml: \d+ error\(s\):$/m);
    assert.match(r.stderr, / {2}- \(file\): missing mandatory _format_version \(expected "1"\)/);
    assert.match(r.stderr, / {2}- models\[0\] \("a"\): `provider_key` references unknown provider key "nope"/);
    assert.match(r.stderr, /duplicate models entry: display_name "a" is already defined at models\[0\]/);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');

    const missing = spawnSync(join(ROOT, 'bin/sluice'), ['validate', '--resources', join(dir, 'nope.yaml')], {
      encoding: 'utf8',
    });
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /cannot read it/);
  });

  test('a bad config file exits 1 with the report, before binding', async () => {
    const gw = await spawnGateway({
      config: 'proxy: { addr: "127.0.0.1:{{proxy}}", bogus: 1 }\nresources_file: r.yaml\nadmin: { enabled: false }\n',
    });
    assert.equal(await gw.waitForExit(), 1);
    assert.match(
      gw.rawErr.join('\n'),
      /config file .*config\.yaml: 1 error\(s\):\n {2}- proxy: unknown key "bogus" \(line 1\)/,
    );
  });

  test('an unreadable resources file exits 1 naming it', async () => {
    const gw = await spawnGateway({ config: baseConfig() });
    assert.equal(await gw.waitForExit(), 1);
    assert.match(gw.rawErr.join('\n'), /resources file .*resources\.yaml: cannot read it/);
  });

  test('an address in use exits 1 with a clear message', async () => {
    const mock = await startMockUpstream();
    const port = Number(new URL(mock.url).port);
    const gw = await spawnGateway({
      config: baseConfig().replace('127.0.0.1:{{proxy}}', `127.0.0.1:${port}`),
      files: { 'resources.yaml': resourcesFor(mock.base) },
      env: { CALLER_KEY },
    });
    assert.equal(await gw.waitForExit(), 1);
    assert.match(gw.rawErr.join('\n'), /cannot bind: proxy listener on 127\.0\.0\.1:\d+: .*EADDRINUSE/);
    await mock.close();
  });
});

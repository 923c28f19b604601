// What a caller is told when the transport, not the upstream, decides (docs/aisix-compatibility.md "Providers",
// docs/configuration.md "upstream"): a secret no HTTP client can send (401, nothing sent, no retry), a deadline
// (504 "timed out"), a key of a vendor with no adapter (503 provider_unavailable), an upstream certificate the
// runtime refused (502 naming it); `/v1/models` for a key allowed only a routing group; `upstream.tls` in
// config.yaml and at boot.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config/load.ts';
import { createGateway, loadBootConfig } from '../../src/boot.ts';
import {
  certificateProblem,
  KeyTlsPools,
  refuseUnsendableHeaders,
  UnsendableHeader,
} from '../../src/upstream-fetch.ts';
import type { UpstreamRequest, UpstreamResponse } from '../../src/platform.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { type RecordingGateway, recordingGateway } from '../support/recording-gateway.ts';
import { testPlatform } from '../support/platform.ts';

const CALLER = 'sk-caller-transport-SECRET-1';
const GROUP_ONLY = 'sk-caller-group-only-SECRET-2';
const SECRET = 'sk-upstream-SECRET-9c1d';
const CHAT = { messages: [{ role: 'user', content: 'hi' }] };

describe('refusals the transport decides, through the proxy', () => {
  let mock: MockUpstream;
  let g: RecordingGateway;

  before(async () => {
    mock = await startMockUpstream();
    // The secret comes from a variable, as an operator's would: a trailing newline is what a file read leaves.
    g = await recordingGateway(
      `_format_version: "1"
provider_keys:
  - { display_name: ok, provider: openai, api_key: "${SECRET}", api_base: "${mock.base}" }
  - { display_name: newline, provider: openai, api_key: "\${BAD_SECRET}", api_base: "${mock.base}" }
  - { display_name: anth-newline, provider: anthropic, api_key: "\${BAD_SECRET}", api_base: "${mock.url}" }
  - { display_name: vendor, provider: deepseek, api_key: "${SECRET}", api_base: "${mock.base}" }
models:
  - { display_name: m-ok, provider_key: ok, model_name: up-ok, retries: 0 }
  - { display_name: m-newline, provider_key: newline, model_name: up-bad, retries: 2 }
  - { display_name: m-anth-newline, provider_key: anth-newline, model_name: claude, retries: 2 }
  - { display_name: m-slow, provider_key: ok, model_name: up-slow, timeout: 150, retries: 0 }
  - { display_name: m-vendor, provider_key: vendor, model_name: deepseek-chat, retries: 0 }
  - { display_name: m-other, provider_key: ok, model_name: up-other, retries: 0 }
  - { display_name: group, routing: { targets: [{ model: m-ok }, { model: m-other }] } }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
  - { display_name: group-only, key_env: GROUP_ONLY, allowed_models: [group] }
`,
      { CALLER, GROUP_ONLY, BAD_SECRET: `${SECRET}\n` },
    );
  });
  after(() => mock.close());

  test('a secret with a newline: 401 authentication_error at once, nothing sent, no retry', async () => {
    const before = mock.requests.length;
    for (
      const [path, model, stream] of [
        ['/v1/chat/completions', 'm-newline', false],
        ['/v1/chat/completions', 'm-newline', true],
        ['/v1/messages', 'm-anth-newline', false],
      ] as const
    ) {
      const r = await g.post(path, { model, stream, max_tokens: 8, ...CHAT }, CALLER);
      const text = await r.text();
      assert.equal(r.status, 401, text);
      const body = JSON.parse(text) as { error: { type: string; message: string } };
      assert.equal(body.error.type, 'authentication_error', text);
      assert.match(
        body.error.message,
        /^invalid upstream credentials: the (authorization|x-api-key) header holds bytes HTTP cannot send/,
      );
      assert.equal(text.includes(SECRET), false, 'the secret is never echoed');
    }
    assert.equal(mock.requests.length, before, 'no upstream request at all');
    const failed = g.gw.metrics.registry.render().split('\n')
      .filter((l) => l.startsWith('aisix_deployment_requests_total') && l.includes('m-newline'));
    assert.deepEqual(failed.map((l) => Number(l.split(' ').at(-1))), [2], 'one attempt per request: no retries');
  });

  test('a deadline: 504 upstream_timeout whose message says "timed out"', async () => {
    mock.script({ delayMs: 2000 });
    const r = await g.post('/v1/chat/completions', { model: 'm-slow', ...CHAT }, CALLER);
    const text = await r.text();
    assert.equal(r.status, 504, text);
    assert.deepEqual(JSON.parse(text), {
      error: { message: 'upstream request timed out after 150ms', type: 'upstream_timeout' },
    });
  });

  test('a vendor key naming no adapter: 503 provider_unavailable in either wire, nothing sent', async () => {
    const before = mock.requests.length;
    const chat = await g.post('/v1/chat/completions', { model: 'm-vendor', ...CHAT }, CALLER);
    assert.equal(chat.status, 503);
    assert.deepEqual(await chat.json(), {
      error: { message: 'no bridge registered for provider', type: 'provider_unavailable' },
    });
    const messages = await g.post('/v1/messages', { model: 'm-vendor', max_tokens: 8, ...CHAT }, CALLER);
    assert.equal(messages.status, 503);
    assert.deepEqual(await messages.json(), {
      type: 'error',
      error: { type: 'overloaded_error', message: 'no bridge registered for provider' },
    });
    assert.equal(mock.requests.length, before);
    const line = g.platform.logs.findLast((l) => l.status === 503);
    assert.match(String(line?.error), /provider_key "vendor" of vendor "deepseek" names no adapter/);
  });

  test('a key allowed only a routing group lists the group, never its targets', async () => {
    const r = await g.app.request('/v1/models', { headers: { authorization: `Bearer ${GROUP_ONLY}` } });
    const body = await r.json() as { data: { id: string }[] };
    assert.deepEqual(body.data.map((m) => m.id), ['group']);
    const all = await g.app.request('/v1/models', { headers: { authorization: `Bearer ${CALLER}` } });
    const ids = (await all.json() as { data: { id: string }[] }).data.map((m) => m.id);
    assert.ok(ids.includes('m-ok') && ids.includes('group'), 'the targets are listed for a key allowed them');
    const call = await g.post('/v1/chat/completions', { model: 'group', ...CHAT }, GROUP_ONLY);
    assert.equal(call.status, 200, await call.text());
    const target = await g.post('/v1/chat/completions', { model: 'm-ok', ...CHAT }, GROUP_ONLY);
    assert.equal(target.status, 403);
  });
});

describe('the transport helpers', () => {
  const answer: UpstreamResponse = {
    status: 200,
    header: () => null,
    body: { async *[Symbol.asyncIterator]() {} },
    text: () => Promise.resolve(''),
    discard: () => Promise.resolve(),
  };

  test('refuseUnsendableHeaders: control bytes and characters past U+00FF reject before the call', async () => {
    const sent: UpstreamRequest[] = [];
    const f = refuseUnsendableHeaders((req) => {
      sent.push(req);
      return Promise.resolve(answer);
    });
    const req = (v: string): UpstreamRequest => ({ url: 'http://u', method: 'POST', headers: { 'x-api-key': v } });
    for (const bad of ['a\nb', 'a\r', '\0', 'key\u0100', 'a\u007f']) {
      await assert.rejects(f(req(bad)), (e: unknown) => e instanceof UnsendableHeader && e.header === 'x-api-key');
    }
    for (const good of ['sk-1', 'a b\tc', 'caf\u00e9']) await f(req(good));
    assert.equal(sent.length, 3);
  });

  test('KeyTlsPools: one pool per distinct key TLS, shared across objects; the least recently used retired', () => {
    const built: string[] = [];
    const retired: string[] = [];
    const pools = new KeyTlsPools(
      (t) => {
        built.push(t.ca_cert ?? '-');
        return t.ca_cert ?? '-';
      },
      (p) => retired.push(p),
      2,
    );
    const a = { ca_cert: 'A', verify: true };
    assert.equal(pools.get(a), 'A');
    assert.equal(pools.get({ ca_cert: 'A ', verify: true }), 'A', 'same content, another snapshot: the same pool');
    assert.equal(pools.get({ ca_cert: 'A', verify: false }), 'A');
    assert.deepEqual(built, ['A', 'A'], 'verify is part of the identity');
    pools.get(a); // A/verify is now the most recent
    pools.get({ ca_cert: 'B', verify: true });
    assert.deepEqual(retired, ['A'], 'the A/no-verify pool, least recently used, is retired');
    assert.equal(pools.size, 2);
  });

  test('certificateProblem: OpenSSL codes on the error or its cause, in fixed words; others undefined', () => {
    const coded = (code: string, message = 'x') => Object.assign(new Error(message), { code });
    assert.equal(
      certificateProblem(coded('SELF_SIGNED_CERT_IN_CHAIN')),
      'self-signed certificate in certificate chain',
    );
    assert.equal(
      certificateProblem(new TypeError('fetch failed', { cause: coded('UNABLE_TO_GET_ISSUER_CERT_LOCALLY') })),
      'unable to get local issuer certificate',
    );
    assert.equal(
      certificateProblem(coded('ERR_TLS_CERT_ALTNAME_INVALID', "Host: up.internal. is not in the cert's altnames")),
      "the certificate does not name the upstream's host",
    );
    assert.equal(certificateProblem(coded('ECONNREFUSED')), undefined);
    assert.equal(certificateProblem(new Error('certificate')), undefined);
    assert.equal(certificateProblem('SELF_SIGNED_CERT_IN_CHAIN'), undefined);
  });
});

describe('upstream.tls in config.yaml', () => {
  const FILE = '/c/config.yaml';
  const config = (tls: string) =>
    `resources_file: r.yaml\nproxy: { addr: "0.0.0.0:3000" }\nadmin: { enabled: false }\nupstream: { tls: ${tls} }\n`;

  test("a client certificate without its key (or the reverse) is AISIX's error", () => {
    for (
      const [tls, message] of [
        ['{ client_cert_file: c.pem }', 'upstream.tls.client_cert_file requires upstream.tls.client_key_file'],
        ['{ client_key_file: k.pem }', 'upstream.tls.client_key_file requires upstream.tls.client_cert_file'],
      ] as const
    ) {
      const r = loadConfig(FILE, config(tls), {});
      assert.equal(r.ok, false);
      assert.match(r.ok ? '' : r.report.format(), new RegExp(message.replaceAll('.', '\\.')));
    }
  });

  test('paths resolve against the config folder; verify defaults to true; pool_idle_timeout_secs 30', () => {
    const r = loadConfig(
      FILE,
      config('{ ca_file: pki/ca.pem, client_cert_file: /abs/c.pem, client_key_file: k.pem }'),
      {},
    );
    assert.ok(r.ok);
    assert.deepEqual(r.config.upstream.tls, {
      ca_file: '/c/pki/ca.pem',
      client_cert_file: '/abs/c.pem',
      client_key_file: '/c/k.pem',
      verify: true,
    });
    assert.equal(r.config.upstream.pool_idle_timeout_secs, 30);
    assert.deepEqual(r.ignoredKeys, []);
  });

  test("loadBootConfig reads the files: AISIX's words for an unreadable one or one with no PEM block", async () => {
    const p = testPlatform();
    p.fileMap.set(FILE, config('{ ca_file: ca.pem, client_cert_file: c.pem, client_key_file: k.pem }'));
    assert.match(
      String(await loadBootConfig(p, FILE)),
      /^config file \/c\/config\.yaml: upstream\.tls\.ca_file: read \/c\/ca\.pem: /,
    );
    p.fileMap.set('/c/ca.pem', 'not a certificate');
    assert.match(
      String(await loadBootConfig(p, FILE)),
      /upstream\.tls\.ca_file: \/c\/ca\.pem contains no CERTIFICATE block/,
    );
    const cert = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    p.fileMap.set('/c/ca.pem', cert);
    p.fileMap.set('/c/c.pem', cert);
    p.fileMap.set('/c/k.pem', cert);
    assert.match(
      String(await loadBootConfig(p, FILE)),
      /upstream\.tls\.client_key_file: \/c\/k\.pem contains no PRIVATE KEY block/,
    );
    p.fileMap.set('/c/k.pem', '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n');
    const boot = await loadBootConfig(p, FILE);
    assert.equal(typeof boot, 'object');
    const tls = (boot as Exclude<typeof boot, string>).upstreamTls!;
    assert.equal(new TextDecoder().decode(tls.ca), cert);
    assert.equal(tls.verify, true);
  });

  test('SSL_CERT_FILE: its bundle is trusted next to ca_file; unreadable or without a certificate, no boot', async () => {
    const cert = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----';
    const p = testPlatform({ SSL_CERT_FILE: '/etc/bundle.pem' });
    p.fileMap.set(FILE, config('{ ca_file: ca.pem }').replace(/upstream: .*\n/, ''));
    assert.match(
      String(await loadBootConfig(p, FILE)),
      /^config file \/c\/config\.yaml: SSL_CERT_FILE \(fix the path or unset it\): read \/etc\/bundle\.pem: /,
    );
    p.fileMap.set('/etc/bundle.pem', 'no certificate here');
    assert.match(
      String(await loadBootConfig(p, FILE)),
      /SSL_CERT_FILE: \/etc\/bundle\.pem contains no CERTIFICATE block/,
    );
    p.fileMap.set('/etc/bundle.pem', `${cert}\n`);
    const alone = await loadBootConfig(p, FILE);
    assert.deepEqual((alone as Exclude<typeof alone, string>).upstreamTls, {
      verify: true,
      ca: new TextEncoder().encode(`${cert}\n`),
    });
    p.fileMap.set(FILE, config('{ ca_file: ca.pem }'));
    p.fileMap.set('/c/ca.pem', cert.replace('MIIB', 'MIIC'));
    const both = await loadBootConfig(p, FILE);
    const ca = new TextDecoder().decode((both as Exclude<typeof both, string>).upstreamTls!.ca);
    assert.equal(ca, `${cert}\n\n${cert.replace('MIIB', 'MIIC')}`);
  });

  test("the platform is given the materials and the idle bound; verify: false WARNs at boot in AISIX's words", async () => {
    const p = testPlatform();
    p.fileMap.set(FILE, config('{ verify: false }').replace('upstream: {', 'upstream: { pool_idle_timeout_secs: 7,'));
    const boot = await loadBootConfig(p, FILE);
    assert.equal(typeof boot, 'object');
    const b = boot as Exclude<typeof boot, string>;
    const seen: unknown[] = [];
    const inner = p.upstream;
    p.upstream = (o) => {
      seen.push(o);
      return inner(o);
    };
    const g = createGateway(b.config, p, { upstreamTls: b.upstreamTls, backgroundChecks: false });
    g.gw.stop();
    assert.deepEqual(seen, [{
      connectTimeoutMs: 5000,
      maxResponseBytes: 33_554_432,
      maxBufferedBytes: 67_108_864,
      poolIdleTimeoutMs: 7000,
      tls: { verify: false },
    }]);
    const warn = p.logs.find((l) => l.level === 'WARN' && String(l.msg).startsWith('upstream.tls.verify is false'));
    assert.equal(
      warn?.msg,
      'upstream.tls.verify is false: upstream certificates are NOT checked, so any peer able to intercept the connection can read and rewrite prompts, responses, and upstream API keys',
    );
  });
});

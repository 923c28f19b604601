// The file source as a ConfigSource (docs/configuration.md "resources.yaml", "Reloading"): the first load,
// SIGHUP reloads that apply or keep every byte of what served, and the facts each leaves in /status/config.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createGateway } from '../../src/boot.ts';
import { loadConfig } from '../../src/config/load.ts';
import { configStatusBody } from '../../src/config-facts.ts';
import { MSG } from '../../src/observability/messages.ts';
import { loadResourcesFile, OFF_THREAD_MIN_BYTES } from '../../src/resources/pipeline.ts';
import { FileSource } from '../../src/sources/file.ts';
import { uuidV5 } from '../../src/util/crypto.ts';
import { bigResources, withYamlStage } from '../support/big-resources.ts';
import { type TestPlatform, testPlatform } from '../support/platform.ts';

const RES = '/srv/resources.yaml';
const T0 = Date.parse('2026-03-01T10:00:00Z');

const GOOD = `_format_version: "1"
provider_keys:
  - { display_name: pk, provider: openai, api_key: sk-x, api_base: "http://127.0.0.1:9/v1" }
models:
  - { display_name: gpt-4o, provider_key: pk, model_name: gpt-4o-upstream }
api_keys:
  - { display_name: caller, key_hash: "${'a'.repeat(64)}", allowed_models: ["*"] }
`;
const CHANGED = GOOD.replace('gpt-4o-upstream', 'gpt-4o-upstream-2');
const BAD_MODEL = GOOD.replace('provider_key: pk', 'provider_key: nope');

/** The members of the `/status/config` body these tests read. */
interface ConfigStatus {
  state: string;
  source: { observed_at?: string };
  applied: { apply_seq: number; applied_at: string; resource_counts: Record<string, number> };
  last_reload: { successful: boolean };
  last_failure: { last_error_kind: string; last_error: string };
  rejected: { resource_kind: string; resource_id: string }[];
}

/** A file-mode gateway on the test platform, its clock stepped by hand. */
function fileGateway(text: string) {
  const platform: TestPlatform = testPlatform({});
  platform.fileMap.set(RES, text);
  const c = loadConfig(
    '/srv/config.yaml',
    `resources_file: ${RES}\nproxy: { addr: "127.0.0.1:0" }\nadmin: { enabled: false }\n`,
    {},
  );
  if (!c.ok) throw new Error(c.report.format());
  let now = T0;
  const g = createGateway(c.config, platform, { clock: () => now });
  const status = () => configStatusBody(g.gw.facts, g.gw.now()) as unknown as ConfigStatus;
  const msgs = () => platform.logs.map((l) => l.msg);
  return { ...g, platform, status, msgs, step: (secs: number) => void (now += secs * 1000) };
}

describe('FileSource as the ConfigSource of file mode', () => {
  test('createGateway gives file mode a FileSource: read whole before binding, reloaded on SIGHUP', () => {
    const { source } = fileGateway(GOOD);
    assert.ok(source instanceof FileSource);
    assert.equal(typeof source.load, 'function');
    assert.equal((source as { localRestore?: unknown }).localRestore, undefined);
  });

  test('load(): applies, logs the loaded line, resolves firstApplied; times come from the injected clock', async () => {
    const { source, status, platform, gw } = fileGateway(GOOD);
    assert.deepEqual(await source.load!(), { ok: true, resources: 3 });
    await source.firstApplied;
    const loaded = platform.logs.find((l) => l.msg === MSG.resourcesLoaded);
    assert.deepEqual({ file: loaded?.file, resources: loaded?.resources }, { file: RES, resources: 3 });
    const body = status();
    assert.equal(body.state, 'synced');
    assert.equal(body.applied.apply_seq, 1);
    assert.equal(body.applied.applied_at, '2026-03-01T10:00:00Z');
    assert.equal(body.source.observed_at, '2026-03-01T10:00:00Z');
    assert.ok(gw.snapshot);
  });

  test('load() of a bad file: the report, nothing logged as loaded, rejected[] names the row by identity', async () => {
    const { source, status, msgs } = fileGateway(BAD_MODEL);
    const r = await source.load!();
    assert.equal(r.ok, false);
    assert.match(
      r.ok ? '' : r.message,
      /^resources file \/srv\/resources\.yaml: 1 error\(s\):\n {2}- models\[0\] \("gpt-4o"\): `provider_key` references unknown provider key "nope"/,
    );
    assert.ok(!msgs().includes(MSG.resourcesLoaded));
    const body = status();
    assert.equal(body.state, 'never_loaded');
    assert.equal(body.last_failure.last_error_kind, 'validate');
    assert.deepEqual(body.rejected.map((x) => [x.resource_kind, x.resource_id]), [
      ['models', uuidV5('models/gpt-4o')],
    ]);
  });

  test('reload() that applies: logged with the new generation; synced', async () => {
    const { source, status, msgs, platform, step } = fileGateway(GOOD);
    await source.load!();
    platform.fileMap.set(RES, CHANGED);
    step(60);
    await source.reload();
    assert.deepEqual(msgs().slice(-2), ['reloading the resources file', MSG.fileReloaded]);
    assert.equal(platform.logs.at(-1)?.generation, 2);
    const body = status();
    assert.equal(body.state, 'synced');
    assert.equal(body.applied.applied_at, '2026-03-01T10:01:00Z');
    assert.equal(body.last_reload.successful, true);
  });

  test('reload() that fails: WARN, the previous snapshot keeps serving, out_of_sync, then synced again', async () => {
    const { source, status, msgs, platform, gw } = fileGateway(GOOD);
    await source.load!();
    const served = gw.snapshot;
    platform.fileMap.set(RES, BAD_MODEL);
    await source.reload();
    assert.equal(msgs().at(-1), MSG.fileReloadFailed);
    assert.equal(gw.snapshot, served);
    let body = status();
    assert.equal(body.state, 'out_of_sync');
    assert.equal(body.applied.apply_seq, 1);
    assert.equal(body.last_reload.successful, false);
    assert.equal(body.rejected.length, 1);
    platform.fileMap.set(RES, GOOD);
    await source.reload();
    body = status();
    assert.equal(body.state, 'synced');
    assert.deepEqual(body.rejected, []);
    assert.equal(body.last_failure.last_error_kind, 'validate'); // sticky
  });

  test('reload() refuses a file missing a collection that served; `[]` removes it on purpose', async () => {
    const { source, status, platform, gw } = fileGateway(GOOD);
    await source.load!();
    const served = gw.snapshot;
    platform.fileMap.set(RES, GOOD.replace(/api_keys:\n.*\n/, ''));
    await source.reload();
    assert.equal(gw.snapshot, served);
    assert.match(status().last_failure.last_error, /`api_keys` \(1 served\) absent from the new file/);
    platform.fileMap.set(RES, GOOD.replace(/api_keys:\n.*\n/, 'api_keys: []\n'));
    await source.reload();
    assert.notEqual(gw.snapshot, served);
    assert.equal(status().applied.resource_counts.api_keys, undefined);
  });

  test('reloads run one after another: the second starts after the first has logged its outcome', async () => {
    const { source, msgs, platform } = fileGateway(GOOD);
    await source.load!();
    platform.fileMap.set(RES, CHANGED);
    await Promise.all([source.reload(), source.reload()]);
    assert.deepEqual(msgs().slice(-4), [
      'reloading the resources file',
      MSG.fileReloaded,
      'reloading the resources file',
      MSG.fileReloaded,
    ]);
  });
});

describe('FileSource: where a large file was parsed', () => {
  const big = withYamlStage(bigResources('http://127.0.0.1:9', 1400, 'a'));
  const gatewayOn = (platform: TestPlatform, logLevel: string) => {
    platform.fileMap.set(RES, big);
    const c = loadConfig(
      '/srv/config.yaml',
      `resources_file: ${RES}\nproxy: { addr: "127.0.0.1:0" }\nadmin: { enabled: false }\n` +
        `observability: { log_level: ${logLevel} }\n`,
      {},
    );
    if (!c.ok) throw new Error(c.report.format());
    return createGateway(c.config, platform).source;
  };

  test('a worker that fails: the file still applies, with a WARN naming why, then DEBUG says the event loop', async () => {
    const platform = testPlatform({ CALLER_KEY: 'sk-x' });
    platform.parseYamlOffThread = () => {
      throw new Error('Cannot find module yaml-thread.js');
    };
    const source = gatewayOn(platform, 'debug');
    assert.ok(big.length >= OFF_THREAD_MIN_BYTES, 'past the off-thread threshold');
    assert.deepEqual(await source.load!(), { ok: true, resources: 2803 });
    const [warn, parsed] = platform.logs.filter((l) => String(l.msg).startsWith('resources file parsed'));
    assert.deepEqual(
      { level: warn?.level, msg: warn?.msg, file: warn?.file, error: warn?.error },
      {
        level: 'WARN',
        msg: 'resources file parsed on the event loop: the YAML worker thread failed',
        file: RES,
        error: 'Cannot find module yaml-thread.js',
      },
    );
    assert.deepEqual(
      { level: parsed?.level, msg: parsed?.msg, bytes: parsed?.bytes, parsed_on: parsed?.parsed_on },
      { level: 'DEBUG', msg: 'resources file parsed', bytes: big.length, parsed_on: 'event loop' },
    );
  });

  test('at the default level only the WARN shows', async () => {
    const platform = testPlatform({ CALLER_KEY: 'sk-x' });
    platform.parseYamlOffThread = () => {
      throw new Error('gone');
    };
    const source = gatewayOn(platform, 'info');
    await source.load!();
    assert.deepEqual(
      platform.logs.filter((l) => String(l.msg).startsWith('resources file parsed')).map((l) => l.level),
      [
        'WARN',
      ],
    );
  });
});

describe('FileSource: a reload keeps what did not change', () => {
  const hash = (c: string) => c.repeat(64);
  const keysFile = (rows: string[]) => GOOD.replace(/api_keys:\n.*\n/, `api_keys:\n${rows.join('\n')}\n`);
  const same = `  - { display_name: same, key_hash: "${hash('b')}", allowed_models: [gpt-4o] }`;
  const named = `  - { display_name: renamed, key_hash: "${hash('c')}", allowed_models: [gpt-4o] }`;
  const limited = `  - { display_name: limited, key_hash: "${hash('d')}", allowed_models: [gpt-4o] }`;

  test('an unchanged plain key row keeps its resource; a changed or richer one is read anew, equal to a fresh load', async () => {
    const before = [same, named, limited];
    const after = [
      same,
      named.replace('[gpt-4o]', '[gpt-4o, "*"]'),
      limited.replace(' }', ', team_id: a }'),
    ];
    const { source, gw, platform } = fileGateway(keysFile(before));
    assert.equal((await source.load!()).ok, true);
    const old = new Map(gw.snapshot!.apiKeys.list().map((k) => [k.display_name, k]));
    platform.fileMap.set(RES, keysFile(after));
    await source.reload();
    assert.equal(platform.logs.at(-1)?.msg, MSG.fileReloaded);
    const now = new Map(gw.snapshot!.apiKeys.list().map((k) => [k.display_name, k]));
    assert.equal(now.get('same'), old.get('same'), 'the unchanged row keeps the serving resource');
    assert.notEqual(now.get('renamed'), old.get('renamed'));
    assert.notEqual(now.get('limited'), old.get('limited'));
    const fresh = fileGateway(keysFile(after));
    await fresh.source.load!();
    assert.deepEqual(gw.snapshot!.resources.api_keys, fresh.gw.snapshot!.resources.api_keys);
    assert.equal(JSON.stringify(gw.snapshot!.resources), JSON.stringify(fresh.gw.snapshot!.resources));
  });

  test("a row that goes from the schema's reading to a plain one is read anew", async () => {
    const rich = same.replace(' }', ', team_id: a }');
    const { source, gw, platform } = fileGateway(keysFile([rich]));
    await source.load!();
    const old = gw.snapshot!.apiKeys.list()[0]!;
    platform.fileMap.set(RES, keysFile([same]));
    await source.reload();
    const now = gw.snapshot!.apiKeys.list()[0]!;
    assert.notEqual(now, old);
    const fresh = fileGateway(keysFile([same]));
    await fresh.source.load!();
    assert.deepEqual(now, fresh.gw.snapshot!.apiKeys.list()[0]);
    assert.deepEqual(Object.keys(now), Object.keys(fresh.gw.snapshot!.apiKeys.list()[0]!));
  });

  test('a reload that fails keeps the serving resources for the next one', async () => {
    const { source, gw, platform } = fileGateway(keysFile([same]));
    await source.load!();
    const old = gw.snapshot!.apiKeys.list()[0];
    platform.fileMap.set(RES, BAD_MODEL);
    await source.reload();
    platform.fileMap.set(RES, keysFile([same]));
    await source.reload();
    assert.equal(platform.logs.at(-1)?.msg, MSG.fileReloaded);
    assert.equal(gw.snapshot!.apiKeys.list()[0], old);
  });
});

describe("loadResourcesFile: a large file's pieces are consumed", () => {
  test('the pieces array is emptied once parsed, and the snapshot is the one the whole text gives', async () => {
    const pieces = GOOD.split(/(?<=\n)/);
    assert.ok(pieces.length > 3);
    const r = await loadResourcesFile(RES, pieces, {});
    assert.equal(r.ok, true);
    assert.deepEqual(pieces, []);
    const whole = await loadResourcesFile(RES, GOOD, {});
    assert.ok(r.ok && whole.ok);
    assert.equal(JSON.stringify(r.snapshot.resources), JSON.stringify(whole.snapshot.resources));
  });
});

describe('the etcd sources on SIGHUP', () => {
  test('the watch source logs that SIGHUP is ignored and changes nothing', async () => {
    const platform = testPlatform({});
    const c = loadConfig(
      '/c.yaml',
      'etcd: { endpoints: ["http://127.0.0.1:9"] }\nproxy: { addr: ":0" }\nadmin: { enabled: false }\n',
      {},
    );
    if (!c.ok) throw new Error(c.report.format());
    const { source } = createGateway(c.config, platform);
    assert.equal(source.load, undefined);
    const booted = platform.logs.length;
    await source.reload();
    assert.deepEqual(platform.logs.slice(booted).map((l) => l.msg), [MSG.sighupIgnoredEtcd]);
  });
});

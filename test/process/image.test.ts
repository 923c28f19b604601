// The container image (docs/deploy.md "Container image"), built from the Containerfile by deploy/image.mjs
// with buildah and run with podman, as an operator would: only the executable, its C libraries, CA
// certificates and a passwd entry inside; labelled with the version and revision; uid 10001 on a read-only
// root; ready on /readyz; a chat through it; `podman stop` drains (the drain report in its log) and exits 0
// within the grace period; in etcd mode the snapshot cache is written to its volume.
// The test brings its own containers.conf and storage (in a temporary folder), so it leaves no state; this
// sandbox needs runc, cgroupfs and no default ulimits. A missing tool fails the test with install advice.
// Run: node --import tsx --test test/process/image.test.ts
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MSG } from '../../src/observability/messages.ts';
import { seeder } from '../support/etcd-gateway.ts';
import { type EtcdServer, startEtcd } from '../support/etcd.ts';
import { type GatewayProcess, spawnGateway } from '../support/process.ts';
import { until } from '../support/until.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const DEMO_KEY = 'sk-sluice-demo';
const GRACE_SECS = 20;
const TOOLS = ['buildah', 'podman', 'runc'];
const INSTALL = 'apt-get install -y buildah podman runc (.ci/run does)';

let state: string;
let env: Record<string, string>;
const tag = `localhost/sluice-test:${randomBytes(4).toString('hex')}`;

function podman(...args: string[]): string {
  const r = spawnSync('podman', args, { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, `podman ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

before(() => {
  for (const t of TOOLS) {
    const r = spawnSync(t, ['--version'], { stdio: 'ignore' });
    if (r.error || r.status !== 0) throw new Error(`${t} is not installed: ${INSTALL}`);
  }
  state = mkdtempSync(join(tmpdir(), 'sluice-image-test-'));
  writeFileSync(
    join(state, 'containers.conf'),
    `[containers]\ndefault_ulimits = []\n[engine]\ncgroup_manager = "cgroupfs"\nruntime = "runc"\ntmp_dir = "${state}/tmp"\n`,
  );
  writeFileSync(
    join(state, 'storage.conf'),
    `[storage]\ndriver = "vfs"\ngraphroot = "${state}/graph"\nrunroot = "${state}/run"\n`,
  );
  env = { CONTAINERS_CONF: join(state, 'containers.conf'), CONTAINERS_STORAGE_CONF: join(state, 'storage.conf') };
  const r = spawnSync(process.execPath, ['deploy/image.mjs', '--tag', tag], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 180_000,
  });
  assert.equal(r.status, 0, `npm run image failed:\n${r.stderr}`);
});

after(() => {
  if (!state) return;
  spawnSync('podman', ['rm', '--all', '--force'], { env: { ...process.env, ...env }, stdio: 'ignore' });
  spawnSync('podman', ['rmi', '--all', '--force'], { env: { ...process.env, ...env }, stdio: 'ignore' });
  rmSync(state, { recursive: true, force: true });
});

/** Run the image like a Kubernetes pod would: read-only root without tmpfs, config read-only, host ports. */
function runImage(name: string, config: string, files: Record<string, string>, extra: string[] = []) {
  return spawnGateway({
    executable: 'podman',
    config,
    files,
    env,
    args: [
      'run',
      '--name',
      name,
      '--network',
      'host',
      '--read-only',
      '--read-only-tmpfs=false',
      '-v',
      '{{dir}}:/etc/sluice:ro,U',
      ...extra,
      tag,
    ],
  });
}

function chat(g: GatewayProcess, content: string): Promise<Response> {
  return fetch(g.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { authorization: `Bearer ${DEMO_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'echo', messages: [{ role: 'user', content }] }),
  });
}

describe('the container image', () => {
  test('labels, user and contents: the executable, its libraries, CA certificates, passwd; nothing else', () => {
    const labels = JSON.parse(podman('image', 'inspect', '--format', '{{json .Labels}}', tag)) as Record<
      string,
      string
    >;
    assert.equal(labels['org.opencontainers.image.version'], VERSION);
    const head = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
    assert.match(labels['org.opencontainers.image.revision']!, new RegExp(`^${head}(-dirty)?$`));
    assert.equal(podman('image', 'inspect', '--format', '{{.Config.User}}', tag).trim(), '10001:10001');
    const id = podman('create', tag).trim();
    const tar = spawnSync('sh', ['-c', `podman export ${id} | tar -t`], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
      maxBuffer: 1 << 20,
    });
    podman('rm', id);
    const files = tar.stdout.split('\n').filter((f) => f && !f.endsWith('/'));
    const unexpected = files.filter((f) =>
      !/^(usr\/local\/bin\/sluice|etc\/(passwd|group|nsswitch\.conf|ssl\/certs\/ca-certificates\.crt)|lib(64)?\/.*\.so(\.\d+)*|(etc\/(hosts|hostname|resolv\.conf)|run\/.*))$/
        .test(f)
    );
    assert.deepEqual(unexpected, [], 'only the executable, libraries, certificates and user entries');
    assert.ok(files.includes('usr/local/bin/sluice'));
    assert.ok(files.some((f) => /^lib.*\/libc\.so\.6$/.test(f)), 'the C library');
    assert.equal(files.some((f) => /(^|\/)(sh|bash|busybox)$/.test(f)), false, 'no shell');
  });

  test('the example config: ready, a chat, non-root, read-only root; `podman stop` drains and exits 0', async () => {
    const example = (n: string) => readFileSync(join(ROOT, 'examples', n), 'utf8');
    const config = example('config.yaml')
      .replace('127.0.0.1:3000', '127.0.0.1:{{proxy}}')
      .replace('127.0.0.1:3001', '127.0.0.1:{{admin}}')
      .replace('127.0.0.1:9090', '127.0.0.1:{{status}}')
      .replace('min_drain_secs: 5', 'min_drain_secs: 1');
    const name = `sluice-file-${randomBytes(3).toString('hex')}`;
    const g = await runImage(name, config, { 'resources.yaml': example('resources.yaml') });
    try {
      await g.waitReady('/readyz', 'proxy', 60_000);
      const r = await chat(g, 'through the image');
      assert.equal(r.status, 200);
      assert.match(await r.text(), /through the image/);

      const pid = podman('inspect', '--format', '{{.State.Pid}}', name).trim();
      const uid = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^Uid:\s+(\d+)/m)?.[1];
      assert.equal(uid, '10001', 'runs as the image user');
      assert.equal(podman('inspect', '--format', '{{.HostConfig.ReadonlyRootfs}}', name).trim(), 'true');

      const t0 = Date.now();
      podman('stop', '--time', String(GRACE_SECS), name);
      assert.equal(await g.waitForExit(GRACE_SECS * 1000), 0, 'podman run reports the container exit code');
      assert.ok(Date.now() - t0 < GRACE_SECS * 1000, 'exited within the grace period, not killed');
      const report = await g.waitForLog(MSG.drainReport, 1000);
      assert.equal(report.complete, true);
      assert.ok(g.logs.some((l) => l.msg === MSG.shutDownCleanly));
    } finally {
      g.kill();
    }
  });

  describe('in etcd mode', () => {
    let etcd: EtcdServer;
    before(async () => {
      etcd = await startEtcd();
    });
    after(() => etcd?.stop());

    test('the snapshot cache is written to its volume under a read-only root', async () => {
      const P = '/image';
      const s = seeder(etcd.endpoint);
      await s.put(`${P}/provider_keys/pk1`, { display_name: 'offline', provider: 'echo' });
      await s.put(`${P}/models/m1`, {
        display_name: 'echo',
        provider: 'echo',
        model_name: 'echo',
        provider_key_id: 'pk1',
      });
      const hash = createHash('sha256').update(DEMO_KEY).digest('hex');
      await s.put(`${P}/api_keys/k1`, { display_name: 'demo', key_hash: hash, allowed_models: ['*'] });
      const cacheDir = mkdtempSync(join(state, 'cache-'));
      const config = `etcd: { endpoints: ["${etcd.endpoint}"], prefix: ${P} }
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
observability: { log_format: json, metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
managed: { snapshot_cache_path: /var/lib/sluice/snapshot.json }
`;
      const name = `sluice-etcd-${randomBytes(3).toString('hex')}`;
      const g = await runImage(name, config, {}, ['-v', `${cacheDir}:/var/lib/sluice:U`]);
      try {
        await g.waitReady('/readyz', 'proxy', 60_000);
        assert.equal((await chat(g, 'from etcd')).status, 200);
        await until(() => existsSync(join(cacheDir, 'snapshot.json')), 10_000, 'the snapshot cache on the volume');
        podman('stop', '--time', String(GRACE_SECS), name);
        assert.equal(await g.waitForExit(GRACE_SECS * 1000), 0);
      } finally {
        g.kill();
      }
    });
  });
});

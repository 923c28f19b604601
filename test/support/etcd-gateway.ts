// In-process etcd-mode gateways for tests: a Gateway on the test platform (in-memory files, captured
// logs) with the etcd source started against a real etcd, plus a latch that wakes on every apply.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.ts';
import { Gateway } from '../../src/gateway.ts';
import { EtcdClient, type EtcdFetch } from '../../src/sources/etcd/client.ts';
import { createEtcdSource, type EtcdConfigSource, type EtcdSourceOptions } from '../../src/sources/etcd/source.ts';
import { freePort } from './etcd.ts';
import { type TestPlatform, testPlatform } from './platform.ts';

export function etcdConfigYaml(endpoint: string, prefix: string, extra = '', etcdBlock?: string): string {
  return `
${etcdBlock ?? `etcd: { endpoints: ["${endpoint}"], prefix: "${prefix}" }`}
proxy: { addr: "127.0.0.1:0" }
admin: { addr: "127.0.0.1:0", admin_keys: [admin-secret-1] }
observability: { metrics: { prometheus: { addr: "127.0.0.1:0" } } }
shutdown: { min_drain_secs: 0 }
${extra}`;
}

export interface EtcdTestGateway {
  gw: Gateway;
  platform: TestPlatform;
  source: EtcdConfigSource;
  /** Resolves once `pred` holds (checked after every apply and every 20 ms); rejects after `ms`. */
  until(pred: () => boolean, what: string, ms?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface EtcdTestGatewayOptions {
  endpoint: string;
  prefix: string;
  /** Extra config.yaml text (e.g. `managed: { snapshot_cache_path: /c/cache.json }`). */
  extra?: string;
  /** Replaces the whole `etcd:` line of the config. */
  etcdBlock?: string;
  env?: Record<string, string>;
  /** Start from this platform (to share its in-memory files with a previous gateway). */
  platform?: TestPlatform;
  fetch?: EtcdFetch;
  source?: Omit<EtcdSourceOptions, 'onCommit' | 'fetch'>;
  /** Do not call source.start(). */
  noStart?: boolean;
}

export function startEtcdGateway(o: EtcdTestGatewayOptions): EtcdTestGateway {
  const platform = o.platform ?? testPlatform(o.env ?? {});
  if (o.platform && o.env) Object.assign(platform.env, o.env);
  const c = loadConfig('/t/config.yaml', etcdConfigYaml(o.endpoint, o.prefix, o.extra, o.etcdBlock), platform.env);
  if (!c.ok) throw new Error(c.report.format());
  const gw = new Gateway(c.config, platform);
  const waiters = new Set<() => void>();
  const wake = (): void => {
    for (const w of [...waiters]) w();
  };
  const source = createEtcdSource(gw, {
    backoff: { initialMs: 50, maxMs: 400 },
    ...o.source,
    ...(o.fetch ? { fetch: o.fetch } : {}),
    onCommit: wake,
  });
  if (!o.noStart) source.start();
  return {
    gw,
    platform,
    source,
    until(pred, what, ms = 10_000) {
      if (pred()) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (!pred()) return;
          cleanup();
          resolve();
        };
        const poll = setInterval(check, 20);
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`timed out after ${ms} ms waiting for ${what}; facts: ${JSON.stringify(gw.facts)}`));
        }, ms);
        const cleanup = (): void => {
          waiters.delete(check);
          clearInterval(poll);
          clearTimeout(timer);
        };
        waiters.add(check);
      });
    },
    stop: () => source.stop(),
  };
}

/** A client for seeding etcd in tests (JSON values are stringified). */
export function seeder(endpoint: string): {
  client: EtcdClient;
  put(key: string, value: unknown): Promise<number>;
  del(key: string): Promise<number>;
} {
  // Generous bounds: the seeder is scaffolding, and a freshly restarted etcd on a loaded machine can take
  // longer than the client's defaults to answer its first write.
  const client = new EtcdClient({ endpoints: [endpoint], dialTimeoutMs: 20_000, requestTimeoutMs: 20_000 });
  return {
    client,
    put: async (key, value) =>
      (await client.put(key, typeof value === 'string' ? value : JSON.stringify(value))).revision,
    del: async (key) => (await client.delete(key)).revision,
  };
}

/** A canonical provider key / model / api key trio under `prefix`, as etcd rows. */
export function trio(prefix: string, apiBase: string, keyHash: string): [string, unknown][] {
  return [
    [`${prefix}/provider_keys/pk1`, {
      display_name: 'mock',
      provider: 'openai',
      api_key: 'sk-upstream-SECRET-value',
      api_base: apiBase,
    }],
    [`${prefix}/models/m1`, { display_name: 'gpt-test', model_name: 'gpt-upstream', provider_key_id: 'pk1' }],
    [`${prefix}/api_keys/k1`, { display_name: 'caller', key_hash: keyHash, allowed_models: ['*'] }],
  ];
}

// -- a TLS-only etcd (private CA, client certificates required), for the etcd.tls settings -------------

export interface TlsEtcd {
  endpoint: string;
  /** PEM files: `ca.pem`, `client.pem`, `client.key` (and the server's). */
  dir: string;
  fetch: EtcdFetch;
  stop(): Promise<void>;
}

function openssl(args: string[], cwd: string): void {
  const r = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    throw new Error(`openssl ${args[0]} failed (is openssl installed?): ${r.error?.message ?? r.stderr}`);
  }
}

/** A throwaway CA, and server and client certificates for 127.0.0.1 signed by it. */
export function makeCertificates(dir: string): void {
  writeFileSync(
    join(dir, 'ext.cnf'),
    '[req]\ndistinguished_name=dn\n[dn]\n[ext]\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' +
      'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n',
  );
  openssl([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
    '-days',
    '2',
    '-subj',
    '/CN=sluice-test-ca',
  ], dir);
  for (const who of ['server', 'client']) {
    openssl([
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      `${who}.key`,
      '-out',
      `${who}.csr`,
      '-subj',
      `/CN=${who}`,
    ], dir);
    openssl([
      'x509',
      '-req',
      '-in',
      `${who}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${who}.pem`,
      '-days',
      '2',
      '-extfile',
      'ext.cnf',
      '-extensions',
      'ext',
    ], dir);
  }
}

export async function startTlsEtcd(): Promise<TlsEtcd> {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-etcd-tls-'));
  makeCertificates(dir);
  const [client, peer] = [await freePort(), await freePort()];
  const endpoint = `https://127.0.0.1:${client}`;
  const proc = spawn('etcd', [
    '--name',
    'tls',
    '--data-dir',
    join(dir, 'data'),
    '--listen-client-urls',
    endpoint,
    '--advertise-client-urls',
    endpoint,
    '--listen-peer-urls',
    `http://127.0.0.1:${peer}`,
    '--initial-advertise-peer-urls',
    `http://127.0.0.1:${peer}`,
    '--initial-cluster',
    `tls=http://127.0.0.1:${peer}`,
    '--cert-file',
    join(dir, 'server.pem'),
    '--key-file',
    join(dir, 'server.key'),
    '--trusted-ca-file',
    join(dir, 'ca.pem'),
    '--client-cert-auth',
    '--logger',
    'zap',
    '--log-level',
    'error',
  ], { stdio: 'ignore' });
  const kill = (): void => void proc.kill('SIGKILL');
  process.once('exit', kill);
  // The Node runtime's own TLS fetch (imported here only, so the in-process tests do not load the runtime).
  const { nodeFetchWithTls } = await import('../../runtimes/node.ts');
  const tlsFetch = nodeFetchWithTls({
    ca: readFileSync(join(dir, 'ca.pem')),
    cert: readFileSync(join(dir, 'client.pem')),
    key: readFileSync(join(dir, 'client.key')),
  });
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const r = await tlsFetch(`${endpoint}/v3/maintenance/status`, {
        method: 'POST',
        body: '{}',
        signal: AbortSignal.timeout(1000),
      });
      await r.text();
      if (r.status === 200) break;
    } catch {
      // not up yet
    }
    if (proc.exitCode !== null || Date.now() > deadline) {
      kill();
      throw new Error('TLS etcd did not start');
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    endpoint,
    dir,
    fetch: (url, init) => tlsFetch(url, init),
    async stop() {
      process.removeListener('exit', kill);
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        await new Promise((r) => proc.once('exit', r));
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

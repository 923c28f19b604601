// How the etcd watch source reaches etcd (docs/etcd.md "How it reads"): the password from its variable, the
// TLS material from its files through the platform's TLS fetch, and the supervisor's timeouts. Anything
// missing throws a message naming the setting (never a secret); the source retries it on its backoff.
import type { Config } from '../../config/schema.ts';
import type { Platform } from '../../platform.ts';
import type { EtcdClientOptions, EtcdFetch } from './client.ts';

/** What reaching etcd reads from the platform. */
export type EtcdPlatform = Pick<Platform, 'files' | 'env' | 'fetchWithTls' | 'name'>;

const NO_TIMEOUT_MS = 2 ** 31 - 1;

/** The client options for `etcd` (config.yaml); `fetch` replaces the transport (TLS settings then ignored). */
export async function clientOptions(
  c: Config['etcd'],
  platform: EtcdPlatform,
  fetch?: EtcdFetch,
): Promise<EtcdClientOptions> {
  let password: string | undefined;
  if (c.password_env) {
    password = platform.env[c.password_env];
    if (!password) {
      throw new Error(
        `etcd.password_env: environment variable ${c.password_env} is ${password === undefined ? 'not set' : 'empty'}`,
      );
    }
  }
  const transport = fetch ? { fetch, tls: false } : await tlsTransport(c.tls, platform);
  return {
    endpoints: c.endpoints,
    ...(c.user !== undefined ? { user: c.user } : {}),
    ...(password !== undefined ? { password } : {}),
    ...(transport.fetch ? { fetch: transport.fetch } : {}),
    tls: transport.tls,
    dialTimeoutMs: c.dial_timeout_ms || NO_TIMEOUT_MS,
    requestTimeoutMs: c.request_timeout_ms || NO_TIMEOUT_MS,
  };
}

/** The fetch to talk to etcd with: the global one, or the platform's TLS fetch with the configured files. */
async function tlsTransport(
  t: Config['etcd']['tls'],
  platform: EtcdPlatform,
): Promise<{ fetch?: EtcdFetch; tls: boolean }> {
  if (!t) return { tls: false };
  const paths = { ca: t.ca_cert_file, cert: t.client_cert_file, key: t.client_key_file };
  if (!paths.ca && !paths.cert && !paths.key) return { tls: true };
  if (Boolean(paths.cert) !== Boolean(paths.key)) {
    throw new Error('etcd.tls: client_cert_file and client_key_file must be given together');
  }
  const files = platform.files;
  if (!files) {
    throw new Error('etcd.tls: reading certificate files needs file access, which this runtime does not have');
  }
  const read = async (path: string | undefined, field: string): Promise<Uint8Array | undefined> => {
    if (!path) return undefined;
    try {
      return await files.read(path);
    } catch (e) {
      throw new Error(`etcd.tls.${field}: cannot read ${path}: ${(e as Error).message}`);
    }
  };
  const material = {
    ca: await read(paths.ca, 'ca_cert_file'),
    cert: await read(paths.cert, 'client_cert_file'),
    key: await read(paths.key, 'client_key_file'),
  };
  const withTls = platform.fetchWithTls;
  if (!withTls) {
    throw new Error(`etcd.tls: the ${platform.name} runtime cannot use a private CA or client certificate for etcd`);
  }
  const fetch: EtcdFetch = withTls({
    ...(material.ca ? { ca: material.ca } : {}),
    ...(material.cert ? { cert: material.cert } : {}),
    ...(material.key ? { key: material.key } : {}),
  });
  return { fetch, tls: true };
}

/** Endpoint URLs as logged: userinfo in one would be a credential. */
export function loggedEndpoints(endpoints: readonly string[]): string[] {
  return endpoints.map((e) => e.replace(/\/\/[^@/]*@/, '//'));
}

export function positiveInt(v: string | undefined): number | undefined {
  if (v === undefined || !/^\d+$/.test(v.trim())) return undefined;
  const n = Number(v.trim());
  return n > 0 ? n : undefined;
}

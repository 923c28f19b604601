// Bun entrypoint: `bun runtimes/bun.ts --config x`. Plain HTTP/1.1 listeners are `Bun.serve`; a listener with
// TLS or HTTP/2 (which `Bun.serve` does not offer with a GOAWAY at drain start) is Bun's node:http2 (README
// "Runtimes"; the measurements: docs/performance.md "`Bun.serve` bound"). The upstream
// client is Bun's native fetch, since undici fails under load on Bun; it has no idle-pool knob, so
// `upstream.pool_idle_timeout_secs` does not apply here (docs/configuration.md "upstream"). The first import
// lifts Bun's cap on fetch requests in flight before anything else runs (it may restart the process).
import './bun-upstream-cap.ts';
import { readFileSync } from 'node:fs';
import * as tlsModule from 'node:tls';
import { main } from '../src/main.ts';
import { keyMapsByString } from '../src/util/sharded-map.ts';
import type { KeyTls, Platform, UpstreamTls } from '../src/platform.ts';
import { lazyRedisClient } from './redis-lazy.ts';
import { fetchUpstream, type KeyFetch, KeyTlsPools } from '../src/upstream-fetch.ts';
import { batchedSink } from '../src/observability/log-sink.ts';
import { nodeFiles } from './node-files.ts';
import { bunServeListen } from './bun-listener.ts';
import { caBeyond, ownIds } from './bun-tls.ts';
import { bunConnectWebSocket } from './bun-websocket.ts';
import { nodeListen } from './node-listener.ts';
import { yamlThread } from './yaml-thread.ts';
import { nodeSha256Stream } from './node-sha256.ts';
import { nodeGzip } from './node-gzip.ts';

export function bunPlatform(): Platform {
  const logs = batchedSink((text) => void process.stderr.write(text), setImmediate);
  process.on('exit', () => logs.flush());
  return {
    name: 'bun',
    // Bun's node:http announces `keepAliveTimeout` but does not close the connection when it runs out.
    listen: (spec, fetch) =>
      spec.tls || spec.http2 ? nodeListen(spec, fetch, { enforceKeepAliveTimeout: true }) : bunServeListen(spec, fetch),
    onSignal: (signal, handler) => void process.on(signal, handler),
    upstream: (o) => fetchUpstream(upstreamTlsFetch(o.tls), o),
    files: nodeFiles,
    parseYamlOffThread: yamlThread({ keepWorker: false }),
    sha256Stream: nodeSha256Stream,
    gzip: nodeGzip,
    redis: lazyRedisClient,
    connectWebSocket: bunConnectWebSocket,
    env: process.env,
    writeLog: (line) => logs.write(line),
    writeOut: (text) => void process.stdout.write(text),
    // Bun's fetch takes the TLS material per request.
    fetchWithTls: (tls) => {
      const pem = (b: Uint8Array | undefined) => (b ? new TextDecoder().decode(b) : undefined);
      const options = { ca: pem(tls.ca), cert: pem(tls.cert), key: pem(tls.key) };
      return ((input: RequestInfo | URL, init?: RequestInit) =>
        fetch(input, { ...init, tls: options } as RequestInit)) as typeof fetch;
    },
    exit: (code) => {
      logs.flush();
      process.exit(code);
    },
  };
}

/**
 * Bun's fetch with `upstream.tls` and a provider key's `tls` on top of it, which it takes per request (the
 * options built once per distinct key TLS). A `ca` replaces Bun's roots, so the default roots and
 * NODE_EXTRA_CA_CERTS (which Bun reads into its roots only) go in with the configured CAs; and since Bun parses
 * a request's `ca` on every fetch, it is handed one only for certificates its own roots lack (`SSL_CERT_FILE`
 * naming the bundle NODE_EXTRA_CA_CERTS names too, as on Debian images, adds none).
 */
function upstreamTlsFetch(tls: UpstreamTls | undefined): KeyFetch {
  const roots = bunRoots();
  const own = ownIds(roots);
  const trusted = roots.length > 0 ? roots : [...tlsModule.rootCertificates, ...nodeExtraCa()];
  const options = (key?: KeyTls) => {
    const pem = (b: Uint8Array | undefined) => (b ? new TextDecoder().decode(b) : undefined);
    const configured = [pem(tls?.ca), key?.ca_cert?.trim() || undefined].filter((p): p is string => !!p);
    const extra = caBeyond(own, configured);
    return {
      ...(extra.length > 0 ? { ca: [...trusted, ...extra] } : {}),
      ...(tls?.cert ? { cert: pem(tls.cert), key: pem(tls.key) } : {}),
      rejectUnauthorized: tls?.verify !== false && key?.verify !== false,
    };
  };
  const base = tls ? options() : undefined;
  const keyed = new KeyTlsPools(options);
  return (url, init, key) => {
    // Bun reads a request's `tls` (a whole CA list under SSL_CERT_FILE) on every fetch: only https needs it.
    if (!/^https:/i.test(url)) return fetch(url, init);
    const t = key ? keyed.get(key) : base;
    return fetch(url, t ? { ...init, tls: t } as RequestInit : init);
  };
}

/**
 * The certificates Bun's fetch verifies with when it is handed no `ca` (its bundled roots, NODE_EXTRA_CA_CERTS,
 * the system's under `--use-system-ca`); none where this Bun cannot list them, so every configured CA is handed on.
 */
function bunRoots(): string[] {
  const list = (tlsModule as { getCACertificates?: (kind: string) => string[] }).getCACertificates;
  try {
    return list ? list.call(tlsModule, 'default') : [];
  } catch {
    return [];
  }
}

/** The NODE_EXTRA_CA_CERTS file's text, if set and readable (Bun warned at start otherwise). */
function nodeExtraCa(): string[] {
  const file = process.env.NODE_EXTRA_CA_CERTS;
  try {
    return file ? [readFileSync(file, 'utf8')] : [];
  } catch {
    return [];
  }
}

// The string table that number keys keep Map keys out of is V8's (docs/performance.md "Configuration at scale").
keyMapsByString();
const platform = bunPlatform();
main(platform, process.argv.slice(2)).then((code) => platform.exit(code), (e) => {
  process.stderr.write(`sluice: fatal: ${(e as Error)?.stack ?? String(e)}\n`);
  platform.exit(1);
});

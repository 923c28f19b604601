// The exact log messages of the spec, in one place: operators grep for these strings, so a grep for one
// must land here and at its single caller.
export const MSG = {
  receivedSignal: (signal: string) => `received ${signal}`,
  draining: 'draining — /readyz now reports 503, still accepting new connections',
  stillDraining: 'still draining in-flight requests',
  arrivedWhileDraining: 'request arrived while draining',
  acceptedWhileDraining: 'accepted a new downstream connection while draining',
  drainComplete: 'drain complete — closing listeners',
  drainReport: 'drain report',
  headerLimitRefused: 'request refused: header fields over the limit (431)',
  shutDownCleanly: 'sluice shut down cleanly',
  waitingFirstConfig: 'waiting for the first configuration before binding the proxy listener',
  stillNotBound: 'proxy listener still not bound: no configuration has been applied yet',
  firstConfigApplied: 'first configuration applied — binding the proxy listener',
  fileReloaded: 'resources file reloaded',
  fileReloadFailed: 'resources file reload failed — keeping the previous snapshot',
  etcdBackoff: 'etcd watch failed; backing off before reconnect',
  etcdConnected: 'etcd source connected',
  etcdRowRejected: 'etcd resource rejected',
  etcdApplied: 'etcd configuration applied',
  partiallyCompatibleRow:
    'row loaded with unknown fields ignored (partially compatible; likely written by a newer control plane)',
  kindNotServed: 'resources of an AISIX kind Sluice does not serve accepted and ignored (partially compatible)',
  etcdRewatch: 'etcd watch idle; re-watching',
  etcdSourceFailed: 'etcd source stopped unexpectedly; the configuration it applied keeps serving',
  cacheRestored: 'configuration restored from the snapshot cache',
  cacheIgnored: 'snapshot cache ignored',
  cacheWriteFailed: 'snapshot cache write failed',
  requestCompleted: 'proxy request completed',
  providerCallCompleted: 'provider call completed',
  sighupIgnoredEtcd: 'received SIGHUP; ignored in etcd mode (the watch keeps the configuration current)',
  ignoredKeys: 'config keys accepted for AISIX compatibility and ignored',
  /** AISIX's words for `upstream.tls.verify: false`. */
  upstreamTlsUnverified:
    'upstream.tls.verify is false: upstream certificates are NOT checked, so any peer able to intercept the connection can read and rewrite prompts, responses, and upstream API keys',
  /** An explicit 0 keeps AISIX's meaning, with what it costs (docs/security.md "Safe defaults: bodies and connections"). */
  bodyLimitUnbounded:
    'proxy.request_body_limit_bytes is 0: request bodies are unbounded, so one authenticated caller can make the gateway hold a body of any size in memory; remove the key for the default limit or set one',
  idleTimeoutUnbounded:
    'downstream.idle_timeout_secs is 0: idle connections are never closed, so any client, without a key, can hold connections open until the gateway runs out of file descriptors; remove the key for the default timeout or set one',
  providerKeyTlsUnverified:
    "provider_key tls.verify is false: this key's upstream certificates are NOT checked, so any peer able to intercept the connection can read and rewrite prompts, responses, and the key's credential",
  listening: 'listening',
  resourcesLoaded: 'resources file loaded',
  sinkStarted: 'sink pipeline started',
  sinkQueueFull: 'sink queue full; record dropped',
  sinkRetrying: 'sink delivery failed; retrying',
  sinkDropped: 'sink delivery dropped after retries',
} as const;

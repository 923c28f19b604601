// The exact log messages of the spec, in one place: operators grep for these strings, so a grep for one
// must land here and at its single caller.
export const MSG = {
  receivedSignal: (signal: string) => `received ${signal}`,
  draining: 'draining — /readyz now reports 503, still accepting new connections',
  stillDraining: 'still draining in-flight requests',
  arrivedWhileDraining: 'request arrived while draining',
  acceptedWhileDraining: 'accepted a new downstream connection while draining',
  drainComplete: 'drain complete — closing listeners',
  shutDownCleanly: 'sluice shut down cleanly',
  waitingFirstConfig: 'waiting for the first configuration before binding the proxy listener',
  stillNotBound: 'proxy listener still not bound: no configuration has been applied yet',
  firstConfigApplied: 'first configuration applied — binding the proxy listener',
  fileReloaded: 'resources file reloaded',
  fileReloadFailed: 'resources file reload failed — keeping the previous snapshot',
  etcdBackoff: 'etcd watch failed; backing off before reconnect',
  requestCompleted: 'proxy request completed',
  sighupIgnoredEtcd: 'received SIGHUP; ignored in etcd mode (the watch keeps the configuration current)',
  ignoredKeys: 'config keys accepted for AISIX compatibility and ignored',
  listening: 'listening',
  resourcesLoaded: 'resources file loaded',
} as const;

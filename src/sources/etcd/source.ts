// PLACEHOLDER — replaced by the etcd source implementation (issue 4).
import type { Gateway } from '../../gateway.ts';
import type { ConfigSource } from '../source.ts';

export function createEtcdSource(_gw: Gateway): ConfigSource {
  return { start() {}, firstApplied: new Promise(() => {}), stop: async () => {} };
}

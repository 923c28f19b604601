// An etcd key-value row as the etcd source reads it, for tests that feed `EtcdRows` without an etcd.
import type { EtcdKv } from '../../src/sources/etcd/client.ts';

/** `value` as stored: a string as it is, anything else as its JSON; created and modified at `rev`. */
export const etcdKv = (key: string, value: unknown, rev: number): EtcdKv => ({
  key,
  value: typeof value === 'string' ? value : JSON.stringify(value),
  modRevision: rev,
  createRevision: rev,
  version: 1,
});

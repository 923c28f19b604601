// Whether the admin listener writes (docs/admin.md "Enabling writes"): only in etcd mode, where etcd is the
// source of truth every replica watches, and only with `admin.write_keys`. A resources file has no writer: its
// admin API stays AISIX's read-only one (405).
import type { Config } from '../config/schema.ts';
import type { Logger } from '../observability/logger.ts';
import { EtcdClient } from '../sources/etcd/client.ts';
import { clientOptions, type EtcdPlatform } from '../sources/etcd/connect.ts';
import { EtcdRowStore, type RowStore, type StoredRow } from './etcd-rows.ts';
import type { AdminExtension } from './extension.ts';
import { createAdminWrites } from './writes.ts';

export interface WriteHost {
  readonly config: Pick<Config, 'resources_file' | 'etcd' | 'admin'>;
  readonly platform: EtcdPlatform;
  readonly log: Pick<Logger, 'info'>;
}

export function adminWritesFor(host: WriteHost, now: () => number = Date.now): AdminExtension | undefined {
  const c = host.config;
  if (c.resources_file || c.etcd.endpoints.length === 0 || c.admin.write_keys.length === 0) return undefined;
  return createAdminWrites({
    rows: new LazyRows(async () =>
      new EtcdRowStore(new EtcdClient(await clientOptions(c.etcd, host.platform)), c.etcd.prefix)
    ),
    writeKeys: c.admin.write_keys,
    readKeys: c.admin.admin_keys,
    log: host.log,
    now,
  });
}

/** The etcd client made at the first write (reading the password and TLS files then), retried if that failed. */
class LazyRows implements RowStore {
  private store: Promise<RowStore> | undefined;
  constructor(private readonly make: () => Promise<RowStore>) {}

  private rows(): Promise<RowStore> {
    this.store ??= this.make().catch((e) => {
      this.store = undefined;
      throw e;
    });
    return this.store;
  }

  async get(kind: string, id: string): Promise<StoredRow | undefined> {
    return (await this.rows()).get(kind, id);
  }
  async put(kind: string, id: string, value: Record<string, unknown>, expected: number): Promise<number | undefined> {
    return (await this.rows()).put(kind, id, value, expected);
  }
  async delete(kind: string, id: string, expected: number): Promise<number | undefined> {
    return (await this.rows()).delete(kind, id, expected);
  }
}

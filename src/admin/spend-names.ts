// The names `sluice spend --etcd` puts on a report's rows (docs/admin.md "Spend reports"): the api keys' and
// models' rows under the etcd prefix, each read only for its id, `display_name`, `team_id` and `user_id`. A
// row that is not a JSON object names nothing; the report itself comes from the counters, not from these rows.
import type { EtcdClient } from '../sources/etcd/client.ts';
import type { SpendNames } from './spend-report.ts';

type Named = { id: string; display_name?: string; team_id?: string; user_id?: string };

function namedRow(id: string, value: string): Named | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return undefined;
  const d = doc as Record<string, unknown>;
  const text = (k: string) => (typeof d[k] === 'string' ? { [k]: d[k] as string } : {});
  return { id, ...text('display_name'), ...text('team_id'), ...text('user_id') };
}

/** `<prefix>/api_keys/<id>` and `<prefix>/models/<id>`, read at one revision each. */
export async function spendNamesFromEtcd(client: Pick<EtcdClient, 'range'>, prefix: string): Promise<SpendNames> {
  const rows = async (kind: 'api_keys' | 'models'): Promise<Named[]> => {
    const base = `${prefix}/${kind}/`;
    const range = await client.range(base);
    return range.kvs.flatMap((kv) => {
      const id = kv.key.slice(base.length);
      const row = id !== '' && !id.includes('/') ? namedRow(id, kv.value) : undefined;
      return row ? [row] : [];
    });
  };
  const [api_keys, models] = await Promise.all([rows('api_keys'), rows('models')]);
  return { api_keys, models };
}

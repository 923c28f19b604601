// What the etcd source reports about its rows (docs/etcd.md "Hashes and status"): `rejected[]` with its timestamps and
// pins, the WARN of each newly rejected row, and AISIX's WARN once per partially compatible (kind, fields)
// and once per kind accepted and not served.
import type { RejectedRow } from '../../config-facts.ts';
import type { Logger } from '../../observability/logger.ts';
import { MSG } from '../../observability/messages.ts';
import type { Problem, ServedValue } from './rows.ts';

/** WARN-once memory of partially compatible rows (`kind \0 fields`) and of kinds not served. */
export class PartialWarnings {
  private readonly warned = new Set<string>();
  constructor(private readonly log: Logger) {}

  /** AISIX's WARN for a row loaded with ignored fields, once per (kind, field set); once per kind not served. */
  warn(v: ServedValue | undefined): void {
    if (!v || v.unknownFields.length === 0) return;
    const p = v.parsed;
    if (p.resource === undefined) {
      if (this.warned.has(p.kind)) return;
      this.warned.add(p.kind);
      this.log.warn(MSG.kindNotServed, { key: v.key, kind: p.kind });
      return;
    }
    const fields = p.unknownFields.join(',');
    const id = `${p.kind}\0${fields}`;
    if (this.warned.has(id)) return;
    if (this.warned.size < 1024) this.warned.add(id);
    this.log.warn(MSG.partiallyCompatibleRow, { key: v.key, kind: p.kind, ignored_fields: fields });
  }
}

/**
 * `rejected[]` rows after a load, from the problems now and the rows rejected before; logs each row that
 * is newly rejected, fails differently, or starts or stops serving a pinned value.
 */
export function rejectedRows(
  log: Logger,
  problems: ReadonlyMap<string, Problem>,
  before: ReadonlyMap<string, RejectedRow>,
  o: { touched: { has(key: string): boolean }; allSeen: boolean; now: string },
): Map<string, RejectedRow> {
  const out = new Map<string, RejectedRow>();
  const { now } = o;
  for (const [key, p] of problems) {
    const old = before.get(key);
    const same = old !== undefined && old.last_error === p.error && old.last_error_kind === p.errorKind;
    const row: RejectedRow = {
      resource_kind: p.kind,
      resource_id: p.id,
      last_error_kind: p.errorKind,
      last_error: p.error,
      first_seen_at: old?.first_seen_at ?? now,
      last_seen_at: !same || o.allSeen || o.touched.has(key) ? now : old.last_seen_at,
    };
    if (p.pinned) row.serving_stale_since = old?.serving_stale_since ?? now;
    out.set(key, row);
    if (!same || p.pinned !== (old.serving_stale_since !== undefined)) {
      log.warn(MSG.etcdRowRejected, {
        key,
        resource_kind: p.kind,
        resource_id: p.id,
        error_kind: p.errorKind,
        error: p.error,
        serving_stale: p.pinned,
      });
    }
  }
  return out;
}

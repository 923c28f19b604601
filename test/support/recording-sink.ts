// A source sink for in-process source tests: it keeps every snapshot applied and its facts, and logs nothing.
import { type ApplyMeta, ConfigFactsRecorder } from '../../src/config-facts.ts';
import { createLogger } from '../../src/observability/logger.ts';
import type { Snapshot } from '../../src/resources/snapshot.ts';
import type { SourceSink } from '../../src/sources/source.ts';

export function recordingSink(): SourceSink & { applied: Snapshot[]; metas: ApplyMeta[] } {
  const record = new ConfigFactsRecorder('etcd');
  const applied: Snapshot[] = [];
  const metas: ApplyMeta[] = [];
  return {
    applied,
    metas,
    log: createLogger({ level: 'error', format: 'json', write: () => {} }),
    clock: Date.now,
    record,
    facts: record.view,
    apply: (s, meta) => {
      applied.push(s);
      metas.push(meta);
    },
    recordFailure: () => {},
  };
}

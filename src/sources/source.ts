// The one contract every configuration source implements (docs/architecture.md "A configuration change"),
// and the narrow sink it writes what it read to. The boot (src/boot.ts, src/main.ts, the Workers handler)
// only ever sees a `ConfigSource`; the order it calls these in is docs/operations.md "Boot and lifecycle".
import type { ApplyMeta, ConfigFactsRecorder, ConfigFactsView, FailureKind } from '../config-facts.ts';
import type { Logger } from '../observability/logger.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Clock } from '../util/clock.ts';

/** A whole-source load: what it applied, or why nothing was applied (a report meant for a person). */
export type SourceLoad = { ok: true; resources: number } | { ok: false; message: string };

export interface ConfigSource {
  /**
   * Present on a source that is read whole, before any listener binds (the file): the first load, its
   * success logged. The caller decides what a failure means (serve(): exit 1; Workers: 503 until a fixed
   * deploy). Absent: the source reads in the background from `start()` and the proxy waits for
   * `firstApplied`.
   */
  load?(): Promise<SourceLoad>;
  /** Start reading in the background (restores the snapshot cache first, when configured). Never rejects. */
  start(): void;
  /** Resolves once a configuration has been applied (at once after a usable cache restore). */
  readonly firstApplied: Promise<void>;
  /**
   * Resolves once a local restore (the snapshot cache) has been tried, after `firstApplied` when it
   * applied something. Absent: nothing is restored locally.
   */
  readonly localRestore?: Promise<void>;
  /** SIGHUP: what this source does on it (the file: reload all-or-nothing; etcd: log that it is ignored). */
  reload(): Promise<void>;
  /** Stop reading; interrupts any wait or request in flight. */
  stop(): Promise<void>;
}

/** What a source writes to (the Gateway satisfies it): facts it observed, snapshots it built, its log. */
export interface SourceSink {
  readonly log: Logger;
  readonly clock: Clock;
  /** The one writer of the config facts. */
  readonly record: ConfigFactsRecorder;
  readonly facts: ConfigFactsView;
  /** Swap in a snapshot atomically (after `record.rejected`). */
  apply(snapshot: Snapshot, meta: ApplyMeta): void;
  /** A load or fetch failed; what serves is untouched. */
  recordFailure(kind: FailureKind, error: string): void;
}

export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

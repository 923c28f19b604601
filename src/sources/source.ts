// What main.ts needs from a configuration source that is not the file: start it, learn when the first
// configuration has been applied (from the source or from the snapshot cache), stop it on shutdown.

export interface ConfigSource {
  /** Start reading (restores the snapshot cache first, when configured). Never rejects. */
  start(): void;
  /** Resolves once a configuration has been applied (at once after a usable cache restore). */
  readonly firstApplied: Promise<void>;
  /**
   * Resolves once a local restore (the snapshot cache) has been tried, after `firstApplied` when it
   * applied something. Absent: nothing is restored locally.
   */
  readonly localRestore?: Promise<void>;
  /** Stop watching; interrupts any wait or request in flight. */
  stop(): Promise<void>;
}

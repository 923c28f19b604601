// One timer per watched stream instead of one per chunk: `touch()` records activity and costs a clock
// read; the timer re-arms itself lazily for the remaining time, so a busy stream schedules almost nothing.
// `pause()` stops watching (e.g. while the consumer, not the upstream, is the slow side); `touch()` resumes.

export class IdleTimer {
  private last = Date.now();
  private handle: ReturnType<typeof setTimeout> | undefined;
  private paused = false;
  private stopped = false;

  /** Calls `onIdle` after `ms` without a touch, and again every `ms` while it stays idle. */
  constructor(private readonly ms: number, private readonly onIdle: () => void) {
    this.arm(ms);
  }

  touch(): void {
    this.last = Date.now();
    this.paused = false;
    if (this.handle === undefined && !this.stopped) this.arm(this.ms);
  }

  pause(): void {
    this.paused = true;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.handle);
    this.handle = undefined;
  }

  private arm(delay: number): void {
    this.handle = setTimeout(this.check, Math.max(1, delay));
  }

  private readonly check = (): void => {
    this.handle = undefined;
    if (this.stopped || this.paused) return;
    const idle = Date.now() - this.last;
    if (idle < this.ms) {
      this.arm(this.ms - idle);
      return;
    }
    this.last = Date.now();
    this.onIdle();
    if (!this.stopped && !this.paused && this.handle === undefined) this.arm(this.ms);
  };
}

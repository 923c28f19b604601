// Stampede protection (docs/cache.md "Concurrent misses"; not in AISIX): on one replica, identical misses
// that arrive while the first of them is upstream wait for its answer instead of calling the upstream too.
// The first miss leads; the leader's `settle` is the only way the others go on — with the answer to serve,
// or with nothing (the leader failed, was cut, or may not store), and then each goes upstream itself.

export interface Flight {
  /** Called exactly once by the leader: the answer body its followers serve, or undefined. */
  settle(body: string | undefined): void;
}

export class SingleFlight {
  private readonly flights = new Map<string, Promise<string | undefined>>();
  private followers = 0;

  /** Keys with a leader upstream now. */
  get inFlight(): number {
    return this.flights.size;
  }

  /** Requests waiting for a leader now. */
  get waiting(): number {
    return this.followers;
  }

  /**
   * Another request with this key is upstream now: the promise is its answer (undefined: go upstream
   * yourself). Undefined when none is.
   */
  follow(key: string): Promise<string | undefined> | undefined {
    const running = this.flights.get(key);
    if (!running) return undefined;
    this.followers++;
    return running.finally(() => this.followers--);
  }

  /** `lead`: this request goes upstream and must settle the flight; `follow`: as `follow(key)`. */
  join(key: string): { lead: Flight } | { follow: Promise<string | undefined> } {
    const running = this.follow(key);
    if (running) return { follow: running };
    let resolve!: (body: string | undefined) => void;
    const p = new Promise<string | undefined>((r) => (resolve = r));
    this.flights.set(key, p);
    let settled = false;
    return {
      lead: {
        settle: (body) => {
          if (settled) return;
          settled = true;
          if (this.flights.get(key) === p) this.flights.delete(key);
          resolve(body);
        },
      },
    };
  }
}

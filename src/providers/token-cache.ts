// Access tokens the gateway mints for itself (Vertex service accounts, Azure AAD client credentials),
// cached per credential (docs/configuration.md "Vertex AI", "Azure OpenAI"). One mint is in flight per
// credential however many requests wait on it; each waiter is bounded by its own request's deadline; a
// token is replaced a minute before it expires. Minted tokens are listed for the scrubber.
import { Cancel, type CancelSignal } from '../util/cancel.ts';

/** What a token endpoint granted. */
export interface Grant {
  token: string;
  expiresInSecs: number;
}

/** A token is not used in its last minute: a request that starts then may outlive it. */
const REFRESH_BEFORE_MS = 60_000;

interface Slot {
  token?: { value: string; expiresAtMs: number };
  inFlight?: { grant: Promise<Grant>; waiters: number; cancel: Cancel };
}

/** Every token minted and not yet expired, by every cache: what no error, log or status may show. */
const live = new Map<string, number>();

export function mintedTokens(nowMs = Date.now()): string[] {
  const out: string[] = [];
  for (const [token, expiresAtMs] of live) {
    if (expiresAtMs <= nowMs) live.delete(token);
    else out.push(token);
  }
  return out;
}

export class TokenCache {
  private readonly slots = new Map<string, Slot>();

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * A valid token for the credential `id` (a string made of every member of the credential, so a rotated
   * secret mints afresh). `mint` runs at most once at a time per `id`; it is cancelled when every waiter
   * has gone. Rejects with `signal`'s reason when the caller's deadline comes first, or with `mint`'s error.
   */
  async token(id: string, mint: (signal: CancelSignal) => Promise<Grant>, signal: CancelSignal): Promise<string> {
    const slot = this.slots.get(id) ?? this.fresh(id);
    const t = slot.token;
    if (t && this.now() < t.expiresAtMs - REFRESH_BEFORE_MS) return t.value;
    slot.inFlight ??= this.start(id, slot, mint);
    return await this.wait(slot.inFlight, signal);
  }

  /** Forget the credential's token (its upstream refused it): the next request mints afresh. */
  drop(id: string): void {
    const slot = this.slots.get(id);
    if (slot && !slot.inFlight) this.slots.delete(id);
    else if (slot) slot.token = undefined;
  }

  /** Requests now waiting on a mint (for tests that prove concurrent first requests share one). */
  waiting(): number {
    let n = 0;
    for (const s of this.slots.values()) n += s.inFlight?.waiters ?? 0;
    return n;
  }

  private fresh(id: string): Slot {
    const now = this.now();
    for (const [k, s] of this.slots) {
      if (!s.inFlight && (!s.token || s.token.expiresAtMs <= now)) this.slots.delete(k);
    }
    const slot: Slot = {};
    this.slots.set(id, slot);
    return slot;
  }

  private start(id: string, slot: Slot, mint: (signal: CancelSignal) => Promise<Grant>): NonNullable<Slot['inFlight']> {
    const cancel = new Cancel();
    const grant = mint(cancel).then((g) => {
      const expiresAtMs = this.now() + Math.max(0, g.expiresInSecs) * 1000;
      slot.token = { value: g.token, expiresAtMs };
      live.set(g.token, expiresAtMs);
      return g;
    }).finally(() => {
      if (this.slots.get(id) === slot) slot.inFlight = undefined;
    });
    grant.catch(() => {}); // a mint nobody waits on any more must not be an unhandled rejection
    return { grant, waiters: 0, cancel };
  }

  private wait(flight: NonNullable<Slot['inFlight']>, signal: CancelSignal): Promise<string> {
    if (signal.aborted) return Promise.reject(signal.reason);
    flight.waiters++;
    return new Promise<string>((resolve, reject) => {
      let done = false;
      const leave = () => {
        done = true;
        signal.removeEventListener('abort', onAbort);
        if (--flight.waiters === 0) return true;
        return false;
      };
      const onAbort = () => {
        if (done) return;
        if (leave()) flight.cancel.abort(signal.reason);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      flight.grant.then((g) => {
        if (done) return;
        leave();
        resolve(g.token);
      }, (e) => {
        if (done) return;
        leave();
        reject(e);
      });
    });
  }
}

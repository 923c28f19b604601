// Each feature's own state on one call (docs/architecture.md "A request"): a typed slot under a key the feature
// exports, instead of a module-level side table keyed by the call. The state lives and dies with the call.

/** The key of one feature's slot: only its holder can read the slot, and the value's type comes with it. */
export interface SlotKey<T> {
  readonly id: symbol;
  /** Phantom: carries `T` so `get` and `set` agree; never set. */
  readonly type?: T;
}

/** A new slot key, named for debugging. */
export function slotKey<T>(name: string): SlotKey<T> {
  return { id: Symbol(name) };
}

interface Held {
  value: unknown;
  onThrow: ((value: never) => void) | undefined;
}

/** The slots of one call. Allocated on the first `set`: a call no feature keeps state for costs nothing. */
export class CallState {
  private slots: Map<symbol, Held> | undefined = undefined;

  get<T>(key: SlotKey<T>): T | undefined {
    return this.slots?.get(key.id)?.value as T | undefined;
  }

  /**
   * Keeps `value` in the slot. `onThrow` is called with it if the call ends in an unhandled throw while the
   * slot still holds it (a resource others wait on is let go).
   */
  set<T>(key: SlotKey<T>, value: T, onThrow?: (value: T) => void): void {
    (this.slots ??= new Map()).set(key.id, { value, onThrow: onThrow as ((value: never) => void) | undefined });
  }

  /** The slot's value, and the slot emptied (its `onThrow` no longer applies). */
  take<T>(key: SlotKey<T>): T | undefined {
    const held = this.slots?.get(key.id);
    if (!held) return undefined;
    this.slots!.delete(key.id);
    return held.value as T;
  }

  /** The call ended in an unhandled throw: each held slot's `onThrow`, then every slot emptied. */
  thrown(): void {
    const slots = this.slots;
    if (!slots) return;
    this.slots = undefined;
    for (const held of slots.values()) held.onThrow?.(held.value as never);
  }
}

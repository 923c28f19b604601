// A request's headers for the core, read straight from node:http's raw header array
// (docs/performance.md "Decisions on the hot path, and their measured reasons"): `get` and `has` scan the few raw
// fields for the one asked, without the two regular-expression tests and the lowercasing that each `get` of
// @hono/node-server's lazy headers costs. Any other use, or a value a `Headers` would refuse, builds a real `Headers`
// from the same fields and answers from it.

/** Header names asked for, lowercased; null for a name that is no HTTP token (bounded: callers ask a few constants). */
const NAMES = new Map<string, string | null>();
const TOKEN = /^[!#$%&'*+\-.^_`|~\dA-Za-z]+$/;

function lowerName(name: string): string | null {
  let lower = NAMES.get(name);
  if (lower === undefined) {
    lower = TOKEN.test(name) ? name.toLowerCase() : null;
    if (NAMES.size < 256) NAMES.set(name, lower);
  }
  return lower;
}

/** Whether `raw` is `lower` but for the case of its ASCII letters (the lengths are equal). */
function sameName(raw: string, lower: string): boolean {
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c !== lower.charCodeAt(i) && (c < 65 || c > 90 || c + 32 !== lower.charCodeAt(i))) return false;
  }
  return true;
}

const isSpace = (c: number) => c === 9 || c === 10 || c === 13 || c === 32;

/** `v` without leading and trailing HTTP whitespace, as `Headers` keeps a value. */
function trimmed(v: string): string {
  let start = 0;
  let end = v.length;
  while (start < end && isSpace(v.charCodeAt(start))) start++;
  while (end > start && isSpace(v.charCodeAt(end - 1))) end--;
  return start === 0 && end === v.length ? v : v.slice(start, end);
}

/** Whether `v` holds NUL, CR or LF, which `Headers` refuses in a value. */
function forbidden(v: string): boolean {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c === 0 || c === 10 || c === 13) return true;
  }
  return false;
}

/** What `get` found: the joined value, null for none, or `INVALID` when only a real `Headers` can answer. */
const INVALID = Symbol('invalid');

/** A `Headers` in all but name (its prototype is `Headers.prototype`, so `instanceof Headers` holds). */
export class RawRequestHeaders {
  readonly #raw: readonly string[];
  #native: Headers | undefined;

  /** `raw` is node:http's `rawHeaders`: name, value, name, value…; HTTP/2 pseudo-headers (`:path`) are skipped. */
  constructor(raw: readonly string[]) {
    this.#raw = raw;
  }

  get(name: string): string | null {
    const v = this.#native ? INVALID : this.#lookup(name);
    return v === INVALID ? this.#headers().get(name) : v;
  }

  has(name: string): boolean {
    const v = this.#native ? INVALID : this.#lookup(name);
    return v === INVALID ? this.#headers().has(name) : v !== null;
  }

  /** Every field named `name`, joined as `Headers` joins them (`; ` for cookies, else `, `). */
  #lookup(name: string): string | null | typeof INVALID {
    const lower = typeof name === 'string' ? lowerName(name) : null;
    if (lower === null) return INVALID; // `Headers` throws its TypeError for such a name
    const raw = this.#raw;
    let value: string | null = null;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const n = raw[i]!;
      if (n.length !== lower.length || (n !== lower && !sameName(n, lower))) continue;
      const v = trimmed(raw[i + 1]!);
      if (forbidden(v)) return INVALID;
      value = value === null ? v : value + (lower === 'cookie' ? '; ' : ', ') + v;
    }
    return value;
  }

  /** A real `Headers` of the same fields, built once, for every use but `get` and `has`. */
  #headers(): Headers {
    if (!this.#native) {
      const h = new Headers();
      const raw = this.#raw;
      for (let i = 0; i + 1 < raw.length; i += 2) {
        if (raw[i]!.charCodeAt(0) !== 0x3a /* : */) h.append(raw[i]!, raw[i + 1]!);
      }
      this.#native = h;
    }
    return this.#native;
  }

  append(name: string, value: string): void {
    this.#headers().append(name, value);
  }
  delete(name: string): void {
    this.#headers().delete(name);
  }
  set(name: string, value: string): void {
    this.#headers().set(name, value);
  }
  getSetCookie(): string[] {
    return this.#headers().getSetCookie();
  }
  forEach(callback: (value: string, key: string, parent: Headers) => void, thisArg?: unknown): void {
    this.#headers().forEach((value, key) => callback.call(thisArg, value, key, this as unknown as Headers));
  }
  entries(): HeadersIterator<[string, string]> {
    return this.#headers().entries();
  }
  keys(): HeadersIterator<string> {
    return this.#headers().keys();
  }
  values(): HeadersIterator<string> {
    return this.#headers().values();
  }
  [Symbol.iterator](): HeadersIterator<[string, string]> {
    return this.#headers().entries();
  }
}

// `instanceof Headers` holds, as for @hono/node-server's own lazy headers; every method above is its own.
Object.setPrototypeOf(RawRequestHeaders.prototype, Headers.prototype);

/** Where a request of the node listener keeps its reader (a property of its own, set once per request). */
const READER = Symbol('rawRequestHeaders');
/** The request prototype whose `headers` getter answers from `READER` (@hono/node-server's, the same for all). */
let patched: object | undefined;
/** Every prototype patched, so that none is wrapped twice. */
const patchedAll = new WeakSet<object>();

/**
 * Makes `req.headers` answer from `raw`. The reader is set as an ordinary property and the prototype's `headers`
 * getter, replaced once, returns it: defining an own `headers` property on each request instead cost a
 * microsecond and left the request an object of a slower kind. A request without a reader (one this module
 * never saw) gets the prototype's own headers, as before.
 */
export function readHeadersRaw(req: Request, raw: readonly string[]): void {
  (req as unknown as Record<symbol, unknown>)[READER] = new RawRequestHeaders(raw);
  const proto = Object.getPrototypeOf(req) as object;
  if (proto !== patched) {
    if (!patchedAll.has(proto)) patchHeaders(proto);
    patched = proto;
  }
}

function patchHeaders(proto: object): void {
  const own = Object.getOwnPropertyDescriptor(proto, 'headers');
  const original = own?.get ?? function (this: object) {
    return Reflect.get(Object.getPrototypeOf(proto) as object, 'headers', this);
  };
  Object.defineProperty(proto, 'headers', {
    configurable: true,
    enumerable: own?.enumerable ?? false,
    get(this: Record<symbol, unknown>) {
      return this[READER] ?? original.call(this);
    },
  });
  patchedAll.add(proto);
}

// Synthetic work for the bare proxy (`bench/bare-proxy.ts --burden kind:n`), to see what kind of work costs a
// proxy more at the socket than it costs alone (bench/README.md "What a request's work costs at the socket"):
//
//   spin:n    n rounds of integer arithmetic in one loop (one small function, no memory)
//   await:n   n awaits of already-settled promises, one after another (a promise and a resumption each)
//   alloc:n   n small objects and strings made before the upstream call and read after it, so they live
//             across it as a request's state does
//   garbage:n the same objects, read and dropped before the upstream call (they die young)
//   funcs:n   one call each to n distinct functions (made at start), each reading fields of an object of its own
//             shape: the code a request runs spread over many functions, as a gateway's layers are
//   code:n    the same with n larger functions (24 statements each, about 450 bytes of optimised code on Node 20):
//             code the proxy's own work evicts between two requests
//
// `burden(spec)` returns the per-request work as `before` (before the upstream call; what it returns is handed to
// `after`) and `after` (once the answer is in); `timed` counts the time spent inside them, in the process that
// runs them. Runs on Node, Bun and Deno.

export interface Burden {
  before(): Promise<unknown> | unknown;
  after(state: unknown): void;
}

/** The time a burden's own calls take, as the process runs them (µs in all, and calls). */
export interface Spent {
  micros: number;
  calls: number;
}

/** `b`, counting the time spent inside its calls in `spent`. */
export function timed(b: Burden): Burden & { spent: Spent } {
  const spent = { micros: 0, calls: 0 };
  return {
    spent,
    async before() {
      const t0 = performance.now();
      const held = await b.before();
      spent.micros += (performance.now() - t0) * 1000;
      spent.calls++;
      return held;
    },
    after(held) {
      const t0 = performance.now();
      b.after(held);
      spent.micros += (performance.now() - t0) * 1000;
    },
  };
}

/** The burden `kind:n` names (the kinds above); throws on a spec it cannot read. */
export function burden(spec: string): Burden {
  const [kind, n0] = spec.split(':');
  const n = Number(n0);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--burden ${spec}: the count must be a whole number`);
  switch (kind) {
    case 'spin':
      return { before: () => spin(n), after: sink };
    case 'await':
      return { before: () => awaits(n), after: sink };
    case 'alloc':
      return { before: () => alloc(n), after: (s) => sink(readAll(s as Held[])) };
    case 'garbage':
      return { before: () => readAll(alloc(n)), after: sink };
    case 'funcs': {
      const fns = distinctFunctions(n, 1);
      return { before: () => callAll(fns), after: sink };
    }
    case 'code': {
      const fns = distinctFunctions(n, 24);
      return { before: () => callAll(fns), after: sink };
    }
    default:
      throw new Error(`--burden ${spec}: the kind is spin, await, alloc, garbage, funcs or code`);
  }
}

let kept = 0;
/** Keeps a result observable, so no compiler drops the work that made it. */
function sink(v: unknown): void {
  if (typeof v === 'number') kept = (kept + v) | 0;
}

function spin(n: number): number {
  let x = 1;
  for (let i = 0; i < n; i++) x = (x * 31 + i) | 0;
  return x;
}

async function awaits(n: number): Promise<number> {
  let x = 0;
  for (let i = 0; i < n; i++) x += await Promise.resolve(i);
  return x;
}

interface Held {
  id: number;
  name: string;
  parts: number[];
}

function alloc(n: number): Held[] {
  const out: Held[] = [];
  for (let i = 0; i < n; i++) out.push({ id: i, name: `field-${i}`, parts: [i, i + 1] });
  return out;
}

function readAll(held: Held[]): number {
  let x = 0;
  for (const h of held) x += h.id + h.name.length + h.parts[1]!;
  return x;
}

type Fn = (o: Record<string, number>) => number;

/** n functions with distinct bodies of `size` statements each, each paired with an object of a shape of its own. */
function distinctFunctions(n: number, size: number): { fn: Fn; arg: Record<string, number> }[] {
  const out: { fn: Fn; arg: Record<string, number> }[] = [];
  for (let i = 0; i < n; i++) {
    const a = `a${i}`;
    const b = `b${i}`;
    let body = `let x = o.${a} + ${i}; if (x > ${i * 7}) x -= o.${b};`;
    // Statements that cannot fold into one another: each reads a field and mixes it in.
    for (let k = 1; k < size; k++) body += ` x = (x * ${31 + k} + o.${k % 2 ? a : b} + ${i * k}) | 0;`;
    const fn = new Function('o', `${body} return (x * ${i + 3}) | 0;`) as Fn;
    out.push({ fn, arg: { [a]: i, [b]: i + 1 } });
  }
  return out;
}

function callAll(fns: { fn: Fn; arg: Record<string, number> }[]): number {
  let x = 0;
  for (let i = 0; i < fns.length; i++) x += fns[i]!.fn(fns[i]!.arg);
  return x;
}

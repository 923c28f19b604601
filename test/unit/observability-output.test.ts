// The observability layer's output is a contract (AISIX's text log line, the JSON log line, the Prometheus
// exposition); the fast paths in src/observability (docs/performance.md) must not change a byte of it. Each test
// compares against the straightforward construction the fast path replaced, or against a literal.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createLogger, debugQuote, type Fields, LineLayout } from '../../src/observability/logger.ts';
import { Counter, Gauge, Histogram, Registry } from '../../src/observability/metrics.ts';

/** The JSON line as `JSON.stringify` builds it: the head, then the members of the fields object. */
function referenceJson(time: Date, level: string, target: string, msg: string, fields?: Fields): string {
  const head = `{"time":"${time.toISOString()}","level":"${level}","target":${JSON.stringify(target)},"msg":${
    JSON.stringify(msg)
  }`;
  const rest = fields ? JSON.stringify(fields) : '{}';
  return rest.length > 2 ? `${head},${rest.slice(1)}` : `${head}}`;
}

class WithToJson {
  toJSON(key: string) {
    return `to-json:${key}`;
  }
}

const FIELD_SETS: (Fields | undefined)[] = [
  undefined,
  {},
  { a: undefined },
  {
    method: 'POST',
    path: '/v1/chat/completions',
    status: 200,
    latency_ms: 3,
    provider: 'openai',
    model: undefined,
    prompt_tokens: 12,
    request_id: 'req-1',
    error: undefined,
  },
  { s: 'quote " back \\ nl \n tab \t nul \0 bell \x07 del \x7f é € 😀 \u2028 \u2029' },
  { lone: '\ud800 alone', low: 'x\udc00' },
  { n0: 0, neg0: -0, big: 1e21, small: 1e-7, frac: 0.1 + 0.2, nan: NaN, inf: Infinity, ninf: -Infinity },
  { t: true, f: false, nul: null, fn: () => 1, sym: Symbol('s') },
  { obj: { a: [1, 'x', null, undefined] }, arr: [1, 2], date: new Date(0) },
  { custom: new WithToJson(), after: 'x' },
  { 'we"ird\nkey': 1, 'é': 'v', '': 'empty key', 10: 'int key', 2: 'int key first' },
  Object.assign(Object.create(null), { nullProto: 'yes' }) as Fields,
  { toJSON: () => ({ replaced: true }), hidden: 1 },
  // Each escaped character alone in a short value, and long values with and without one at their end.
  { q: 'a"', bs: 'a\\', us: '\x1f', sp: ' ~\x7f', hi: 'x\ud83d', lo: '\udfff', ok: 'é€😀', long: `${'x'.repeat(80)}"` },
  { longPlain: 'y'.repeat(80), at64: `${'z'.repeat(63)}\n`, at65: `${'z'.repeat(64)}\\` },
];

describe('the JSON log line is JSON.stringify byte for byte', () => {
  const at = new Date('2026-03-04T05:06:07.089Z');
  for (const [i, fields] of FIELD_SETS.entries()) {
    test(`field set ${i}`, () => {
      const out: string[] = [];
      const log = createLogger({ level: 'info', format: 'json', write: (l) => out.push(l), clock: () => at.getTime() });
      log.withTarget('aisix_obs::access_log').info('msg "quoted"', fields);
      log.warn('plain', fields);
      assert.deepEqual(out, [
        referenceJson(at, 'INFO', 'aisix_obs::access_log', 'msg "quoted"', fields),
        referenceJson(at, 'WARN', 'sluice', 'plain', fields),
      ]);
    });
  }

  test('a bigint throws from the log call, as JSON.stringify does', () => {
    const log = createLogger({ level: 'info', format: 'json', write: () => {} });
    assert.throws(() => log.info('m', { n: 1n }), TypeError);
  });
});

/** The text line as the reference builds it: the head, then ` name=value` per field that is not undefined or null. */
function referenceText(time: Date, level: string, target: string, msg: string, fields: Fields): string {
  let line = `${time.toISOString().slice(0, -1)}000Z ${level.padStart(5)} ${target}: ${msg}`;
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined || v === null) continue;
    const s = typeof v === 'string'
      ? debugQuote(v)
      : typeof v === 'number'
      ? Number.isFinite(v) ? String(v) : debugQuote(String(v))
      : typeof v === 'boolean'
      ? String(v)
      : JSON.stringify(v) ?? debugQuote(String(v));
    line += ` ${k}=${s}`;
  }
  return line;
}

describe("a layout's line (logLine) is the fields object's line byte for byte", () => {
  const at = new Date('2026-03-04T05:06:07.089Z');
  // A layout's names are fixed field names: no integer-like keys (an object orders those first) and no toJSON.
  const sets = FIELD_SETS.filter((f): f is Fields =>
    f !== undefined && Object.getPrototypeOf(f) === Object.prototype && !('toJSON' in f) &&
    !Object.keys(f).some((k) => /^\d+$/.test(k))
  );
  // The same names with other values, so each slot's last plain string meets escaped, equal and new strings.
  const variants = (f: Fields): Fields[] => [
    f,
    Object.fromEntries(Object.keys(f).map((k) => [k, 'plain'])),
    Object.fromEntries(Object.keys(f).map((k) => [k, 'pla"in'])),
    Object.fromEntries(Object.keys(f).map((k) => [k, ['pl', 'ain'].join('')])),
    Object.fromEntries(Object.keys(f).map((k, i) => [k, i % 2 ? 7 : 'x\x7f'])),
    f,
  ];
  for (const [i, fields] of sets.entries()) {
    const layout = new LineLayout(Object.keys(fields));
    for (const format of ['json', 'text'] as const) {
      test(`field set ${i}, ${format}`, () => {
        const out: string[] = [];
        const log = createLogger({ level: 'info', format, write: (l) => out.push(l), clock: () => at.getTime() });
        const target = log.withTarget('aisix_obs::usage');
        for (const v of variants(fields)) {
          out.length = 0;
          target.logLine('info', 'provider call completed', layout, Object.values(v));
          log.logLine('warn', 'plain', layout, Object.values(v));
          assert.deepEqual(
            out,
            format === 'json'
              ? [
                referenceJson(at, 'INFO', 'aisix_obs::usage', 'provider call completed', v),
                referenceJson(at, 'WARN', 'sluice', 'plain', v),
              ]
              : [
                referenceText(at, 'INFO', 'aisix_obs::usage', 'provider call completed', v),
                referenceText(at, 'WARN', 'sluice', 'plain', v),
              ],
          );
        }
      });
    }
  }
});

describe('timestamps (cached per millisecond and per second) equal toISOString', () => {
  const times = [
    0,
    1,
    999,
    1000,
    1001,
    1772600767089,
    1772600767089, // the same millisecond again
    1772600767090,
    1772600767999,
    1772600768000, // the next second
    1772600767500, // back in time (a clock step)
    1772600768009,
    1772600768010,
    1772600768099,
    1772600768100,
    -1, // before 1970
    -1000,
    -1001,
    -62198755200000, // year -0001
    253402300799999, // 9999-12-31T23:59:59.999Z
    253402300800000, // +010000
  ];
  for (let i = 0; i < 300; i++) times.push(1772600767000 + i * 7);

  test('json: toISOString', () => {
    let t = 0;
    const out: string[] = [];
    const log = createLogger({ level: 'info', format: 'json', write: (l) => out.push(l), clock: () => t });
    for (t of times) {
      out.length = 0;
      log.info('m');
      assert.equal(out[0], `{"time":"${new Date(t).toISOString()}","level":"INFO","target":"sluice","msg":"m"}`);
    }
  });

  test('text: microseconds, i.e. toISOString with 000 before the Z', () => {
    let t = 0;
    const out: string[] = [];
    const log = createLogger({ level: 'info', format: 'text', write: (l) => out.push(l), clock: () => t });
    for (t of times) {
      out.length = 0;
      log.info('m', { k: 'v', n: 1 });
      assert.equal(out[0], `${new Date(t).toISOString().slice(0, -1)}000Z  INFO sluice: m k="v" n=1`);
    }
  });

  test("a layout's line given the time the caller read takes it, and reads no clock", () => {
    let reads = 0;
    const out: string[] = [];
    const layout = new LineLayout(['k']);
    for (const format of ['json', 'text'] as const) {
      const log = createLogger({ level: 'info', format, write: (l) => out.push(l), clock: () => (reads++, 0) });
      for (const t of times) {
        out.length = 0;
        log.logLine('info', 'm', layout, ['v'], t);
        assert.ok(
          out[0]!.startsWith(
            format === 'json' ? `{"time":"${new Date(t).toISOString()}"` : new Date(t).toISOString().slice(0, -1),
          ),
        );
      }
      log.logLine('info', 'm', layout, ['v']); // without one, the logger's clock
      assert.ok(
        out.at(-1)!.startsWith(
          format === 'json' ? '{"time":"1970-01-01T00:00:00.000Z"' : '1970-01-01T00:00:00.000000Z',
        ),
      );
    }
    assert.equal(reads, 2);
  });

  test('the default clock is the system clock', () => {
    const out: string[] = [];
    const log = createLogger({ level: 'info', format: 'json', write: (l) => out.push(l) });
    const before = Date.now();
    log.info('m');
    const after = Date.now();
    const logged = Date.parse((JSON.parse(out[0]!) as { time: string }).time);
    assert.ok(logged >= before && logged <= after, `${logged} in [${before}, ${after}]`);
  });
});

describe('the exposition (series found through the last-hit cache; histogram buckets added up at render)', () => {
  test('interleaved label sets, equal values in new strings, and buckets at their edges', () => {
    const r = new Registry();
    const c = r.register(new Counter('c_total', 'A counter.', ['a', 'b', 'c']));
    const h = r.register(new Histogram('h_seconds', 'A histogram.', ['a'], [0.1, 1, 10]));
    const g = r.register(new Gauge('g', 'A gauge.', ['k']));
    const same = (s: string) => [...s].join(''); // an equal string that is another object
    c.inc(['x', 'y', 'z']);
    c.inc(['x', 'y', 'z']);
    c.inc(['x', 'y', same('w')]); // differs in the last value only
    c.inc(['x', same('y'), same('z')], 2); // the first series again, through new strings
    c.inc(['q', 'y', 'z']); // differs in the first value only
    c.inc(['x', 'y', 'w'], 0.5);
    h.observe(['p'], 0.1); // exactly on a bound: counted in it (le)
    h.observe(['p'], 0.05);
    h.observe(['q'], 10);
    h.observe(['p'], 1.5);
    h.observe(['p'], 11); // above every bound: only in +Inf
    h.observe(['q'], NaN); // in no bound, in count and sum
    g.set(['k1'], 3);
    g.inc(['k2']);
    g.inc(['k1'], -1);
    g.reset();
    g.set(['k2'], 7); // after a reset the cached series must not be reused
    g.inc(['k2']);
    assert.equal(
      r.render(),
      [
        '# HELP c_total A counter.',
        '# TYPE c_total counter',
        'c_total{a="x",b="y",c="z"} 4',
        'c_total{a="x",b="y",c="w"} 1.5',
        'c_total{a="q",b="y",c="z"} 1',
        '# HELP h_seconds A histogram.',
        '# TYPE h_seconds histogram',
        'h_seconds_bucket{a="p",le="0.1"} 2',
        'h_seconds_bucket{a="p",le="1"} 2',
        'h_seconds_bucket{a="p",le="10"} 3',
        'h_seconds_bucket{a="p",le="+Inf"} 4',
        'h_seconds_sum{a="p"} 12.65',
        'h_seconds_count{a="p"} 4',
        'h_seconds_bucket{a="q",le="0.1"} 0',
        'h_seconds_bucket{a="q",le="1"} 0',
        'h_seconds_bucket{a="q",le="10"} 1',
        'h_seconds_bucket{a="q",le="+Inf"} 2',
        'h_seconds_sum{a="q"} NaN',
        'h_seconds_count{a="q"} 2',
        '# HELP g A gauge.',
        '# TYPE g gauge',
        'g{k="k2"} 8',
        '',
      ].join('\n'),
    );
    assert.equal(c.get(['x', 'y', 'z']), 4);
    assert.equal(c.get(['x', 'y']), 0);
  });

  test('families of different label counts sharing values do not share series', () => {
    const r = new Registry();
    const a = r.register(new Counter('a_total', 'A.', ['x', 'y']));
    const b = r.register(new Counter('b_total', 'B.', []));
    a.inc(['1', '2']);
    b.inc();
    b.inc([]);
    a.inc(['1', '2']);
    assert.equal(
      r.render(),
      '# HELP a_total A.\n# TYPE a_total counter\na_total{x="1",y="2"} 2\n# HELP b_total B.\n# TYPE b_total counter\nb_total 2\n',
    );
  });
});

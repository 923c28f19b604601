// A real OTLP/HTTP JSON receiver on a loopback socket, in the test process: it decodes each POST, checks it
// against the OTLP JSON mapping (opentelemetry-proto's `ExportTraceServiceRequest`: hex ids of the right
// length, int64 as decimal strings, one value field per `AnyValue`, enum ranges), and keeps the spans
// flattened. Scriptable: answer a status, fail the first N POSTs, hang, or refuse connections.
import * as http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One decoded span: the OTLP fields plus its attributes as a plain object. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  traceState: string | undefined;
  name: string;
  kind: number;
  start: bigint;
  end: bigint;
  flags: number | undefined;
  status: number;
  attrs: Record<string, string | number | boolean | unknown[]>;
  resource: Record<string, string | number | boolean | unknown[]>;
  scope: string;
}

export interface ReceivedPost {
  headers: http.IncomingHttpHeaders;
  spans: ReceivedSpan[];
}

export type ReceiverMode =
  | { kind: 'ok' }
  | { kind: 'status'; status: number }
  /** Accept the request and never answer. */
  | { kind: 'hang' };

export interface OtlpReceiver {
  /** `http://127.0.0.1:<port>/v1/traces` */
  url: string;
  port: number;
  posts: ReceivedPost[];
  /** Every span received in a POST answered 2xx. */
  spans: ReceivedSpan[];
  /** POSTs whose body broke the OTLP JSON mapping (each with why). */
  invalid: string[];
  /** POSTs seen in any mode. */
  attempts: number;
  setMode(mode: ReceiverMode): void;
  /** The next `n` POSTs answer 503 (AISIX's retry-test knob). */
  failNext(n: number): void;
  /** Close the listening socket (connections are refused) until `accept()`. */
  refuse(): Promise<void>;
  accept(): Promise<void>;
  /** Resolves when at least `n` spans were received; fails after `ms`. */
  waitForSpans(n: number, ms?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const DECIMAL = /^-?[0-9]+$/;
const VALUE_FIELDS = ['stringValue', 'boolValue', 'intValue', 'doubleValue', 'arrayValue', 'kvlistValue', 'bytesValue'];

function anyValue(v: unknown, at: string): string | number | boolean | unknown[] {
  if (typeof v !== 'object' || v === null) throw new Error(`${at}: AnyValue must be an object`);
  const keys = Object.keys(v);
  if (keys.length !== 1 || !VALUE_FIELDS.includes(keys[0]!)) {
    throw new Error(`${at}: AnyValue must have exactly one of ${VALUE_FIELDS.join(', ')}, got ${keys.join(',')}`);
  }
  const o = v as Record<string, unknown>;
  if ('stringValue' in o) {
    if (typeof o.stringValue !== 'string') throw new Error(`${at}: stringValue must be a string`);
    return o.stringValue;
  }
  if ('boolValue' in o) {
    if (typeof o.boolValue !== 'boolean') throw new Error(`${at}: boolValue must be a boolean`);
    return o.boolValue;
  }
  if ('intValue' in o) {
    // The JSON mapping writes int64 as a decimal string (a number is also accepted by parsers; we pin ours).
    if (typeof o.intValue !== 'string' || !DECIMAL.test(o.intValue)) {
      throw new Error(`${at}: intValue must be a decimal string`);
    }
    return Number(o.intValue);
  }
  if ('doubleValue' in o) {
    if (typeof o.doubleValue !== 'number') throw new Error(`${at}: doubleValue must be a number`);
    return o.doubleValue;
  }
  if ('arrayValue' in o) {
    const values = (o.arrayValue as { values?: unknown })?.values;
    if (!Array.isArray(values)) throw new Error(`${at}: arrayValue.values must be an array`);
    return values.map((x, i) => anyValue(x, `${at}[${i}]`));
  }
  throw new Error(`${at}: unsupported AnyValue`);
}

function attributes(list: unknown, at: string): Record<string, string | number | boolean | unknown[]> {
  if (list === undefined) return {};
  if (!Array.isArray(list)) throw new Error(`${at}: attributes must be an array`);
  const out: Record<string, string | number | boolean | unknown[]> = {};
  for (const [i, kv] of list.entries()) {
    if (typeof kv?.key !== 'string' || kv.key === '') throw new Error(`${at}[${i}]: key must be a non-empty string`);
    if (kv.key in out) throw new Error(`${at}: duplicate attribute ${kv.key}`);
    out[kv.key] = anyValue(kv.value, `${at}.${kv.key}`);
  }
  return out;
}

/** Decodes an `ExportTraceServiceRequest` in the JSON mapping; throws naming the first violation. */
export function decodeExportRequest(body: string): ReceivedSpan[] {
  const doc = JSON.parse(body) as { resourceSpans?: unknown };
  if (!Array.isArray(doc.resourceSpans)) throw new Error('resourceSpans must be an array');
  const spans: ReceivedSpan[] = [];
  for (const [ri, rs] of doc.resourceSpans.entries()) {
    const resource = attributes(rs?.resource?.attributes, `resourceSpans[${ri}].resource.attributes`);
    if (!Array.isArray(rs.scopeSpans)) throw new Error(`resourceSpans[${ri}].scopeSpans must be an array`);
    for (const [si, ss] of rs.scopeSpans.entries()) {
      const scope = ss?.scope?.name ?? '';
      if (!Array.isArray(ss.spans)) throw new Error(`scopeSpans[${si}].spans must be an array`);
      for (const [i, s] of ss.spans.entries()) {
        const at = `spans[${i}]`;
        if (!HEX32.test(s.traceId)) throw new Error(`${at}.traceId must be 32 lowercase hex characters`);
        if (!HEX16.test(s.spanId)) throw new Error(`${at}.spanId must be 16 lowercase hex characters`);
        if (s.parentSpanId !== undefined && s.parentSpanId !== '' && !HEX16.test(s.parentSpanId)) {
          throw new Error(`${at}.parentSpanId must be 16 lowercase hex characters or empty`);
        }
        if (typeof s.name !== 'string' || s.name === '') throw new Error(`${at}.name must be a non-empty string`);
        if (!Number.isInteger(s.kind) || s.kind < 0 || s.kind > 5) {
          throw new Error(`${at}.kind must be a SpanKind (0-5)`);
        }
        for (const f of ['startTimeUnixNano', 'endTimeUnixNano']) {
          if (typeof s[f] !== 'string' || !DECIMAL.test(s[f])) throw new Error(`${at}.${f} must be a decimal string`);
        }
        const start = BigInt(s.startTimeUnixNano);
        const end = BigInt(s.endTimeUnixNano);
        if (end < start) throw new Error(`${at}: ends before it starts`);
        if (s.flags !== undefined && (!Number.isInteger(s.flags) || s.flags < 0 || s.flags > 0xffffffff)) {
          throw new Error(`${at}.flags must be a uint32`);
        }
        const code = s.status?.code ?? 0;
        if (!Number.isInteger(code) || code < 0 || code > 2) throw new Error(`${at}.status.code must be 0-2`);
        spans.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId || undefined,
          traceState: s.traceState || undefined,
          name: s.name,
          kind: s.kind,
          start,
          end,
          flags: s.flags,
          status: code,
          attrs: attributes(s.attributes, `${at}.attributes`),
          resource,
          scope,
        });
      }
    }
  }
  return spans;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  let mode: ReceiverMode = { kind: 'ok' };
  let failing = 0;
  const sockets = new Set<Socket>();
  const hung = new Set<http.ServerResponse>();
  const waiters: { n: number; resolve: () => void }[] = [];
  const r: Omit<OtlpReceiver, 'url' | 'port'> & { url: string; port: number } = {
    url: '',
    port: 0,
    posts: [],
    spans: [],
    invalid: [],
    attempts: 0,
    setMode: (m) => {
      mode = m;
    },
    failNext: (n) => {
      failing = n;
    },
    refuse: async () => {
      await new Promise<void>((res) => server.close(() => res()));
      for (const s of sockets) s.destroy();
    },
    accept: () => new Promise<void>((res) => server.listen(r.port, '127.0.0.1', () => res())),
    waitForSpans: (n, ms = 10_000) => {
      if (r.spans.length >= n) return Promise.resolve(r.spans);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out after ${ms} ms waiting for ${n} spans (have ${r.spans.length})`)),
          ms,
        );
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve(r.spans);
          },
        });
      });
    },
    close: async () => {
      for (const res of hung) res.destroy();
      for (const s of sockets) s.destroy();
      await new Promise<void>((res) => server.close(() => res()));
    },
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      r.attempts++;
      if (mode.kind === 'hang') {
        hung.add(res);
        return;
      }
      if (failing > 0) {
        failing--;
        res.writeHead(503).end();
        return;
      }
      if (mode.kind === 'status') {
        res.writeHead(mode.status, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      let spans: ReceivedSpan[];
      try {
        if (req.method !== 'POST') throw new Error(`method ${req.method}, expected POST`);
        if (!String(req.headers['content-type']).startsWith('application/json')) {
          throw new Error(`content-type ${req.headers['content-type']}, expected application/json`);
        }
        spans = decodeExportRequest(Buffer.concat(chunks).toString('utf8'));
      } catch (e) {
        r.invalid.push((e as Error).message);
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ message: String(e) }));
        return;
      }
      r.posts.push({ headers: req.headers, spans });
      r.spans.push(...spans);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"partialSuccess":{}}');
      for (const w of [...waiters]) {
        if (r.spans.length >= w.n) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      }
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  r.port = (server.address() as AddressInfo).port;
  r.url = `http://127.0.0.1:${r.port}/v1/traces`;
  return r;
}

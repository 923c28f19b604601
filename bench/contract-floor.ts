// The contract's floor: what a gateway keeping AISIX's per-request contract must do for the benchmark's chat
// completion, written by hand as one handler for that request alone (`bench/bare-proxy.ts --contract`;
// docs/performance.md "The contract's floor"). Against the bare proxy it prices the contract's work; against Sluice,
// what Sluice's general request path adds to it. What it does per request, as Sluice does for the same request:
//
//   - the caller's key: bearer token, its SHA-256 (cached by token), the key found by hash, the model allowed;
//   - the body parsed, the routing model resolved to its one target, the upstream body serialised with the
//     upstream model, the provider key's authorization, a request id, an upstream deadline armed and cleared;
//   - the answer's `id` and `usage` read, the caller's model name put back in the answer, AISIX's four headers;
//   - every metric series Sluice moves for the request (15 counters, the in-flight gauge, three summaries' windows,
//     one histogram), found by one Map lookup a request for the request's label values;
//   - AISIX's two lines (provider call, access log) as JSON, written once per turn of the event loop.
//
// It keeps no configuration, no policies, no routing choice, no retries, no traces and no /metrics page.
// `--contract-skip part,…` leaves parts out, to price each (bench/burden-socket.ts `contract-no:part+…`): `auth`,
// `body` (the caller's text forwarded as it came), `answer` (the upstream's text returned as it came, no usage),
// `metrics`, `logs`.
import { createHash } from 'node:crypto';
import { flag } from './flags.ts';

/** One answer of the upstream call, as bench/bare-proxy.ts hands it. */
export interface Upstream {
  status: number;
  body: ArrayBuffer;
}

export interface Answer {
  status: number;
  text: string;
  headers: Record<string, string>;
}

const KEY_HASH = '01955e0b0dbd74a561a9fa319de506922b472280b41b5a81054614d3260069ef'; // sk-sluice-bench
const keysByHash = new Map([[KEY_HASH, { id: '7f10b0cc-d24d-520e-865e-dc0b53921746', allowed: new Set(['*']) }]]);
const route = {
  model: 'bench-route',
  servedBy: 'bench-direct',
  provider: 'openai',
  upstreamModel: 'mock-model',
  authorization: 'Bearer sk-bench-upstream',
};
const models = new Map([[route.model, route]]);
const hashes = new Map<string, string>();
const decoder = new TextDecoder();
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 420, 600];
const WINDOW = 512;
const PARTS = ['auth', 'body', 'answer', 'metrics', 'logs'];
const skip = new Set(flag('contract-skip', '').split(',').filter(Boolean));
for (const p of skip) {
  if (!PARTS.includes(p)) throw new Error(`--contract-skip ${p}: the parts are ${PARTS.join(', ')}`);
}
const [noAuth, noBody, noAnswer, noMetrics, noLogs] = PARTS.map((p) => skip.has(p));
const NO_USAGE: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

/** A summary's sliding window of observations (its quantiles are read at scrape time, not per request). */
class Window {
  values = new Float64Array(WINDOW);
  next = 0;
  sum = 0;
  count = 0;
  observe(v: number): void {
    this.values[this.next] = v;
    this.next = (this.next + 1) % WINDOW;
    this.sum += v;
    this.count++;
  }
}

/** Every series one request moves, for one label set. */
class Series {
  counts = new Float64Array(15);
  summaries = [new Window(), new Window(), new Window()];
  buckets = new Float64Array(BUCKETS.length + 1);
  e2eSum = 0;
}

const series = new Map<string, Series>();
/** aisix_proxy_in_flight_requests: moved as Sluice moves it, read by no page here. */
let inFlight = 0;

function seriesOf(model: string, apiKeyId: string, status: number, client: string): Series {
  const id = `${model}\n${apiKeyId}\n${status}\n${client}`;
  let s = series.get(id);
  if (s === undefined) series.set(id, s = new Series());
  return s;
}

function record(s: Series, seconds: number, usage: Usage): void {
  const c = s.counts;
  c[0]!++; // aisix_auth_decisions_total
  c[1]!++; // aisix_deployment_requests_total
  c[2]!++; // aisix_deployment_success_responses_total
  c[3]! += usage.prompt_tokens; // aisix_llm_input_tokens_total
  c[4]! += usage.completion_tokens; // aisix_llm_output_tokens_total
  c[5]! += usage.total_tokens; // aisix_llm_total_tokens_total
  c[6]!++; // aisix_llm_requests_total
  c[7]!++; // aisix_proxy_requests_total
  c[8]!++; // aisix_requests_total
  c[9]! += usage.total_tokens; // aisix_tokens_consumed_total
  c[10]! += usage.prompt_tokens; // aisix_llm_tokens_by_client_total, input
  c[11]! += usage.completion_tokens; // output
  c[12]! += usage.total_tokens; // total
  c[13]!++; // aisix_usage_events_emitted_total
  c[14]!++; // aisix_usage_event_drops_total (no sink)
  s.summaries[0]!.observe(seconds); // aisix_request_duration_seconds
  s.summaries[1]!.observe(seconds); // aisix_proxy_request_duration_seconds
  s.summaries[2]!.observe(seconds); // aisix_llm_request_duration_seconds
  let b = 0;
  while (b < BUCKETS.length && seconds > BUCKETS[b]!) b++;
  s.buckets[b]!++; // aisix_request_e2e_latency_seconds
  s.e2eSum += seconds;
}

let pending: string[] = [];
/** Lines go out once per turn of the event loop, as Sluice's logger writes them. */
function logLine(line: string): void {
  if (pending.length === 0) setTimeout(flush, 0);
  pending.push(line);
}
function flush(): void {
  const out = pending.join('');
  pending = [];
  process.stdout.write(out);
}

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

const refuse = (status: number, message: string): Answer => ({
  status,
  text: JSON.stringify({ error: { message, type: 'invalid_request_error' } }),
  headers: { 'content-type': 'application/json' },
});

function sha256(token: string): string {
  let h = hashes.get(token);
  if (h === undefined) {
    h = createHash('sha256').update(token).digest('hex');
    if (hashes.size < 10_000) hashes.set(token, h);
  }
  return h;
}

/** The request's work around `call` (the upstream hop), for a `POST /v1/chat/completions`. */
export async function contractCall(
  authorization: string,
  userAgent: string,
  bodyText: string,
  call: (body: string, authorization: string) => Promise<Upstream>,
): Promise<Answer> {
  const start = performance.now();
  if (!noAuth && !authorization.startsWith('Bearer ')) return refuse(401, 'missing API key');
  const key = noAuth ? keysByHash.get(KEY_HASH) : keysByHash.get(sha256(authorization.slice(7)));
  if (key === undefined) return refuse(401, 'invalid API key');
  const body = noBody ? { model: route.model } : JSON.parse(bodyText) as Record<string, unknown>;
  const target = typeof body.model === 'string' ? models.get(body.model) : undefined;
  if (target === undefined || !(key.allowed.has('*') || key.allowed.has(target.model))) {
    return refuse(404, 'model not found');
  }
  const requestId = crypto.randomUUID();
  body.model = target.upstreamModel;
  inFlight++;
  const deadline = setTimeout(() => {}, 600_000);
  const sent = performance.now();
  let up: Upstream;
  try {
    up = await call(noBody ? bodyText : JSON.stringify(body), target.authorization);
  } finally {
    clearTimeout(deadline);
    inFlight--;
  }
  const upstreamMs = performance.now() - sent;
  const text = decoder.decode(up.body);
  const answer = noAnswer ? { id: '', usage: NO_USAGE } : JSON.parse(text) as { id: string; usage: Usage };
  const out = noAnswer ? text : text.replace(`"model":"${target.upstreamModel}"`, `"model":"${target.model}"`);
  const ms = performance.now() - start;
  const client = userAgent.startsWith('curl/') ? 'curl' : 'other';
  if (!noMetrics) record(seriesOf(target.model, key.id, up.status, client), ms / 1000, answer.usage);
  if (!noLogs) logLines(requestId, target, key.id, up.status, answer, upstreamMs, ms);
  return {
    status: up.status,
    text: out,
    headers: {
      'content-type': 'application/json',
      'x-aisix-served-by': target.servedBy,
      server: 'sluice/0.1.0',
      'x-aisix-request-id': requestId,
      'x-aisix-call-id': requestId,
    },
  };
}

/**
 * AISIX's two lines for one request, as JSON text: every value is the floor's own or a number but the upstream's
 * answer id, which goes through `JSON.stringify`.
 */
function logLines(
  requestId: string,
  target: typeof route,
  apiKeyId: string,
  status: number,
  answer: { id: string; usage: Usage },
  upstreamMs: number,
  ms: number,
): void {
  const head = `{"time":"${new Date().toISOString()}","level":"INFO","target":"aisix_obs::`;
  const ids = `"request_id":"${requestId}","provider_request_id":${JSON.stringify(answer.id)}`;
  const u = answer.usage;
  logLine(
    `${head}usage","msg":"provider call completed",${ids},"attempt_index":0,"attempt_kind":"initial",` +
      `"handler":"chat","status":${status},"requested_model":"${target.model}",` +
      `"provider_model_version":"${target.upstreamModel}","upstream_latency_ms":${Math.round(upstreamMs)},` +
      `"downstream_latency_ms":${Math.round(ms)}}\n`,
  );
  logLine(
    `${head}access_log","msg":"proxy request completed","method":"POST","path":"/v1/chat/completions",` +
      `"status":${status},"latency_ms":${Math.round(ms)},"provider":"${target.provider}","model":"${target.model}",` +
      `"api_key_id":"${apiKeyId}","prompt_tokens":${u.prompt_tokens},"completion_tokens":${u.completion_tokens},` +
      `"total_tokens":${u.total_tokens},${ids},"served_by_model":"${target.servedBy}",` +
      `"routing_attempt_count":1,"routing_fallback_count":0}\n`,
  );
}

// One hook of one request through its chain (docs/guardrails.md "Verdicts"): members run in order; the
// first block stops the chain; masks rewrite the segments the next member sees; a failing remote member
// bypasses (fail-open), blocks (fail-closed), or blocks because it is mandatory. Monitor members record
// `would_block` / `would_mask` and change nothing, a failure they would have refused on included.
import { GUARDRAIL_MSG, SERVICE_MSG } from './messages.ts';
import type { CheckContext, Guardrail, Hook, Outcome, Segment } from './types.ts';

export type LogFn = (level: 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown>) => void;

/** Where the chain counts (src/observability/guardrail-metrics.ts implements it). */
export interface ChainMetrics {
  observe(
    g: { name: string; kind: string },
    phase: Hook,
    result: 'allowed' | 'blocked' | 'masked' | 'bypassed' | 'would_block' | 'would_mask',
    errorType: string | undefined,
    seconds: number,
  ): void;
  readonly blocks: { inc(): void };
  readonly bypasses: { inc(values: readonly string[]): void };
  /** `aisix_guardrail_semantic_degraded_total{reason}`. */
  readonly semanticDegraded?: { inc(values: readonly string[]): void };
}

export interface ChainDeps {
  ctx: CheckContext;
  metrics?: ChainMetrics | undefined;
  log: LogFn;
  /** Seconds, monotonic. */
  now(): number;
}

/** One member's finding, as AISIX's usage event lists it (`guardrail_monitor_hits`, `guardrail_enforced_hits`). */
export interface Hit {
  guardrail_name: string;
  hook: Hook;
  action: 'masked' | 'blocked' | 'blocked_unavailable' | 'would_block' | 'would_mask';
  reason?: string;
  error_type?: string;
  counts?: Record<string, number>;
  /** How long the member's check took, µs (enforced hits). */
  duration_us?: number;
}

export interface Verdict {
  /** The member that refused, and why (logs only). */
  blocked?: { guardrail: Guardrail; reason: string; errorType?: string };
  /** The segments after every enforced mask (the input ones when nothing masked). */
  segments: readonly Segment[];
  masked: boolean;
  /** Detector / entity names → masked spans, summed over members. */
  counts: Record<string, number>;
  /** The first failure tag of a member that failed open. */
  bypassTag?: string;
  hits: Hit[];
  /** The members that ran on this hook, in order (`applied_guardrails`). */
  applied: { name: string; kind: string; hook: Hook }[];
}

/** The failure-tag family of a remote kind (`aisix_guardrail_bypasses_total{reason}`, the service logs). */
function serviceOf(kind: string): string {
  if (kind.startsWith('aliyun_')) return 'aliyun';
  return kind.startsWith('azure_') ? 'azure_cs' : kind;
}

export async function runChain(
  chain: readonly Guardrail[],
  hook: Hook,
  segments: readonly Segment[],
  deps: ChainDeps,
): Promise<Verdict> {
  const v: Verdict = { segments, masked: false, counts: {}, hits: [], applied: [] };
  const large = isLarge(segments);
  for (const g of chain) {
    if (hook === 'input' ? !g.input : !g.output) continue;
    // A large text takes a while per member even in linear time: let other callers' work run in between.
    if (large) await new Promise((r) => setTimeout(r, 0));
    const t0 = deps.now();
    const o = await checkMember(g, v.segments, hook, deps);
    v.applied.push({ name: g.name, kind: g.kind, hook });
    if (apply(v, g, hook, o, deps, t0) === 'stop') return v;
  }
  return v;
}

/** One member's check of the text as the members before it left it; a throw is the service unavailable. */
async function checkMember(g: Guardrail, segments: readonly Segment[], hook: Hook, deps: ChainDeps): Promise<Outcome> {
  try {
    const r = g.check(segments, hook, {
      ...deps.ctx,
      log: (l, m, f) => deps.log(l, m, { ...f, guardrail: g.name }),
      degraded: (reason) => deps.metrics?.semanticDegraded?.inc([reason]),
    });
    return r instanceof Promise ? await r : r;
  } catch (e) {
    return { kind: 'unavailable', tag: `${serviceOf(g.kind)}_5xx`, reason: `check failed: ${(e as Error).message}` };
  }
}

/** A member's outcome on the verdict, its metric and its log lines; `stop` when the call is refused. */
function apply(v: Verdict, g: Guardrail, hook: Hook, o: Outcome, deps: ChainDeps, t0: number): 'stop' | 'next' {
  const done = (result: Parameters<ChainMetrics['observe']>[2], errorType?: string) =>
    deps.metrics?.observe(g, hook, result, errorType, deps.now() - t0);
  const us = () => Math.round((deps.now() - t0) * 1_000_000);
  if (o.kind === 'allow') {
    done('allowed');
    return 'next';
  }
  if (o.kind === 'block') {
    if (g.monitor) {
      done('would_block');
      deps.log('info', GUARDRAIL_MSG.monitorBlock, { guardrail_name: g.name, hook, reason: o.reason });
      v.hits.push({ guardrail_name: g.name, hook, action: 'would_block', reason: o.reason });
      return 'next';
    }
    done('blocked');
    v.hits.push({ guardrail_name: g.name, hook, action: 'blocked', reason: o.reason, duration_us: us() });
    v.blocked = { guardrail: g, reason: o.reason };
    return 'stop';
  }
  if (o.kind === 'mask') {
    if (g.monitor) {
      done('would_mask');
      deps.log('info', GUARDRAIL_MSG.monitorMask, { guardrail_name: g.name, hook, counts: o.counts });
      v.hits.push({ guardrail_name: g.name, hook, action: 'would_mask', counts: o.counts });
      return 'next';
    }
    done('masked');
    v.hits.push({ guardrail_name: g.name, hook, action: 'masked', counts: o.counts, duration_us: us() });
    v.segments = v.segments.map((s, i) => (o.texts[i] === s.text ? s : { role: s.role, text: o.texts[i] ?? s.text }));
    v.masked = true;
    for (const [k, n] of Object.entries(o.counts)) v.counts[k] = (v.counts[k] ?? 0) + n;
    return 'next';
  }
  return applyUnavailable(v, g, hook, o, deps, done, us);
}

/** A member whose service failed: bypassed where it fails open, a monitor's would-block, else a refusal. */
function applyUnavailable(
  v: Verdict,
  g: Guardrail,
  hook: Hook,
  o: Extract<Outcome, { kind: 'unavailable' }>,
  deps: ChainDeps,
  done: (result: Parameters<ChainMetrics['observe']>[2], errorType?: string) => void,
  us: () => number,
): 'stop' | 'next' {
  const failOpen = hook === 'input' ? g.failOpen : g.outputFailOpen;
  deps.log('warn', (SERVICE_MSG[g.kind] ?? SERVICE_MSG[serviceOf(g.kind)])?.failed ?? 'guardrail call failed', {
    guardrail: g.name,
    failure: o.tag,
    reason: o.reason,
    fail_open: failOpen,
    ...o.fields,
  });
  if (failOpen && !g.mandatory) {
    done('bypassed', o.tag);
    v.bypassTag ??= o.tag;
    return 'next';
  }
  if (g.monitor) {
    // A monitor member never blocks, not even for an outage: refusing traffic is enforcement (AISIX's).
    const reason = `${g.kind} guardrail evaluation unavailable (${o.tag})`;
    done('would_block', o.tag);
    deps.log('info', GUARDRAIL_MSG.monitorBlock, { guardrail_name: g.name, hook, reason });
    v.hits.push({ guardrail_name: g.name, hook, action: 'would_block', reason, error_type: o.tag });
    return 'next';
  }
  if (g.mandatory) deps.log('warn', GUARDRAIL_MSG.mandatoryBlock, { guardrail: g.name, failure: o.tag });
  done('blocked', o.tag);
  v.hits.push({ guardrail_name: g.name, hook, action: 'blocked_unavailable', error_type: o.tag, duration_us: us() });
  v.blocked = { guardrail: g, reason: o.reason, errorType: o.tag };
  return 'stop';
}

/** Over this many characters, the chain gives the event loop a turn before each member. */
const LARGE_TEXT = 65_536;

function isLarge(segments: readonly Segment[]): boolean {
  let n = 0;
  for (const s of segments) n += s.text.length;
  return n > LARGE_TEXT;
}

/** The request-level counters, once per request and hook: a block, a bypass. */
export function countRequest(metrics: ChainMetrics | undefined, v: Verdict): void {
  if (!metrics) return;
  if (v.blocked) metrics.blocks.inc();
  if (v.bypassTag !== undefined) metrics.bypasses.inc([v.bypassTag]);
}

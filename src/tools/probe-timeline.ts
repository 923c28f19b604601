// `sluice probe-timeline` (docs/operations.md "Watching a rollout"): polls the probes and a caller route,
// prints one line per phase change and exits 1 on a dropped request. Only `fetch`, so it runs on every
// runtime and against any gateway with the same probes.
import type { Platform } from '../platform.ts';

export interface ProbeTimelineOptions {
  /** Base URL of the proxy listener (`http://127.0.0.1:3000`). */
  proxy: string;
  /** Base URL of the status listener; `/status/ready` is polled when given. */
  status?: string;
  /** A caller route polled with GET (`/v1/models`); with `key` sent as `Authorization: Bearer`. */
  route?: string;
  key?: string;
  intervalMs: number;
  timeoutMs: number;
  /** Stop after this many seconds. */
  durationSecs?: number;
  /** Stop once every probe is refused after at least one answered (the process exited). */
  untilExit: boolean;
  json: boolean;
}

/** `200`, `503` …, or why there was no answer. */
export type Answer = string;
const NO_ANSWER = new Set(['refused', 'timeout', 'reset', 'error']);

export interface Round {
  /** Milliseconds since the timeline started. */
  at: number;
  livez: Answer;
  readyz: Answer;
  route?: Answer;
  status_ready?: Answer;
}

export interface Phase {
  from_ms: number;
  to_ms: number;
  rounds: number;
  /** `livez/readyz/route/status_ready` (the columns polled), or `refused` when nothing answered. */
  label: string;
}

/**
 * A route failure while `/readyz` said 200 in the same round or the one before: a balancer probing this often
 * could not have stopped routing in time (docs/operations.md "Watching a rollout").
 */
export interface Drop {
  at_ms: number;
  route: Answer;
  readyz: Answer;
  previous_readyz: Answer | null;
}

export interface TimelineSummary {
  columns: string[];
  rounds: number;
  duration_ms: number;
  route_ok: number;
  route_failed: number;
  /** First round whose `/readyz` answered 200. */
  first_ready_ms: number | null;
  /** First round, after a 200, whose `/readyz` did not answer 200 (the drain began). */
  readyz_failed_ms: number | null;
  /** The last 2xx of the route after `/readyz` failed, and how long after the failure it was. */
  last_route_ok_after_readyz_failed_ms: number | null;
  /** First round where nothing answered after something had (the process exited). */
  everything_refused_ms: number | null;
  dropped: Drop[];
}

export interface Timeline {
  phases: Phase[];
  summary: TimelineSummary;
}

/** What a failed fetch means, from the error's text: each runtime words it differently. */
export function classifyFetchError(e: unknown): Answer {
  const parts: string[] = [];
  const add = (x: unknown): void => {
    if (x && typeof x === 'object') {
      const o = x as { name?: unknown; code?: unknown; message?: unknown };
      parts.push(String(o.name ?? ''), String(o.code ?? ''), String(o.message ?? ''));
    } else parts.push(String(x));
  };
  add(e);
  add((e as { cause?: unknown } | undefined)?.cause);
  const text = parts.join(' ');
  if (/refused/i.test(text)) return 'refused';
  if (/timeout|timed out/i.test(text)) return 'timeout';
  if (/reset|hang up|closed|EPIPE|aborted/i.test(text)) return 'reset';
  return 'error';
}

const ok2xx = (a: Answer | undefined): boolean => a !== undefined && /^2\d\d$/.test(a);

/** Folds rounds into phases and the summary; pure, so a run can be replayed. */
export class TimelineBuilder {
  readonly phases: Phase[] = [];
  private rounds = 0;
  private last: Round | undefined;
  private answered = false;
  private s: TimelineSummary;

  constructor(readonly columns: string[]) {
    this.s = {
      columns,
      rounds: 0,
      duration_ms: 0,
      route_ok: 0,
      route_failed: 0,
      first_ready_ms: null,
      readyz_failed_ms: null,
      last_route_ok_after_readyz_failed_ms: null,
      everything_refused_ms: null,
      dropped: [],
    };
  }

  label(r: Round): string {
    const answers = this.columns.map((c) => r[c as keyof Round] as Answer);
    if (answers.every((a) => a === 'refused')) return 'refused';
    return answers.join('/');
  }

  /** Add one round; returns the new phase when this round starts one. */
  add(r: Round): Phase | undefined {
    const s = this.s;
    this.rounds++;
    s.rounds = this.rounds;
    s.duration_ms = r.at;
    if (r.readyz === '200' && s.first_ready_ms === null) s.first_ready_ms = r.at;
    if (r.readyz !== '200' && s.first_ready_ms !== null && s.readyz_failed_ms === null) s.readyz_failed_ms = r.at;
    if (r.route !== undefined) {
      if (ok2xx(r.route)) {
        s.route_ok++;
        if (s.readyz_failed_ms !== null) s.last_route_ok_after_readyz_failed_ms = r.at - s.readyz_failed_ms;
      } else {
        s.route_failed++;
        const previous = this.last?.readyz ?? null;
        if (r.readyz === '200' || previous === '200') {
          s.dropped.push({ at_ms: r.at, route: r.route, readyz: r.readyz, previous_readyz: previous });
        }
      }
    }
    const anyAnswer = this.columns.some((c) => !NO_ANSWER.has(r[c as keyof Round] as Answer));
    if (anyAnswer) this.answered = true;
    else if (this.answered && s.everything_refused_ms === null) s.everything_refused_ms = r.at;
    this.last = r;
    const label = this.label(r);
    const current = this.phases.at(-1);
    if (current && current.label === label) {
      current.to_ms = r.at;
      current.rounds++;
      return undefined;
    }
    const phase: Phase = { from_ms: r.at, to_ms: r.at, rounds: 1, label };
    this.phases.push(phase);
    return phase;
  }

  /** Something answered, and now nothing does: the process is gone. */
  exited(): boolean {
    return this.s.everything_refused_ms !== null;
  }

  timeline(): Timeline {
    return { phases: this.phases, summary: this.s };
  }
}

const secs = (ms: number): string => `${(ms / 1000).toFixed(3)} s`;

export function formatPhase(p: Phase): string {
  return `${secs(p.from_ms).padStart(10)}  ${p.label}`;
}

export function formatSummary(t: Timeline): string[] {
  const s = t.summary;
  const lines = [
    `phases: ${t.phases.map((p) => p.label).join(' → ')}`,
    `rounds: ${s.rounds} over ${secs(s.duration_ms)}`,
  ];
  if (s.columns.includes('route')) lines.push(`route: ${s.route_ok} ok, ${s.route_failed} failed`);
  if (s.first_ready_ms !== null) lines.push(`/readyz first 200 at ${secs(s.first_ready_ms)}`);
  if (s.readyz_failed_ms !== null) lines.push(`/readyz stopped answering 200 at ${secs(s.readyz_failed_ms)}`);
  if (s.last_route_ok_after_readyz_failed_ms !== null) {
    lines.push(`route still served ${secs(s.last_route_ok_after_readyz_failed_ms)} after /readyz failed`);
  }
  if (s.everything_refused_ms !== null) lines.push(`everything refused from ${secs(s.everything_refused_ms)}`);
  lines.push(
    s.dropped.length === 0
      ? 'dropped requests: 0'
      : `dropped requests: ${s.dropped.length} (route failed while /readyz still said 200): ${
        s.dropped.map((d) => `${secs(d.at_ms)} ${d.route}`).join(', ')
      }`,
  );
  return lines;
}

/** One GET; the status code, or why there was none. */
async function answer(url: string, timeoutMs: number, headers?: Record<string, string>): Promise<Answer> {
  try {
    const res = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' });
    await res.arrayBuffer();
    return String(res.status);
  } catch (e) {
    return classifyFetchError(e);
  }
}

const join = (base: string, path: string): string => `${base.replace(/\/+$/, '')}${path}`;

export interface RunHooks {
  /** Resolves to stop early (SIGINT). */
  stop?: Promise<void>;
  print: (line: string) => void;
}

/** Poll until a bound is reached; prints phases as they change (text mode) and returns the timeline. */
export async function probeTimeline(o: ProbeTimelineOptions, hooks: RunHooks): Promise<Timeline> {
  const columns = ['livez', 'readyz', ...(o.route ? ['route'] : []), ...(o.status ? ['status_ready'] : [])];
  const b = new TimelineBuilder(columns);
  const auth = o.key ? { authorization: `Bearer ${o.key}` } : undefined;
  let stopped = false;
  void hooks.stop?.then(() => {
    stopped = true;
  });
  if (!o.json) {
    hooks.print(
      `probe-timeline: ${o.proxy}${o.route ? ` · route GET ${o.route}` : ''}${
        o.status ? ` · status ${o.status}` : ''
      } · every ${o.intervalMs} ms`,
    );
    hooks.print(`columns: ${columns.join('/')}`);
  }
  // The first round starts the timeline, so it reads 0.000 s whatever the clock ticks between the two reads.
  const t0 = Date.now();
  for (let started = t0; !stopped; started = Date.now()) {
    const [livez, readyz, route, statusReady] = await Promise.all([
      answer(join(o.proxy, '/livez'), o.timeoutMs),
      answer(join(o.proxy, '/readyz'), o.timeoutMs),
      o.route ? answer(join(o.proxy, o.route), o.timeoutMs, auth) : undefined,
      o.status ? answer(join(o.status, '/status/ready'), o.timeoutMs) : undefined,
    ]);
    const r: Round = { at: started - t0, livez: livez!, readyz: readyz! };
    if (route !== undefined) r.route = route;
    if (statusReady !== undefined) r.status_ready = statusReady;
    const phase = b.add(r);
    if (phase && !o.json) hooks.print(formatPhase(phase));
    if (o.untilExit && b.exited()) break;
    if (o.durationSecs !== undefined && Date.now() - t0 >= o.durationSecs * 1000) break;
    const wait = o.intervalMs - (Date.now() - started);
    if (wait > 0) await Promise.race([new Promise((r) => setTimeout(r, wait)), hooks.stop ?? new Promise(() => {})]);
  }
  const t = b.timeline();
  if (o.json) hooks.print(JSON.stringify(t));
  else for (const line of formatSummary(t)) hooks.print(line);
  return t;
}

/** The command: exit 0, or 1 when a request was dropped. */
export async function runProbeTimeline(platform: Platform, o: ProbeTimelineOptions): Promise<number> {
  let interrupt!: () => void;
  const stop = new Promise<void>((r) => {
    interrupt = r;
  });
  platform.onSignal('SIGINT', () => interrupt());
  platform.onSignal('SIGTERM', () => interrupt());
  const out = platform.writeOut ? (l: string) => platform.writeOut!(`${l}\n`) : (l: string) => platform.writeLog(l);
  const t = await probeTimeline(o, { stop, print: out });
  return t.summary.dropped.length > 0 ? 1 : 0;
}

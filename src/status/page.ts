// `GET /status`: one server-rendered HTML page for a person (docs/operations.md "The status page"), built
// from the bodies the JSON endpoints serve so it can show nothing they do not. No script and no external
// asset, so it works offline under `default-src 'none'`; every value goes through the escaping `html` tag.
import { type DrainReport, drainReportBody } from '../lifecycle/drain-report.ts';
import type { Lifecycle } from '../lifecycle/state.ts';
import type { Listener, Platform } from '../platform.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { EpochTime, ModelHealth, ModelStatusRow } from '../routing/health.ts';
import { guardrailMetricsFor } from '../observability/guardrail-metrics.ts';
import { type GuardrailStatusRow, guardrailStatusRows } from './guardrails.ts';
import type { Registry } from '../observability/metrics.ts';
import { VERSION } from '../version.ts';
import { type ConfigFactsView, configStatusBody, type RejectedRow } from '../config-facts.ts';
import type { ModelLatency } from '../observability/gateway-metrics.ts';

/** What the page reads; the Gateway is one. */
export interface StatusPageView {
  readonly lifecycle: Lifecycle;
  readonly facts: ConfigFactsView;
  readonly snapshot: Snapshot | undefined;
  readonly health: Pick<ModelHealth, 'statusRow'>;
  readonly proxyListener: Pick<Listener, 'openConnections'> | undefined;
  readonly platform: Pick<Platform, 'name'>;
  /** Latency per model from the SLO histograms; where the guardrail results are counted (the registry). */
  readonly metrics: { latencyByModel(): ModelLatency[]; render(): string; readonly registry?: Registry };
  /** The response cache's hit ratio per policy (docs/cache.md); no section while no policy applied. */
  readonly cache?: { hitRatios(): { policy: string; lookups: number; hits: number }[] };
  /** Readiness checks as `/readyz` prints them: a name and its failure, if any. */
  checks(): [string, string | undefined][];
  now(): Date;
}

export const REFRESH_SECS = 5;

/** Markup the page built itself; anything else interpolated into `html` is escaped. */
export class Html {
  constructor(readonly text: string) {}
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => ESCAPES[ch]!);
}

function piece(v: unknown): string {
  if (v instanceof Html) return v.text;
  if (Array.isArray(v)) return v.map(piece).join('');
  if (v === undefined || v === null || v === false) return '';
  return escapeHtml(String(v));
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += piece(values[i]) + strings[i + 1]!;
  return new Html(out);
}

type Tone = 'good' | 'warn' | 'bad' | 'idle';

export const badge = (text: string, tone: Tone): Html => html`<span class="badge ${tone}">${text}</span>`;

const PHASE_TONE: Record<string, Tone> = {
  serving: 'good',
  draining: 'warn',
  waiting: 'idle',
  starting: 'idle',
  stopped: 'bad',
};
const CONFIG_TONE: Record<string, Tone> = {
  synced: 'good',
  degraded: 'warn',
  empty: 'warn',
  out_of_sync: 'bad',
  never_loaded: 'bad',
};
const MODEL_TONE: Record<string, Tone> = {
  healthy: 'good',
  cooldown: 'warn',
  unhealthy: 'bad',
  not_applicable: 'idle',
};
const VERDICT_TONE: Record<string, Tone> = {
  ok: 'good',
  window_generous: 'idle',
  window_too_short: 'bad',
  no_arrivals: 'idle',
};

const epochMs = (t: EpochTime): number => t.secs_since_epoch * 1000 + Math.floor(t.nanos_since_epoch / 1e6);

/** `3 s ago` / `in 42 s` next to an ISO time, relative to the page's own clock. */
function when(ms: number | undefined, now: number): Html {
  if (ms === undefined || Number.isNaN(ms)) return html`<span class="muted">—</span>`;
  const d = Math.round((ms - now) / 1000);
  const rel = d === 0 ? 'now' : d < 0 ? `${duration(-d)} ago` : `in ${duration(d)}`;
  return html`<time datetime="${new Date(ms).toISOString()}" title="${new Date(ms).toISOString()}">${rel}</time>`;
}

function duration(s: number): string {
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${Math.round(s / 3600)} h`;
}

const iso = (v: unknown): number | undefined => (typeof v === 'string' ? Date.parse(v) : undefined);

function stat(label: string, value: Html | string | number, note?: Html | string): Html {
  return html`<div class="stat"><div class="label">${label}</div><div class="value">${value}</div>${
    note !== undefined ? html`<div class="note">${note}</div>` : ''
  }</div>`;
}

export function table(head: string[], rows: Html[], empty: string): Html {
  if (rows.length === 0) return html`<p class="muted">${empty}</p>`;
  return html`
    <div class="scroll">
      <table>
        <thead>
          <tr>${head.map((h) => html`<th>${h}</th>`)}</tr>
        </thead>
        <tbody>${rows}</tbody>
      </table>
    </div>
  `;
}

/** Rows of a definition list; a row marked `wide` spans the whole width (hashes). */
function dl(rows: [string, unknown, 'wide'?][]): Html {
  return html`<dl>${
    rows.map(([k, v, wide]) =>
      html`
        <div class="${wide ?? ''}">
          <dt>${k}</dt>
          <dd>${v === undefined || v === null || v === '' ? '—' : v}</dd>
        </div>
      `
    )
  }</dl>`;
}

function drainSection(r: DrainReport | null, now: number): Html {
  if (!r) return html`<p class="muted">Not draining. On SIGTERM this shows the drain as it runs.</p>`;
  const verdict = r.verdict === null
    ? badge(r.complete ? 'complete' : 'window still open', 'warn')
    : badge(r.verdict, VERDICT_TONE[r.verdict] ?? 'idle');
  return html`${
    dl([
      ['verdict', verdict],
      ['signal', when(iso(r.signal_at), now)],
      ['min_drain_secs', r.min_drain_secs],
      ['drain_secs', r.drain_secs],
      ['last arrival after (s)', r.last_arrival_after_secs],
      ['arrivals while draining', r.arrivals_while_draining],
      ['new connections while draining', r.new_connections_while_draining],
      ['/readyz answered 503', r.readyz_failed_probes],
      ['longest in flight (s)', r.longest_in_flight_secs],
      ['recommended min_drain_secs', r.recommended_min_drain_secs],
      ['recommended grace period (s)', r.recommended_grace_period_secs],
    ])
  }`;
}

function rejectedRow(r: RejectedRow & { serving_stale_age_seconds?: number }, now: number): Html {
  return html`
    <tr>
      <td>${r.resource_kind}</td>
      <td class="mono">${r.resource_id}</td>
      <td>${r.last_error_kind}</td>
      <td class="wrap">${r.last_error}</td>
      <td>${when(iso(r.first_seen_at), now)}</td>
      <td>${when(iso(r.last_seen_at), now)}</td>
      <td>${r.serving_stale_since ? html`stale for ${duration(r.serving_stale_age_seconds ?? 0)}` : 'not served'}</td>
    </tr>
  `;
}

function modelRow(m: ModelStatusRow, now: number): Html {
  return html`
    <tr>
      <td><strong>${m.display_name}</strong><div class="muted mono small model-id">${m.id}</div></td>
      <td>${m.kind}</td>
      <td>${badge(m.status.replace('_', ' '), MODEL_TONE[m.status] ?? 'idle')}</td>
      <td>${m.status_reason ?? ''}</td>
      <td>${m.cooldown_until ? when(epochMs(m.cooldown_until), now) : html`<span class="muted">—</span>`}</td>
      <td>${m.last_checked_at
        ? when(epochMs(m.last_checked_at), now)
        : html`<span class="muted">—</span>`}${m.last_check_status !== undefined
        ? html`
          <span class="muted">(${m.last_check_status})</span>
        `
        : ''}</td>
    </tr>
  `;
}

/** Seconds as `340 ms` / `2.4 s`; a dash when nothing was observed. */
function seconds(v: number | undefined): Html | string {
  if (v === undefined) return html`<span class="muted">—</span>`;
  return v < 1 ? `${Math.round(v * 1000)} ms` : `${v.toFixed(v < 10 ? 2 : 1)} s`;
}

function latencyRow(m: ModelLatency): Html {
  return html`
    <tr>
      <td><strong>${m.model}</strong></td>
      <td>${m.requests}</td>
      <td>${seconds(m.latencyP50)}</td>
      <td>${seconds(m.latencyP95)}</td>
      <td>${m.streams}</td>
      <td>${seconds(m.ttftP50)}</td>
      <td>${seconds(m.ttftP95)}</td>
    </tr>
  `;
}

function guardrailRow(g: GuardrailStatusRow): Html {
  const results = Object.entries(g.results).map(([k, n]) => `${n} ${k.replace('_', ' ')}`).join(' · ');
  return html`
    <tr>
      <td><strong>${g.name}</strong><div class="muted mono small model-id">${g.id}</div></td>
      <td>${g.kind}</td>
      <td>${g.hooks}</td>
      <td>${badge(g.mode, g.mode === 'monitor' ? 'warn' : 'good')}</td>
      <td>${g.failure ?? html`<span class="muted">—</span>`}</td>
      <td>${g.attachments === 0 ? 'everywhere' : `${g.attachments} attachment(s)`}</td>
      <td>${results || html`<span class="muted">none yet</span>`}</td>
    </tr>
  `;
}

/** The response cache's policies that applied to a request since boot, with their hit ratio. */
function cacheSection(rows: { policy: string; lookups: number; hits: number }[]): Html | string {
  if (rows.length === 0) return '';
  const ratio = (r: { lookups: number; hits: number }) => `${((100 * r.hits) / r.lookups).toFixed(1)} %`;
  return html`<section id="cache"><h2>Response cache</h2>${
    table(
      ['policy', 'requests', 'hits', 'hit ratio'],
      rows.map((r) =>
        html`
          <tr>
            <td>${r.policy}</td>
            <td>${r.lookups}</td>
            <td>${r.hits}</td>
            <td>${ratio(r)}</td>
          </tr>
        `
      ),
      '',
    )
  }</section>`;
}

/** Where the page is served: the base of its JSON reads, and links to the pages beside it. */
export interface StatusPagePlace {
  /** `/status` on the status listener; the admin page serves the same reads behind its session. */
  readonly json: string;
  readonly nav?: Html;
}

const STATUS_LISTENER: StatusPagePlace = { json: '/status' };

/** The page's bytes for the gateway's state at `now`. */
export function statusPageHtml(
  gw: StatusPageView,
  now = gw.now().getTime(),
  place: StatusPagePlace = STATUS_LISTENER,
): string {
  const phase = gw.lifecycle.phase;
  const checks = gw.checks();
  const ready = checks.every(([, failure]) => failure === undefined);
  const config = configStatusBody(gw.facts, new Date(now));
  const source = config.source as Record<string, unknown>;
  const applied = config.applied as Record<string, unknown> | undefined;
  const lastReload = config.last_reload as { successful: boolean; at: string } | undefined;
  const lastFailure = config.last_failure as { at: string; last_error_kind: string; last_error: string } | null;
  const rejected = config.rejected as (RejectedRow & { serving_stale_age_seconds?: number })[];
  const state = config.state as string;
  const models = gw.snapshot ? gw.snapshot.resources.models.map((m) => gw.health.statusRow(m, now)) : [];
  const down = models.filter((m) => m.status === 'cooldown' || m.status === 'unhealthy').length;
  const drain = drainReportBody(gw, now);
  const open = gw.proxyListener?.openConnections();
  const counts = applied?.resource_counts as Record<string, number> | undefined;
  const registry = gw.metrics?.registry;
  const guardrails = guardrailStatusRows(gw.snapshot, registry ? guardrailMetricsFor(registry) : undefined);

  const page = html`
    <!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta http-equiv="refresh" content="${REFRESH_SECS}">
        <title>Sluice · ${phase}</title>
        <style>${new Html(CSS)}</style>
      </head>
      <body>
        <header>
          <div class="brand">Sluice <span class="muted">${VERSION} on ${gw.platform.name}</span></div>
          ${place.nav ?? ''}
          <div>${badge(phase, PHASE_TONE[phase] ?? 'idle')} ${badge(
            ready ? 'ready' : 'not ready',
            ready ? 'good' : 'bad',
          )}</div>
        </header>
        <main>
          <section id="summary" class="stats">${[
            stat('phase', badge(phase, PHASE_TONE[phase] ?? 'idle')),
            stat(
              'readiness',
              badge(ready ? 'ready' : 'not ready', ready ? 'good' : 'bad'),
              checks.map(([name, failure]) =>
                `${failure === undefined ? '✓' : '✗'} ${name}${failure ? `: ${failure}` : ''}`
              )
                .join('  '),
            ),
            stat('in flight', gw.lifecycle.inFlight, 'requests being served'),
            stat(
              'open connections',
              open ?? '—',
              open === undefined ? 'not counted on this runtime' : 'downstream, pooled included',
            ),
            stat(
              'configuration',
              badge(state.replace('_', ' '), CONFIG_TONE[state] ?? 'idle'),
              `${rejected.length} rejected`,
            ),
            stat('models', `${models.length - down} / ${models.length}`, down > 0 ? `${down} down` : 'none down'),
          ]}</section>
          <section id="drain"><h2>Drain</h2>${drainSection(drain, now)}</section>
          <section id="config"><h2>Configuration ${badge(
            state.replace('_', ' '),
            CONFIG_TONE[state] ?? 'idle',
          )}</h2>${dl([
            [
              'source',
              `${source.type}${
                source.connected === undefined ? '' : source.connected ? ' · connected' : ' · disconnected'
              }`,
            ],
            ['config hash', applied ? html`<span class="mono">${applied.config_hash}</span>` : undefined, 'wide'],
            [
              'source hash',
              source.source_hash ? html`<span class="mono">${source.source_hash}</span>` : undefined,
              'wide',
            ],
            ['applied revision', applied?.applied_revision],
            ['observed revision', source.observed_revision],
            ['apply #', applied?.apply_seq],
            ['applied', applied ? when(iso(applied.applied_at), now) : undefined],
            [
              'last reload',
              lastReload
                ? html`${
                  badge(lastReload.successful ? 'succeeded' : 'failed', lastReload.successful ? 'good' : 'bad')
                } ${when(iso(lastReload.at), now)}`
                : undefined,
            ],
            [
              'last failure',
              lastFailure
                ? html`${lastFailure.last_error_kind}: <span class="wrap">${lastFailure.last_error}</span> ${
                  when(iso(lastFailure.at), now)
                }`
                : undefined,
            ],
            ['resources', counts ? Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(' · ') : undefined],
          ])}<h3>Rejected resources</h3>${table(
            ['kind', 'id', 'error kind', 'error', 'first seen', 'last seen', 'serving'],
            rejected.map((r) => rejectedRow(r, now)),
            'None: every resource of the source is served.',
          )}</section>
          <section id="models"><h2>Models</h2>${table(
            ['model', 'kind', 'status', 'reason', 'cooldown until', 'last check'],
            models.map((m) => modelRow(m, now)),
            'No configuration applied yet.',
          )}</section>
          <section
            id="latency"><h2>Latency</h2>${table(
              ['model', 'requests', 'latency p50', 'latency p95', 'streams', 'first token p50', 'first token p95'],
              gw.metrics.latencyByModel().map(latencyRow),
              'No model request served yet.',
            )}<p class="muted small">Since start, from the bucket counts of aisix_request_e2e_latency_seconds (arrival to last byte) and aisix_request_ttft_seconds (upstream time to first token), interpolated as histogram_quantile does.</p></section>
          ${guardrails.length === 0 ? '' : html`<section id="guardrails"><h2>Guardrails</h2>${
            table(
              ['guardrail', 'kind', 'checks', 'mode', 'on failure', 'applies', 'results'],
              guardrails.map(guardrailRow),
              '',
            )
          }</section>`}
          ${cacheSection(gw.cache?.hitRatios() ?? [])}
        </main>
        <footer>Generated ${new Date(now)
          .toISOString()} · refreshes every ${REFRESH_SECS} s · JSON: ${['config', 'models', 'drain', 'ready'].map((
            r,
            i,
          ) => html`${i > 0 ? ' · ' : ''}<a href="${place.json}/${r}">${place.json}/${r}</a>`)}</footer>
      </body>
    </html>
  `;
  return `${page.text.trim()}\n`;
}

/** Headers of the page: no asset may load from anywhere, and nothing may frame it. */
export const STATUS_PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
};

export const CSS = `
:root{--bg:#f5f6f8;--card:#fff;--ink:#1c2430;--muted:#6b7685;--line:#e3e7ec;--good:#1a7f4b;--good-bg:#e3f5ea;
--warn:#9a6200;--warn-bg:#fff2d6;--bad:#b42318;--bad-bg:#fde7e5;--idle:#4b5563;--idle-bg:#eceff3;--accent:#2f5bd3}
@media (prefers-color-scheme:dark){:root{--bg:#12161c;--card:#1b2129;--ink:#e6e9ee;--muted:#96a0ad;--line:#2a323d;
--good:#5fd08f;--good-bg:#183a28;--warn:#f0b84a;--warn-bg:#3d2f12;--bad:#ff8a80;--bad-bg:#45201d;--idle:#c3cad3;
--idle-bg:#2a313b;--accent:#8fb0ff}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
header{display:flex;flex-wrap:wrap;gap:8px;justify-content:space-between;align-items:center;padding:14px 24px;
background:var(--card);border-bottom:1px solid var(--line)}
.brand{font-weight:700;font-size:18px}
main{max-width:1200px;margin:0 auto;padding:20px 16px;display:grid;gap:16px}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 20px;min-width:0}
h2{margin:0 0 12px;font-size:16px;display:flex;gap:10px;align-items:center}
h3{margin:18px 0 8px;font-size:14px;color:var(--muted);font-weight:600}
.stats{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:12px;background:none;border:0;padding:0}
.stat{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:12px 16px;min-width:0}
.stat .label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.stat .value{font-size:24px;font-weight:650;margin:2px 0}
.stat .note{color:var(--muted);font-size:12px;overflow-wrap:anywhere}
.badge{display:inline-block;padding:1px 9px;border-radius:999px;font-size:13px;font-weight:600;white-space:nowrap}
.stat .badge{font-size:15px}
.good{color:var(--good);background:var(--good-bg)}.warn{color:var(--warn);background:var(--warn-bg)}
.bad{color:var(--bad);background:var(--bad-bg)}.idle{color:var(--idle);background:var(--idle-bg)}
dl{display:grid;grid-template-columns:repeat(auto-fit,minmax(260px,1fr));gap:6px 24px;margin:0}
dl div{display:flex;justify-content:space-between;gap:12px;border-bottom:1px dashed var(--line);padding:4px 0;min-width:0}
dl div.wide{grid-column:1/-1}
dt{color:var(--muted)}dd{margin:0;text-align:right;min-width:0;overflow-wrap:anywhere}
.scroll{overflow-x:auto}
table{width:100%;border-collapse:collapse;font-size:14px}
th{text-align:left;color:var(--muted);font-weight:600;font-size:12px;text-transform:uppercase;letter-spacing:.04em;
border-bottom:1px solid var(--line);padding:6px 10px}
td{border-bottom:1px solid var(--line);padding:8px 10px;vertical-align:top}
tbody tr:hover{background:var(--bg)}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px;overflow-wrap:anywhere}
.small{font-size:12px}.muted{color:var(--muted)}.wrap{overflow-wrap:anywhere}
footer{max-width:1200px;margin:0 auto;padding:4px 16px 24px;color:var(--muted);font-size:13px}
a{color:var(--accent)}
@media (max-width:640px){header{padding:12px 16px}main{padding:12px 10px}section{padding:14px}
.stat .value{font-size:20px}td,th{padding:6px}table{min-width:520px}.model-id{display:none}}
`;

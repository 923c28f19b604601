// The status listener: /status/*, /metrics and the page (docs/operations.md, docs/aisix-compatibility.md
// "Metrics"). No authentication, so no body may carry a secret.
import { type Context, Hono } from 'hono';
import type { Config } from '../config/schema.ts';
import { drainReportBody } from '../lifecycle/drain-report.ts';
import { methodNotAllowed } from '../lifecycle/probes.ts';
import { PROMETHEUS_CONTENT_TYPE } from '../observability/metrics.ts';
import type { ModelHealth } from '../routing/health.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { configStatusBody } from '../config-facts.ts';
import type { ModelLatency } from '../observability/gateway-metrics.ts';
import { STATUS_PAGE_HEADERS, statusPageHtml, type StatusPageView } from './page.ts';

/** What `/status/models` reads: the served models and their health. */
export interface ModelsStatusView {
  readonly snapshot: Snapshot | undefined;
  readonly health: Pick<ModelHealth, 'statusRow'>;
}

/** What the status listener reads; the Gateway is one. */
export interface StatusView extends StatusPageView {
  readonly config: { readonly observability: Config['observability'] };
  readonly metrics: { render(): string; latencyByModel(): ModelLatency[] };
}

const TEXT = { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff' };

export function createStatusApp(gw: StatusView): Hono {
  const app = new Hono();
  const metricsPath = gw.config.observability.metrics.prometheus.path;
  const routes: [string, (c: Context) => Response][] = [
    ['/status/ready', (c) => (gw.snapshot ? c.body('ok', 200, TEXT) : c.body('no configuration available', 503, TEXT))],
    ['/status/config', (c) => c.json(configStatusBody(gw.facts, gw.now()))],
    ['/status/models', () => modelsStatus(gw)],
    ['/status/drain', (c) => c.json({ phase: gw.lifecycle.phase, drain: drainReportBody(gw) })],
    ['/status', (c) => c.body(statusPageHtml(gw), 200, STATUS_PAGE_HEADERS)],
    [metricsPath, (c) => c.body(gw.metrics.render(), 200, { 'content-type': PROMETHEUS_CONTENT_TYPE })],
  ];
  for (const [path, handler] of routes) {
    app.get(path, handler);
    app.all(path, methodNotAllowed);
  }
  return app;
}

/** `/status/models` body; the admin's `/admin/v1/models/status` serves the same bytes. */
export function modelsStatus(gw: ModelsStatusView): Response {
  const rows = gw.snapshot ? gw.snapshot.resources.models.map((m) => gw.health.statusRow(m)) : [];
  return new Response(JSON.stringify(rows), { headers: { 'content-type': 'application/json' } });
}

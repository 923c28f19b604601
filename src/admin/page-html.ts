// The admin page's markup (docs/admin.md "The admin page"): the status page's style and escaping `html` tag,
// forms that work without JavaScript, and two small inline scripts (copy a key, confirm a revocation) allowed by
// a per-response nonce. Every value shown comes from an admin API answer, so the page shows nothing the API
// would not (never a hash).
import { badge, CSS, Html, html, table } from '../status/page.ts';
import type { SpendRow } from './spend-report.ts';

/** One api key row as `GET /admin/v1/api_keys` lists it. */
export interface KeyEntry {
  id: string;
  value: Record<string, unknown>;
}

/** One model as `/admin/v1/models/status` serves it (the status page's row). */
export interface ModelEntry {
  id: string;
  display_name: string;
  kind?: string;
  status: string;
  status_reason?: string;
}

/** A spend report or why there is none. */
export type SpendView = { rows: SpendRow[] } | { unavailable: string };

export interface Dashboard {
  scope: 'read' | 'write';
  csrf: string;
  writesEnabled: boolean;
  keys: KeyEntry[];
  models: ModelEntry[];
  modelBudgets: Map<string, unknown>;
  spendByKey: SpendView;
  spendByTeam: SpendView;
  notice?: string;
}

const MODEL_TONE: Record<string, 'good' | 'warn' | 'bad' | 'idle'> = {
  healthy: 'good',
  cooldown: 'warn',
  unhealthy: 'bad',
};

const PAGE_CSS = `
form.inline{display:inline-flex;gap:6px;align-items:center;margin:0 6px 4px 0}
form.stack{display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:10px;align-items:end}
label{display:grid;gap:3px;font-size:13px;color:var(--muted)}
input{font:inherit;padding:6px 8px;border:1px solid var(--line);border-radius:6px;background:var(--bg);color:var(--ink)}
input.grace{width:90px}
button{font:inherit;padding:6px 12px;border-radius:6px;border:1px solid var(--accent);background:var(--accent);
color:#fff;cursor:pointer}
button.quiet{background:none;color:var(--accent)}button.danger{border-color:var(--bad);background:var(--bad)}
.secret{font-family:ui-monospace,monospace;font-size:15px;padding:10px;border:1px dashed var(--warn);
background:var(--warn-bg);border-radius:6px;overflow-wrap:anywhere}
.notice{border-left:4px solid var(--accent)}.error{border-left:4px solid var(--bad)}
svg text{fill:var(--muted);font-size:11px}
`;

/** The whole page around `body`; `csrf` given: signed in, with the sign-out form. */
export function layout(title: string, body: Html, nonce: string, csrf?: string, scope?: string): string {
  const page = html`
    <!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Sluice admin · ${title}</title>
        <style>${new Html(CSS + PAGE_CSS)}</style>
      </head>
      <body>
        <header>
          <div class="brand">Sluice <span class="muted">admin</span></div>
          ${csrf === undefined
            ? ''
            : html`<nav class="muted"><strong>Admin page</strong> · <a href="/admin/page/status">Status</a></nav>`}
          <div>${csrf === undefined ? '' : html`${badge(scope === 'write' ? 'read and write' : 'read only', 'idle')}
            <form class="inline" method="post" action="/admin/page/sign-out">
              <input type="hidden" name="csrf" value="${csrf}"><button class="quiet" type="submit">Sign out</button>
            </form>`}</div>
        </header>
        <main>${body}</main>
        <script nonce="${nonce}">${new Html(SCRIPT)}</script>
      </body>
    </html>
  `;
  return `${page.text.trim()}\n`;
}

// Progressive: without JavaScript the forms post as they are and the key is selected by hand.
const SCRIPT = `
for (const b of document.querySelectorAll('button[data-copy]')) {
  b.hidden = false;
  b.addEventListener('click', () => navigator.clipboard.writeText(document.getElementById(b.dataset.copy).textContent));
}
for (const f of document.querySelectorAll('form[data-confirm]')) {
  f.addEventListener('submit', (e) => { if (!confirm(f.dataset.confirm)) e.preventDefault(); });
}
`;

export function signInBody(error?: string): Html {
  return html`
    <section>
      <h2>Sign in</h2>
      ${error ? html`<p class="bad" role="alert">${error}</p>` : ''}
      <form class="stack" method="post" action="/admin/page/sign-in">
        <label>Admin key (admin.admin_keys reads; admin.write_keys also writes)
          <input type="password" name="key" autocomplete="current-password" required autofocus></label>
        <button type="submit">Sign in</button>
      </form>
    </section>
  `;
}

/** The answer of an issue or a rotation: the plaintext, shown on this page only. */
export function issuedBody(action: 'issued' | 'rotated', id: string, key: string, grace?: string): Html {
  return html`
    <section class="notice">
      <h2>Key ${action}: <span class="mono">${id}</span></h2>
      <p>Copy it now: this is the only time it is shown. The gateway keeps only its SHA-256.</p>
      <p class="secret" id="issued-key">${key}</p>
      <p><button type="button" data-copy="issued-key" hidden>Copy</button> <a href="/admin/page">Back to the keys</a></p>
      ${grace ? html`<p class="muted">The replaced key keeps working until ${grace}.</p>` : ''}
    </section>
  `;
}

export function errorBody(status: number, message: string): Html {
  return html`
    <section class="error">
      <h2>Not done (${status})</h2>
      <p role="alert">${message}</p>
      <p><a href="/admin/page">Back</a></p>
    </section>
  `;
}

const csrfField = (csrf: string) => html`<input type="hidden" name="csrf" value="${csrf}">`;

function budgetsText(v: unknown): string {
  if (!Array.isArray(v) || v.length === 0) return '';
  return v.map((b: Record<string, unknown>) =>
    [b.limit_usd !== undefined ? `$${b.limit_usd}` : '', b.limit_tokens !== undefined ? `${b.limit_tokens} tok` : '']
      .filter(Boolean).join(' + ') + ` / ${b.window}`
  ).join(', ');
}

function keyRow(k: KeyEntry, d: Dashboard): Html {
  const v = k.value;
  const disabled = v.disabled === true;
  const expires = typeof v.expires_at === 'string' ? v.expires_at : undefined;
  const expired = expires !== undefined && Date.parse(expires) <= Date.now();
  const models = Array.isArray(v.allowed_models) ? (v.allowed_models as unknown[]).join(', ') : '';
  const writable = d.scope === 'write' && d.writesEnabled && !disabled;
  return html`
    <tr data-key-id="${k.id}">
      <td class="mono">${k.id}</td>
      <td>${typeof v.display_name === 'string' ? v.display_name : ''}</td>
      <td class="wrap">${models || html`<span class="muted">none</span>`}</td>
      <td>${disabled ? badge('revoked', 'bad') : expired ? badge('expired', 'warn') : badge('active', 'good')}</td>
      <td>${expires ?? html`<span class="muted">never</span>`}</td>
      <td>${typeof v.team_id === 'string' ? v.team_id : ''}</td>
      <td class="small">${budgetsText(v.budgets)}</td>
      <td>${writable
        ? html`
          <form class="inline" method="post" action="/admin/page/keys/${encodeURIComponent(k.id)}/rotate">
            ${csrfField(
              d.csrf,
            )}<input class="grace" name="grace_seconds" type="number" min="0" max="2592000" value="3600"
              title="seconds the replaced key keeps working"><button class="quiet" type="submit">Rotate</button>
          </form>
          <form class="inline" method="post" action="/admin/page/keys/${encodeURIComponent(k.id)}/revoke"
            data-confirm="Revoke ${k.id}? Callers using it get 401 at once.">
            ${csrfField(d.csrf)}<button class="danger" type="submit">Revoke</button>
          </form>
        `
        : ''}</td>
    </tr>
  `;
}

function issueForm(d: Dashboard): Html {
  if (d.scope !== 'write') {
    return html`<p class="muted small">Signed in with a read-only key: issuing needs a write key.</p>`;
  }
  if (!d.writesEnabled) {
    return html`<p class="muted small">Writes are off: they need the etcd source and admin.write_keys (docs/admin.md).</p>`;
  }
  return html`
    <h3>Issue a key</h3>
    <form class="stack" method="post" action="/admin/page/keys">
      ${csrfField(d.csrf)}
      <label>id (optional)<input name="id" pattern="[A-Za-z0-9][A-Za-z0-9._-]{0,127}"></label>
      <label>name<input name="display_name"></label>
      <label>allowed models (comma separated)<input name="allowed_models" placeholder="*" value="*"></label>
      <label>team<input name="team_id"></label>
      <label>expires (RFC 3339, optional)<input name="expires_at" placeholder="2027-01-01T00:00:00Z"></label>
      <button type="submit">Issue</button>
    </form>
  `;
}

const COLORS = ['#2f5bd3', '#1a7f4b', '#b42318', '#9a6200', '#7c3aed', '#0e7490'];

/** Spent USD per period, one line per row (the most spent first), over the report's range. */
export function spendChart(rows: SpendRow[]): Html {
  const series = rows.filter((r) => r.periods.length > 0).slice(0, COLORS.length);
  if (series.length === 0) return html``;
  const W = 640, H = 180, PAD = 36;
  const times = series.flatMap((r) => r.periods.map((p) => Date.parse(p.start)));
  const t0 = Math.min(...times), t1 = Math.max(...times);
  const top = Math.max(...series.flatMap((r) => r.periods.map((p) => p.spent_usd)), 0.01);
  const x = (t: number) => PAD + (t1 === t0 ? (W - 2 * PAD) / 2 : ((t - t0) / (t1 - t0)) * (W - 2 * PAD));
  const y = (v: number) => H - PAD + 12 - (v / top) * (H - PAD - 12);
  const lines = series.map((r, i) => {
    const pts = [...r.periods].sort((a, b) => a.start.localeCompare(b.start))
      .map((p) => `${x(Date.parse(p.start)).toFixed(1)},${y(p.spent_usd).toFixed(1)}`);
    return html`<polyline fill="none" stroke="${COLORS[i]}" stroke-width="2" points="${pts.join(' ')}"></polyline>${
      pts.map((p) => {
        const [cx, cy] = p.split(',');
        return html`<circle cx="${cx}" cy="${cy}" r="3" fill="${COLORS[i]}"></circle>`;
      })
    }`;
  });
  const legend = series.map((r, i) =>
    html`<text x="${PAD + i * 160}" y="12" style="fill:${COLORS[i]}">${r.id} · ${r.budget}</text>`
  );
  return html`
    <svg role="img" aria-label="spend over time" viewBox="0 0 ${W} ${H}" width="100%"
      style="max-width:${W}px">
      <line x1="${PAD}" y1="${H - PAD + 12}" x2="${W - PAD}" y2="${H - PAD +
        12}" stroke="currentColor" opacity=".3"></line>
      <text x="2" y="${y(top) + 4}">$${top.toFixed(2)}</text><text x="2" y="${H - PAD + 16}">$0</text>
      <text x="${PAD}" y="${H - 4}">${new Date(t0).toISOString().slice(0, 10)}</text>
      <text x="${W - PAD - 60}" y="${H - 4}">${new Date(t1).toISOString().slice(0, 10)}</text>
      ${legend}${lines}
    </svg>
  `;
}

function spendSection(title: string, s: SpendView): Html {
  if ('unavailable' in s) {
    return html`
      <h3>${title}</h3>
      <p class="muted small">${s.unavailable}</p>
    `;
  }
  return html`<h3>${title}</h3>${spendChart(s.rows)}${
    table(
      ['id', 'budget', 'spent (USD)', 'spent (tokens)', 'periods'],
      s.rows.map((r) =>
        html`
          <tr>
            <td class="mono">${r.id}</td>
            <td>${r.budget}</td>
            <td>${r.spent_usd.toFixed(4)}</td>
            <td>${r.spent_tokens}</td>
            <td>${r.periods.length}</td>
          </tr>
        `
      ),
      'Nothing spent against a budget in the last 30 days.',
    )
  }`;
}

export function dashboardBody(d: Dashboard): Html {
  return html`
    ${d.notice
      ? html`
        <section class="notice">
          <p role="status">${d.notice}</p>
        </section>
      `
      : ''}
    <section id="keys"><h2>API keys</h2>${table(
      ['id', 'name', 'allowed models', 'state', 'expires', 'team', 'budgets', ''],
      d.keys.map((k) => keyRow(k, d)),
      'No api keys.',
    )}${issueForm(d)}</section>
    <section
      id="spend"><h2>Budgets and spend <span class="muted small">last 30 days</span></h2>${spendSection(
        'Per key',
        d.spendByKey,
      )}${spendSection('Per team', d.spendByTeam)}</section>
    <section id="models"><h2>Models</h2>${table(
      ['model', 'kind', 'health', 'reason', 'budgets'],
      d.models.map((m) =>
        html`
          <tr>
            <td><strong>${m.display_name}</strong><div class="muted mono small">${m.id}</div></td>
            <td>${m.kind ?? ''}</td>
            <td>${badge(m.status.replace('_', ' '), MODEL_TONE[m.status] ?? 'idle')}</td>
            <td>${m.status_reason ?? ''}</td>
            <td class="small">${budgetsText(d.modelBudgets.get(m.id))}</td>
          </tr>
        `
      ),
      'No models.',
    )}</section>
  `;
}

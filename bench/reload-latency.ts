// A steady request stream's latency before and during a SIGHUP reload of a 20k-model, 20k-key resources file
// (docs/operations.md "Reloads under load"). Run: node build.mjs && node --import tsx bench/reload-latency.ts [rows] [runtime]
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chatCompletion } from '../test/support/mock-upstream.ts';
import { baseConfig, CALLER_KEY, type RuntimeName, spawnGateway } from '../test/support/process.ts';

const ROWS = Number(process.argv[2] ?? 20_000);
const RUNTIME = (process.argv[3] ?? 'node') as RuntimeName;

function resources(base: string, salt: string): string {
  const out = [
    `_format_version: "1"`,
    'provider_keys:',
    '  - display_name: mock',
    '    provider: openai',
    '    api_key: sk-upstream-SECRET-value',
    `    api_base: ${base}`,
    'models:',
    '  - display_name: gpt-test',
    '    model_name: gpt-upstream',
    '    provider_key: mock',
  ];
  for (let i = 0; i < ROWS; i++) {
    out.push(`  - display_name: m-${salt}-${i}`, '    model_name: gpt-upstream', '    provider_key: mock');
  }
  out.push('api_keys:', '  - display_name: caller', '    key_env: CALLER_KEY', '    allowed_models: ["*"]');
  for (let i = 0; i < ROWS; i++) {
    out.push(
      `  - display_name: k-${salt}-${i}`,
      `    key_hash: ${createHash('sha256').update(`sk-bench-${salt}-${i}`).digest('hex')}`,
      '    allowed_models: [gpt-test]',
    );
  }
  return out.join('\n') + '\n';
}

const server = http.createServer(async (req, res) => {
  for await (const _ of req);
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(chatCompletion('gpt-upstream')));
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
const g = await spawnGateway({
  runtime: RUNTIME,
  config: baseConfig(),
  files: { 'resources.yaml': resources(base, 'a') },
  env: { CALLER_KEY },
});
await g.waitReady('/readyz', 'proxy', 60_000);

async function sample(ms: number): Promise<number[]> {
  const out: number[] = [];
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const t = performance.now();
    const r = await fetch(g.url('/v1/chat/completions'), {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }),
    });
    await r.text();
    if (r.status !== 200) throw new Error(`status ${r.status}`);
    out.push(performance.now() - t);
  }
  return out;
}
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
await sample(1000);
const before = await sample(3000);
writeFileSync(join(g.dir, 'resources.yaml'), resources(base, 'b'));
g.signal('SIGHUP');
const during = await sample(8000);
console.log(
  `${RUNTIME} ${ROWS} rows: p50/p99/max before ${pct(before, 0.5).toFixed(1)}/${pct(before, 0.99).toFixed(1)}/` +
    `${Math.max(...before).toFixed(1)} ms (${before.length}); during 8 s after SIGHUP ${pct(during, 0.5).toFixed(1)}/` +
    `${pct(during, 0.99).toFixed(1)}/${Math.max(...during).toFixed(1)} ms (${during.length})`,
);
await g.stop(10_000).catch(() => g.kill());
server.close();
process.exit(0);

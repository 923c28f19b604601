// The V8 settings the Node gateway gives itself, checked on the Node that runs the tests: the flags set at start
// (runtimes/node.ts `selfV8Flags`: the version gate, that this V8 knows exactly the flags picked for it, what the
// Maglev flag saves where it applies) and the young generation's cap bin/sluice restarts itself with from V8 13
// (docs/performance.md "Node 24").
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, test } from 'node:test';
import { selfV8Flags } from '../../runtimes/node.ts';
import { maglevProbeSource } from '../support/maglev-probe.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, resourcesFor, spawnGateway } from '../support/process.ts';

const ROOT = resolve(import.meta.dirname, '..', '..');
const MAGLEV_FLAG = '--no-maglev-destroy-on-background';

test("Maglev's flag is picked from V8 12 on (Node 22 and later), not for Node 20's V8 11", () => {
  assert.deepEqual(selfV8Flags('11.3.244.8-node.33'), []);
  assert.deepEqual(selfV8Flags('12.4.254.21-node.33'), [MAGLEV_FLAG]);
  assert.deepEqual(selfV8Flags('13.6.233.17-node.40'), [MAGLEV_FLAG]);
});

test('this Node knows the flags picked for it, and not the one left out', () => {
  const picked = selfV8Flags(process.versions.v8);
  for (const flag of [...picked, MAGLEV_FLAG]) {
    const r = spawnSync(process.execPath, [flag, '-e', '0'], { encoding: 'utf8' });
    if (picked.includes(flag)) assert.equal(r.status, 0, `${process.version} refuses ${flag}: ${r.stderr}`);
    else assert.notEqual(r.status, 0, `${process.version} knows ${flag}, which is not picked for its V8`);
  }
});

/**
 * How far the resident set grew (bytes) while the main thread kept V8 compiling new hot functions, as a gateway
 * does while it warms under load; `apply` has the bundle set the gateway's own flags first, as `start()` does.
 */
function rssGrowthWhileCompiling(apply: boolean): number {
  const bundle = join(ROOT, 'dist', 'node.mjs');
  if (!existsSync(bundle)) throw new Error('dist/node.mjs is missing: run `npm run build`');
  const dir = mkdtempSync(join(tmpdir(), 'sluice-node-v8-flags-'));
  try {
    const script = join(dir, 'probe.mjs');
    writeFileSync(
      script,
      `const m = await import(${JSON.stringify(pathToFileURL(bundle).href)});
if (${apply}) m.applySelfV8Flags();
${maglevProbeSource('process.memoryUsage().rss')}`,
    );
    const r = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stderr, '', 'the probe wrote to stderr (an unknown V8 flag is reported there)');
    return (JSON.parse(r.stdout) as { grew: number }).grew;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("on a Node whose V8 takes the flag, Maglev's finished compilations no longer pile up", () => {
  const MB = 1e6;
  const own = rssGrowthWhileCompiling(true);
  const byDefault = rssGrowthWhileCompiling(false);
  const detail = `${process.version}: the resident set grew ${(own / MB).toFixed(1)} MB with the gateway's flags, ${
    (byDefault / MB).toFixed(1)
  } MB without`;
  if (selfV8Flags(process.versions.v8).length === 0) {
    // Node 20: no Maglev by default, so nothing piles up and nothing is set.
    assert.ok(byDefault < 100 * MB, detail);
    return;
  }
  // Node 22's V8 frees them promptly by itself; Node 24's piles them up (docs/performance.md "Node 24").
  assert.ok(own < Math.max(byDefault * 0.5, 100 * MB), detail);
});

const gateways: GatewayProcess[] = [];
after(async () => {
  for (const g of gateways) await g.stop();
});

/** The command line of a ready gateway started by bin/sluice with `env` (its own after any restart). */
async function gatewayCommandLine(env: Record<string, string>): Promise<string[]> {
  const g = await spawnGateway({
    config: baseConfig(),
    files: { 'resources.yaml': resourcesFor('http://127.0.0.1:9') },
    env: { CALLER_KEY, ...env },
  });
  gateways.push(g);
  await g.waitReady('/livez');
  return readFileSync(`/proc/${g.proc.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
}

test('bin/sluice caps the young generation as on Node 20 from V8 13 on, unless NODE_OPTIONS sizes it', async () => {
  const cap = '--max-semi-space-size=16';
  const own = await gatewayCommandLine({ NODE_OPTIONS: '' });
  const capped = Number.parseInt(process.versions.v8, 10) >= 13;
  assert.equal(own.includes(cap), capped, `${process.version} (V8 ${process.versions.v8}) runs ${own.join(' ')}`);
  assert.ok(own.some((a) => a.endsWith('bin/sluice')), own.join(' '));
  for (const size of ['--max-semi-space-size=32', '--max_semi_space_size=32']) {
    const sized = await gatewayCommandLine({ NODE_OPTIONS: size });
    assert.ok(!sized.includes(cap), `with NODE_OPTIONS=${size} it runs ${sized.join(' ')}`);
  }
});

// A steady request stream's latency before and during a SIGHUP reload of a 20k-model, 20k-key resources file
// (docs/performance.md "Reloads under a steady request stream"), on each runtime named: one caller sending
// chat requests back to back (or, with --every-ms N, one every N ms, open loop) to a local mock upstream;
// "during" runs from the SIGHUP until the reload's outcome is logged.
// Run: node build.mjs && node --import tsx bench/reload-latency.ts [rows] [node bun deno] [--every-ms 20]
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { bigResources } from '../test/support/big-resources.ts';
import { startMockUpstream } from '../test/support/mock-upstream.ts';
import { baseConfig, CALLER_KEY, type RuntimeName, spawnGateway } from '../test/support/process.ts';
import { percentile, steadyStream, victimStream } from '../test/support/victim.ts';
import { flag } from './flags.ts';

const args = process.argv.slice(2).filter((a, i, all) => !a.startsWith('--') && all[i - 1] !== '--every-ms');
const ROWS = Number(args[0] ?? 20_000);
const RUNTIMES = (args.length > 1 ? args.slice(1) : ['node']) as RuntimeName[];
/** `--every-ms N`: an open-loop stream (a request every N ms); default one caller back to back. */
const EVERY_MS = Number(flag('every-ms', '0'));
const stream = (g: Parameters<typeof victimStream>[0], min: number, done?: () => boolean) =>
  EVERY_MS > 0 ? steadyStream(g, EVERY_MS, min, done) : victimStream(g, min, done);
const OUTCOMES = ['resources file reloaded', 'resources file reload failed — keeping the previous snapshot'];

const figures = (xs: number[]) =>
  `${percentile(xs, 0.5).toFixed(1)}/${percentile(xs, 0.99).toFixed(1)}/${
    Math.max(...xs).toFixed(1)
  } ms (${xs.length})`;

const mock = await startMockUpstream();
for (const runtime of RUNTIMES) {
  const g = await spawnGateway({
    runtime,
    config: baseConfig(),
    files: { 'resources.yaml': bigResources(mock.base, ROWS, 'a') },
    env: { CALLER_KEY },
  });
  await g.waitReady('/readyz', 'proxy', 120_000);
  await stream(g, 50);
  const end = Date.now() + 4000;
  const before = await stream(g, 100, () => Date.now() >= end);
  writeFileSync(join(g.dir, 'resources.yaml'), bigResources(mock.base, ROWS, 'b'));
  const from = g.logs.length;
  const outcome = () => g.logs.slice(from).find((l) => OUTCOMES.includes(String(l.msg)));
  const t = performance.now();
  g.signal('SIGHUP');
  const during = await stream(g, 100, () => outcome() !== undefined);
  const took = ((performance.now() - t) / 1000).toFixed(1);
  console.log(
    `${runtime} ${ROWS} rows: p50/p99/max before ${figures(before)}; during the reload ${figures(during)}; ` +
      `${outcome()?.msg} after ~${took} s`,
  );
  await g.stop(10_000).catch(() => g.kill());
}
await mock.close();
process.exit(0);

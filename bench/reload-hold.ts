// A reload of a large resources file in process, with a timer-lag probe (docs/performance.md "Configuration at
// scale"): the gateway of the test platform loads a file of N api keys, then reloads another of N keys while a
// 5 ms interval records every gap over 20 ms. Run under `node --trace-gc` to see which collection held the loop.
//
// Run: node [--trace-gc] --import tsx bench/reload-hold.ts [--keys 1000000] [--same 0]
// `--same F`: the fraction of rows the second file keeps as they were (0: every row changes, as config-scale's).
import { createHash } from 'node:crypto';
import { createGateway } from '../src/boot.ts';
import { loadConfig } from '../src/config/load.ts';
import { testPlatform } from '../test/support/platform.ts';
import { nodeSha256Stream } from '../runtimes/node-sha256.ts';
import { flag } from './flags.ts';

const KEYS = Number(flag('keys', '1000000'));
const SAME = Number(flag('same', '0'));
const RES = '/srv/resources.yaml';

function file(salt: (i: number) => string): Uint8Array {
  const out = [
    '_format_version: "1"',
    'provider_keys:',
    '  - { display_name: pk, provider: openai, api_key: sk-x, api_base: "http://127.0.0.1:9" }',
    'models:',
    '  - { display_name: gpt-test, provider_key: pk, model_name: up }',
    'api_keys:',
  ];
  for (let i = 0; i < KEYS; i++) {
    const hash = createHash('sha256').update(`sk-scale-${i}`).digest('hex');
    out.push(`  - display_name: user-${salt(i)}${i}`, `    key_hash: ${hash}`, '    allowed_models: [gpt-test]');
  }
  return new TextEncoder().encode(out.join('\n') + '\n');
}

let bytes = file(() => 'a');
let next: Uint8Array | undefined = file((i) => (i < KEYS * SAME ? 'a' : 'b'));
const platform = testPlatform({});
platform.files = { ...platform.files!, read: async () => bytes };
platform.sha256Stream = nodeSha256Stream; // as the runtimes' platforms hash the file
const c = loadConfig(
  '/srv/config.yaml',
  `resources_file: ${RES}\nproxy: { addr: "127.0.0.1:0" }\nadmin: { enabled: false }\n`,
  {},
);
if (!c.ok) throw new Error(c.report.format());
const g = createGateway(c.config, platform);

const mib = () => (process.memoryUsage().rss / 1048576).toFixed(0);
let t = performance.now();
const r = await g.source.load!();
if (!r.ok) throw new Error(r.message);
console.log(`load ${((performance.now() - t) / 1000).toFixed(1)} s (began at ${t.toFixed(0)} ms), rss ${mib()} MiB`);
await new Promise((res) => setTimeout(res, 2000));

const gaps: { at: number; ms: number }[] = [];
let last = performance.now();
t = last;
let peak = 0;
const timer = setInterval(() => {
  const now = performance.now();
  if (now - last > 20) gaps.push({ at: now - t - (now - last), ms: now - last });
  last = now;
  peak = Math.max(peak, process.memoryUsage().rss);
}, 5);
bytes = next!;
next = undefined;
console.log(`reload begins at ${performance.now().toFixed(0)} ms, rss ${mib()} MiB`);
await g.source.reload!();
clearInterval(timer);
const took = performance.now() - t;
console.log(`reload ${(took / 1000).toFixed(1)} s, peak rss ${(peak / 1048576).toFixed(0)} MiB, now ${mib()} MiB`);
gaps.sort((a, b) => b.ms - a.ms);
console.log(
  'longest holds:',
  gaps.slice(0, 8).map((x) => `${x.ms.toFixed(0)} ms at ${(x.at / 1000).toFixed(2)} s`).join(', '),
);
console.log('logs:', platform.logs.filter((l) => /reload/.test(String(l.msg))).map((l) => l.msg).join(' | '));
process.exit(0);

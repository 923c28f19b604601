// What the MCP gateway's code costs the artefacts (docs/performance.md "Current figures"): two copies of this tree
// built side by side, one as it is and one whose `/mcp` handler (src/proxy/mcp.ts, and with it everything in
// src/mcp/) is a stub answering 404; then the Node bundle's and the executable's sizes, and start-up — process
// start to `/readyz` 200 on the example configuration, as wall time and as the process's CPU time (user + system,
// /proc, 10 ms ticks: what a loaded machine moves least) — alternating the two copies run by run.
//   node bench/mcp-cost.mjs [--runs 11] [--no-binary]
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const args = process.argv.slice(2);
const RUNS = Number(args[args.indexOf('--runs') + 1]) || 11;
const BINARY = !args.includes('--no-binary');

const STUB = `// The /mcp handler cut out, for bench/mcp-cost.mjs only.
export const MCP_AUTH_MSG = {};
export const PROTECTED_RESOURCE_PATHS = [];
export function protectedResource() { return () => new Response(null, { status: 404 }); }
export function mcpHandlers() { return () => async () => new Response(null, { status: 404 }); }
`;

function tree(dir, stub) {
  mkdirSync(dir, { recursive: true });
  for (const p of ['src', 'runtimes', 'bin', 'build.mjs', 'package.json', 'tsconfig.json']) {
    cpSync(join(ROOT, p), join(dir, p), { recursive: true });
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  if (stub) writeFileSync(join(dir, 'src/proxy/mcp.ts'), STUB);
  const b = spawnSync('node', ['build.mjs'], { cwd: dir, stdio: 'inherit' });
  if (b.status !== 0) throw new Error(`node build.mjs failed in ${dir}`);
  if (BINARY) {
    const c = spawnSync('node', ['build.mjs', '--binary'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    if (c.status !== 0) throw new Error(`node build.mjs --binary failed in ${dir}`);
  }
  return dir;
}

function freePort() {
  return new Promise((r) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => r(port));
    });
  });
}

/** The process's CPU time so far (user + system), in ms, from /proc (Linux). */
function cpuMs(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10; // utime, stime: clock ticks of 10 ms
}

/** Process start → `/readyz` 200: wall and CPU ms; the process is ended once it answers. */
async function startup(command, argv, cwd) {
  const [proxy, admin, metrics] = [await freePort(), await freePort(), await freePort()];
  const env = {
    ...process.env,
    DEMO_API_KEY: 'sk-demo',
    AISIX_PROXY__ADDR: `127.0.0.1:${proxy}`,
    AISIX_ADMIN__ADDR: `127.0.0.1:${admin}`,
    AISIX_OBSERVABILITY__METRICS__PROMETHEUS__ADDR: `127.0.0.1:${metrics}`,
    AISIX_OBSERVABILITY__LOG_LEVEL: 'error',
  };
  const t0 = performance.now();
  const proc = spawn(command, argv, { cwd, env, stdio: 'ignore' });
  try {
    for (;;) {
      if (performance.now() - t0 > 30_000) throw new Error(`${command}: not ready after 30 s`);
      try {
        const r = await fetch(`http://127.0.0.1:${proxy}/readyz`);
        await r.arrayBuffer();
        if (r.status === 200) return { wall: performance.now() - t0, cpu: cpuMs(proc.pid) };
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 2));
    }
  } finally {
    proc.kill('SIGKILL');
    await new Promise((r) => proc.once('exit', r));
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const size = (f) => statSync(f).size;

const scratch = mkdtempSync(join(tmpdir(), 'sluice-mcp-cost-'));
try {
  const withMcp = tree(join(scratch, 'with'), false);
  const without = tree(join(scratch, 'without'), true);
  const work = join(scratch, 'run');
  mkdirSync(work);
  for (const f of ['config.yaml', 'resources.yaml']) cpSync(join(ROOT, 'examples', f), join(work, f));
  const bin = `dist/sluice-${process.platform}-${process.arch}`;
  const kinds = [['node bundle', (t) => ['node', [join(t, 'bin/sluice'), '--config', 'config.yaml']]]];
  if (BINARY) kinds.push(['executable', (t) => [join(t, bin), ['--config', 'config.yaml']]]);
  const load0 = loadavg()[0];
  const times = {};
  for (const [kind, cmd] of kinds) {
    times[kind] = { with: [], without: [] };
    await startup(...cmd(withMcp), work); // warm the page cache once each
    await startup(...cmd(without), work);
    for (let i = 0; i < RUNS; i++) {
      for (
        const [name, t] of i % 2 === 0 ? [['with', withMcp], ['without', without]] : [['without', without], [
          'with',
          withMcp,
        ]]
      ) {
        times[kind][name].push(await startup(...cmd(t), work));
      }
    }
  }
  const out = {
    runs: RUNS,
    loadavg: [load0, loadavg()[0]].map((x) => x.toFixed(1)),
    bundle_bytes: { with: size(join(withMcp, 'dist/node.mjs')), without: size(join(without, 'dist/node.mjs')) },
    ...(BINARY ? { executable_bytes: { with: size(join(withMcp, bin)), without: size(join(without, bin)) } } : {}),
    startup_median: Object.fromEntries(
      Object.entries(times).map(([k, v]) => [k, {
        wall_ms: {
          with: median(v.with.map((x) => x.wall)).toFixed(1),
          without: median(v.without.map((x) => x.wall)).toFixed(1),
        },
        cpu_ms: { with: median(v.with.map((x) => x.cpu)), without: median(v.without.map((x) => x.cpu)) },
      }]),
    ),
    startup_ms_all: times,
  };
  console.log(JSON.stringify(out, null, 2));
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

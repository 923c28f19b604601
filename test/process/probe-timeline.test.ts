// `sluice probe-timeline` (issue 13): the phase folding and the drop rule on synthetic rounds, the command
// line, then the command as a real process against real gateway processes across SIGTERM — a drain that
// keeps serving (exit 0) and a `min_drain_secs: 0` gateway that drops the tool's route request (exit 1).
// Run: node build.mjs && node --import tsx --test test/process/probe-timeline.test.ts
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test } from 'node:test';
import { parseCli } from '../../src/cli.ts';
import { classifyFetchError, type Round, type Timeline, TimelineBuilder } from '../../src/tools/probe-timeline.ts';
import { startMockUpstream } from '../support/mock-upstream.ts';
import {
  CALLER_KEY,
  type GatewayProcess,
  resourcesFor,
  runtimeCommand,
  type RuntimeName,
  spawnGateway,
} from '../support/process.ts';
import { until } from '../support/until.ts';

/** The tool's route requests the gateway has logged (one per round). */
const routeRequests = (gw: GatewayProcess): number =>
  gw.logs.filter((l) => l.msg === 'proxy request completed' && l.path === '/v1/models').length;

const COLS = ['livez', 'readyz', 'route', 'status_ready'];
const round = (at: number, livez: string, readyz: string, route: string, status_ready = '200'): Round => ({
  at,
  livez,
  readyz,
  route,
  status_ready,
});

describe('timeline folding', () => {
  test('phases and summary of a clean rollout', () => {
    const b = new TimelineBuilder(COLS);
    const rounds = [
      round(0, 'refused', 'refused', 'refused', 'refused'),
      round(100, '200', '200', '200'),
      round(200, '200', '200', '200'),
      round(300, '200', '503', '200'),
      round(400, '200', '503', '200'),
      round(500, 'refused', 'refused', 'refused', 'refused'),
    ];
    const started = rounds.map((r) => b.add(r)).filter((p) => p !== undefined).map((p) => p.label);
    assert.deepEqual(started, ['refused', '200/200/200/200', '200/503/200/200', 'refused']);
    assert.equal(b.exited(), true);
    const t = b.timeline();
    assert.deepEqual(t.phases[1], { from_ms: 100, to_ms: 200, rounds: 2, label: '200/200/200/200' });
    assert.deepEqual(t.summary, {
      columns: COLS,
      rounds: 6,
      duration_ms: 500,
      route_ok: 4,
      route_failed: 2,
      first_ready_ms: 100,
      readyz_failed_ms: 300,
      last_route_ok_after_readyz_failed_ms: 100,
      everything_refused_ms: 500,
      dropped: [],
    });
  });

  test('a route failure with /readyz 200 in the same round or the round before is a drop; after a 503 it is not', () => {
    const b = new TimelineBuilder(COLS);
    b.add(round(0, '200', '200', '200'));
    b.add(round(100, '200', '200', '502')); // same round
    b.add(round(200, 'refused', 'refused', 'refused', 'refused')); // gone between two polls
    const d = b.timeline().summary.dropped;
    assert.deepEqual(d, [
      { at_ms: 100, route: '502', readyz: '200', previous_readyz: '200' },
      { at_ms: 200, route: 'refused', readyz: 'refused', previous_readyz: '200' },
    ]);
    const c = new TimelineBuilder(COLS);
    c.add(round(0, '200', '503', '200'));
    c.add(round(100, 'refused', 'refused', 'refused', 'refused'));
    assert.deepEqual(c.timeline().summary.dropped, []);
  });

  test('fetch errors of each runtime are named', () => {
    assert.equal(classifyFetchError(new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } })), 'refused');
    assert.equal(
      classifyFetchError(Object.assign(new Error('Unable to connect'), { code: 'ConnectionRefused' })),
      'refused',
    );
    assert.equal(
      classifyFetchError(new TypeError('error sending request: Connection refused (os error 111)')),
      'refused',
    );
    assert.equal(classifyFetchError(new DOMException('The operation timed out.', 'TimeoutError')), 'timeout');
    assert.equal(classifyFetchError(new TypeError('fetch failed', { cause: { code: 'ECONNRESET' } })), 'reset');
    assert.equal(classifyFetchError(new Error('???')), 'error');
  });
});

describe('command line', () => {
  test('flags, defaults and errors', () => {
    assert.deepEqual(
      parseCli(['probe-timeline', '--proxy', 'http://127.0.0.1:3000', '--route', '/v1/models', '--key', 'sk-1'], {}),
      {
        kind: 'probe-timeline',
        proxy: 'http://127.0.0.1:3000',
        route: '/v1/models',
        key: 'sk-1',
        intervalMs: 100,
        timeoutMs: 1000,
        untilExit: false,
        json: false,
      },
    );
    const full = parseCli([
      'probe-timeline',
      '--proxy=http://h:1',
      '--status',
      'http://h:2',
      '--interval-ms',
      '250',
      '--duration',
      '30',
      '--until-exit',
      '--json',
    ], {});
    assert.equal(full.kind, 'probe-timeline');
    if (full.kind === 'probe-timeline') {
      assert.equal(full.status, 'http://h:2');
      assert.equal(full.intervalMs, 250);
      assert.equal(full.durationSecs, 30);
      assert.equal(full.untilExit, true);
      assert.equal(full.json, true);
    }
    for (
      const [args, msg] of [
        [[], /needs --proxy/],
        [['--proxy', 'localhost:3000'], /--proxy must be/],
        [['--proxy', 'http://h:1', '--interval-ms', 'fast'], /--interval-ms must be a number/],
        [['--proxy', 'http://h:1', '--route', 'v1/models'], /--route must be a path/],
        [['--proxy', 'http://h:1', '--key', 'k'], /--key goes with --route/],
      ] as const
    ) {
      const c = parseCli(['probe-timeline', ...args], {});
      assert.equal(c.kind, 'error');
      if (c.kind === 'error') assert.match(c.message, msg);
    }
  });
});

// -- black-box ------------------------------------------------------------------------------------------

function runTool(runtime: RuntimeName, args: string[]): {
  lines: string[];
  firstLine: Promise<void>;
  exit: Promise<number | null>;
  stdout: () => string;
} {
  const [cmd, argv] = runtimeCommand(runtime, ['probe-timeline', ...args]);
  const p = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const lines: string[] = [];
  let onFirst!: () => void;
  const firstLine = new Promise<void>((r) => {
    onFirst = r;
  });
  p.stdout.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    lines.splice(0, lines.length, ...out.split('\n').filter(Boolean));
    if (lines.length > 0) onFirst();
  });
  p.stderr.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  const exit = new Promise<number | null>((resolve, reject) => {
    const t = setTimeout(() => {
      p.kill('SIGKILL');
      reject(new Error(`probe-timeline did not exit within 40 s:\n${out}\n${err}`));
    }, 40_000);
    // 'close', not 'exit': only then has everything the process wrote to stdout and stderr been read.
    p.once('close', (code) => {
      clearTimeout(t);
      resolve(code);
    });
  });
  return { lines, firstLine, exit, stdout: () => `${out}\n${err}` };
}

function config(minDrain: number): string {
  return `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
observability: { metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: ${minDrain} }
`;
}

describe('against real gateways', { concurrency: true }, () => {
  test('across a 2 s drain (Node tool, Node gateway): the phases, the summary, exit 0', async () => {
    const mock = await startMockUpstream();
    const gw = await spawnGateway({
      config: config(2),
      files: { 'resources.yaml': resourcesFor(mock.base) },
      env: { CALLER_KEY },
    });
    try {
      await gw.waitReady('/readyz', 'proxy', 30_000);
      const tool = runTool('node', [
        '--proxy',
        `http://127.0.0.1:${gw.ports.proxy}`,
        '--status',
        `http://127.0.0.1:${gw.ports.status}`,
        '--route',
        '/v1/models',
        '--key',
        CALLER_KEY,
        '--until-exit',
        '--duration',
        '30',
        '--json',
      ]);
      // JSON mode prints once, at the end: wait for the gateway's own evidence of being polled instead (a
      // second route request: the first round is complete).
      await until(() => routeRequests(gw) >= 2, 15_000, 'two rounds of the tool');
      gw.signal('SIGTERM');
      const code = await tool.exit;
      assert.equal(await gw.waitForExit(15_000), 0);
      const t = JSON.parse(tool.lines.at(-1)!) as Timeline;
      const ctx = tool.stdout();
      assert.equal(code, 0, ctx);
      // The last round answers nothing: `refused` (or a connection reset as the listeners close). A round that
      // straddles the close may see some probes reset or refused while others still answer (the listeners
      // close one after the other): at most one such round, after the last 503, never a route failure while
      // ready.
      assert.deepEqual(t.phases.slice(0, 2).map((p) => p.label), ['200/200/200/200', '200/503/200/200'], ctx);
      const closing = t.phases.length === 4 ? t.phases[2]! : undefined;
      assert.equal(t.phases.length, closing ? 4 : 3, ctx);
      if (closing) {
        assert.equal(closing.rounds, 1, ctx);
        assert.match(
          closing.label,
          /^(200|reset|refused)\/(503|reset|refused)\/(200|reset|refused)\/(200|reset|refused)$/,
          ctx,
        );
        assert.match(closing.label, /reset|refused/, ctx);
      }
      assert.match(t.phases.at(-1)!.label, /^(refused|((refused|reset)\/){3}(refused|reset))$/, ctx);
      const s = t.summary;
      assert.deepEqual(s.columns, ['livez', 'readyz', 'route', 'status_ready']);
      assert.equal(s.dropped.length, 0, ctx);
      // The final, refused round (and the closing one, when its route was reset or refused).
      const closingRoute = closing?.label.split('/')[2];
      const closingRouteFailed = closingRoute === 'reset' || closingRoute === 'refused' ? 1 : 0;
      assert.equal(s.route_failed, 1 + closingRouteFailed, ctx);
      assert.ok(s.route_ok >= 10, ctx);
      assert.equal(s.first_ready_ms, 0, ctx);
      assert.ok(s.readyz_failed_ms !== null && s.everything_refused_ms !== null, ctx);
      const window = s.everything_refused_ms! - s.readyz_failed_ms!;
      assert.ok(window >= 1800 && window < 4000, `observed window ${window} ms\n${ctx}`);
      assert.ok(s.last_route_ok_after_readyz_failed_ms! >= 1700, ctx);
    } finally {
      gw.kill();
      await mock.close();
    }
  });

  test('min_drain_secs 0 with the route still polled (Deno tool): the drop is reported, exit 1', async () => {
    const mock = await startMockUpstream();
    const gw = await spawnGateway({
      config: config(0),
      files: { 'resources.yaml': resourcesFor(mock.base) },
      env: { CALLER_KEY },
    });
    try {
      await gw.waitReady('/readyz', 'proxy', 30_000);
      const tool = runTool('deno', [
        '--proxy',
        `http://127.0.0.1:${gw.ports.proxy}`,
        '--route',
        '/v1/models',
        '--key',
        CALLER_KEY,
        '--until-exit',
        '--duration',
        '30',
      ]);
      await tool.firstLine;
      await until(() => routeRequests(gw) >= 2, 15_000, 'two rounds of the tool');
      gw.signal('SIGTERM');
      const code = await tool.exit;
      const out = tool.stdout();
      assert.equal(code, 1, out);
      assert.match(out, /^columns: livez\/readyz\/route$/m);
      assert.match(out, /^\s+0\.000 s {2}200\/200\/200$/m);
      assert.match(out, /^phases: 200\/200\/200 → /m);
      assert.match(
        out,
        /^dropped requests: 1 \(route failed while \/readyz still said 200\): \d+\.\d{3} s (refused|reset)$/m,
      );
    } finally {
      gw.kill();
      await mock.close();
    }
  });
});

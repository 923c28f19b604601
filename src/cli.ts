// Command-line parsing shared by every entrypoint (README.md "Command line"). Pure: argv and env in, a command out.
import type { ProbeTimelineOptions } from './tools/probe-timeline.ts';
import type { ValidateConfigCommand } from './tools/validate-config.ts';
import type { SpendCommand } from './tools/spend.ts';

export type Command =
  | { kind: 'serve'; configPath: string }
  | { kind: 'validate'; resourcesPath: string }
  | ValidateConfigCommand
  | {
    kind: 'export';
    endpoints: string[];
    prefix: string;
    output?: string;
    withSecrets: boolean;
    user?: string;
    passwordEnv?: string;
  }
  | ({ kind: 'probe-timeline' } & ProbeTimelineOptions)
  | SpendCommand
  | { kind: 'help'; text: string }
  | { kind: 'version' }
  | { kind: 'error'; message: string };

export const USAGE = `usage:
  sluice --config <path>                 run the gateway (-c; or env AISIX_CONFIG)
  sluice validate --resources <file>     check a resources file; exit 0 when it loads
  sluice validate --config <file>        check config.yaml and, in file mode, its resources file
  sluice export --etcd <endpoints> [--prefix /aisix] [-o file] [--reveal-secrets]
                [--user <name> --password-env <VAR>]
                                         dump an etcd prefix as resources.yaml (AISIX's export);
                                         exit 1 when a row is left out
  sluice probe-timeline --proxy <url> [--status <url>] [--route /v1/models --key <caller key>]
                        [--interval-ms 100] [--timeout-ms 1000] [--until-exit | --duration <secs>] [--json]
                                         poll the probes and a route; one line per phase change;
                                         exit 1 if a request failed while /readyz still said 200
  sluice spend --config <file> [--since 7d] [--until <time>] [--by key|team|user|model] [--json]
                                         spend from the budget counters in Redis (budgets.redis)
  sluice spend --etcd <endpoints> [--prefix /aisix] [--user <name> --password-env <VAR>]
               (--redis <url> [--env-id <id>] | --config <file>) [--since 7d] [--by team] [--json]
                                         the same, rows named from the keys and models in etcd
  sluice --version`;

function takeValue(args: string[], i: number, flag: string): string | { error: string } {
  const eq = args[i]!.indexOf('=');
  if (eq > 0) return args[i]!.slice(eq + 1);
  const v = args[i + 1];
  if (v === undefined || v.startsWith('-')) return { error: `${flag} needs a value` };
  return v;
}

const VALUE_FLAGS: Record<string, string> = {
  '--config': 'config',
  '-c': 'config',
  '--resources': 'resources',
  '--etcd': 'etcd',
  '--prefix': 'prefix',
  '-o': 'output',
  '--output': 'output',
  '--user': 'user',
  '--password-env': 'password-env',
  '--proxy': 'proxy',
  '--status': 'status',
  '--route': 'route',
  '--key': 'key',
  '--interval-ms': 'interval-ms',
  '--timeout-ms': 'timeout-ms',
  '--duration': 'duration',
  '--since': 'since',
  '--until': 'until',
  '--by': 'by',
  '--redis': 'redis',
  '--env-id': 'env-id',
};
const BOOLEAN_FLAGS: Record<string, string> = {
  '--reveal-secrets': 'reveal-secrets',
  // Sluice's first spelling of --reveal-secrets, kept working.
  '--with-secrets': 'reveal-secrets',
  '--json': 'json',
  '--until-exit': 'until-exit',
};

type Opts = Map<string, string>;
type Flags = Set<string>;

export function parseCli(argv: readonly string[], env: Record<string, string | undefined>): Command {
  const args = [...argv];
  const sub = args[0] && !args[0].startsWith('-') ? args.shift()! : 'serve';
  const parsed = parseFlags(args);
  if (!('opts' in parsed)) return parsed;
  const { opts, flags } = parsed;
  switch (sub) {
    case 'serve': {
      const configPath = opts.get('config') ?? env.AISIX_CONFIG;
      if (!configPath) {
        return { kind: 'error', message: `no configuration file: pass --config <path> or set AISIX_CONFIG\n${USAGE}` };
      }
      return { kind: 'serve', configPath };
    }
    case 'validate':
      return validateCommand(opts);
    case 'export':
      return exportCommand(opts, flags);
    case 'probe-timeline':
      return probeTimelineCommand(opts, flags);
    case 'spend':
      return spendCommand(opts, flags, env);
    default:
      return { kind: 'error', message: `unknown command "${sub}"\n${USAGE}` };
  }
}

/** The flags after the subcommand; `--help`, `--version` or a refusal end the parse as a command. */
function parseFlags(args: string[]): { opts: Opts; flags: Flags } | Command {
  const opts: Opts = new Map();
  const flags: Flags = new Set();
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const name = a.includes('=') ? a.slice(0, a.indexOf('=')) : a;
    if (name === '--help' || name === '-h') return { kind: 'help', text: USAGE };
    if (name === '--version' || name === '-V') return { kind: 'version' };
    if (BOOLEAN_FLAGS[name]) {
      flags.add(BOOLEAN_FLAGS[name]);
      continue;
    }
    const key = VALUE_FLAGS[name];
    if (!key) return { kind: 'error', message: `unknown argument "${a}"\n${USAGE}` };
    const v = takeValue(args, i, name);
    if (typeof v !== 'string') return { kind: 'error', message: `${v.error}\n${USAGE}` };
    // --etcd repeats like AISIX's (each a comma-separated list); other flags: the last one wins.
    opts.set(key, key === 'etcd' && opts.has('etcd') ? `${opts.get('etcd')},${v}` : v);
    if (!a.includes('=')) i++;
  }
  return { opts, flags };
}

function validateCommand(opts: Opts): Command {
  const resourcesPath = opts.get('resources');
  const configPath = opts.get('config');
  if (configPath && resourcesPath) {
    return { kind: 'error', message: `validate takes --resources or --config, not both\n${USAGE}` };
  }
  if (configPath) return { kind: 'validate-config', configPath };
  if (!resourcesPath) {
    return { kind: 'error', message: `validate needs --resources <file> or --config <file>\n${USAGE}` };
  }
  return { kind: 'validate', resourcesPath };
}

function exportCommand(opts: Opts, flags: Flags): Command {
  const etcd = opts.get('etcd');
  if (!etcd) return { kind: 'error', message: `export needs --etcd <endpoints>\n${USAGE}` };
  return {
    kind: 'export',
    endpoints: etcd.split(',').map((s) => s.trim()).filter(Boolean),
    prefix: opts.get('prefix') ?? '/aisix',
    output: opts.get('output'),
    withSecrets: flags.has('reveal-secrets'),
    user: opts.get('user'),
    passwordEnv: opts.get('password-env'),
  };
}

function spendCommand(opts: Opts, flags: Flags, env: Record<string, string | undefined>): Command {
  const configPath = opts.get('config') ?? env.AISIX_CONFIG;
  const etcd = opts.get('etcd');
  const redis = opts.get('redis');
  if (!configPath && !etcd) {
    return { kind: 'error', message: `spend needs --config <file> or --etcd <endpoints> --redis <url>\n${USAGE}` };
  }
  if (!configPath && !redis) {
    return {
      kind: 'error',
      message:
        `spend --etcd needs --redis <url> or --config <file>: the budget counters live in Redis, not in etcd\n${USAGE}`,
    };
  }
  return {
    kind: 'spend',
    ...(configPath ? { configPath } : {}),
    ...(etcd
      ? {
        etcd: {
          endpoints: etcd.split(',').map((e) => e.trim()).filter(Boolean),
          ...(opts.has('prefix') ? { prefix: opts.get('prefix')! } : {}),
          ...(opts.has('user') ? { user: opts.get('user')! } : {}),
          ...(opts.has('password-env') ? { passwordEnv: opts.get('password-env')! } : {}),
        },
      }
      : {}),
    ...(redis ? { redisUrl: redis } : {}),
    ...(opts.has('env-id') ? { envId: opts.get('env-id')! } : {}),
    ...(opts.has('by') ? { by: opts.get('by')! } : {}),
    ...(opts.has('since') ? { since: opts.get('since')! } : {}),
    ...(opts.has('until') ? { until: opts.get('until')! } : {}),
    json: flags.has('json'),
  };
}

function probeTimelineCommand(opts: Map<string, string>, flags: Set<string>): Command {
  const fail = (message: string): Command => ({ kind: 'error', message: `probe-timeline: ${message}\n${USAGE}` });
  const url = (name: string): string | undefined | { error: string } => {
    const v = opts.get(name);
    if (v === undefined) return undefined;
    try {
      const u = new URL(v);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') return { error: `--${name} must be an http(s) URL` };
    } catch {
      return { error: `--${name} must be a URL like http://127.0.0.1:3000` };
    }
    return v;
  };
  const num = (name: string, dflt: number | undefined, min: number): number | undefined | { error: string } => {
    const v = opts.get(name);
    if (v === undefined) return dflt;
    const n = Number(v);
    return Number.isFinite(n) && n >= min ? n : { error: `--${name} must be a number ≥ ${min}` };
  };
  const proxy = url('proxy');
  const status = url('status');
  const interval = num('interval-ms', 100, 10);
  const timeout = num('timeout-ms', 1000, 10);
  const duration = num('duration', undefined, 0);
  for (const v of [proxy, status, interval, timeout, duration]) if (typeof v === 'object') return fail(v.error);
  if (proxy === undefined) return fail('needs --proxy <url of the proxy listener>');
  const route = opts.get('route');
  if (route !== undefined && !route.startsWith('/')) return fail('--route must be a path like /v1/models');
  if (opts.has('key') && route === undefined) return fail('--key goes with --route');
  return {
    kind: 'probe-timeline',
    proxy: proxy as string,
    ...(status !== undefined ? { status: status as string } : {}),
    ...(route !== undefined ? { route } : {}),
    ...(opts.has('key') ? { key: opts.get('key')! } : {}),
    intervalMs: interval as number,
    timeoutMs: timeout as number,
    ...(duration !== undefined ? { durationSecs: duration as number } : {}),
    untilExit: flags.has('until-exit'),
    json: flags.has('json'),
  };
}

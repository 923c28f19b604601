// Command-line parsing shared by every entrypoint (SPEC §2). Pure: argv and env in, a command out.

export type Command =
  | { kind: 'serve'; configPath: string }
  | { kind: 'validate'; resourcesPath: string }
  | {
    kind: 'export';
    endpoints: string[];
    prefix: string;
    output?: string;
    withSecrets: boolean;
    user?: string;
    passwordEnv?: string;
  }
  | { kind: 'help'; text: string }
  | { kind: 'version' }
  | { kind: 'error'; message: string };

export const USAGE = `usage:
  sluice --config <path>                 run the gateway (-c; or env AISIX_CONFIG)
  sluice validate --resources <file>     check a resources file; exit 0 when it loads
  sluice export --etcd <endpoints> [--prefix /aisix] [-o file] [--with-secrets]
                                         dump an etcd prefix as resources.yaml
  sluice --version`;

function takeValue(args: string[], i: number, flag: string): string | { error: string } {
  const eq = args[i]!.indexOf('=');
  if (eq > 0) return args[i]!.slice(eq + 1);
  const v = args[i + 1];
  if (v === undefined || v.startsWith('-')) return { error: `${flag} needs a value` };
  return v;
}

export function parseCli(argv: readonly string[], env: Record<string, string | undefined>): Command {
  const args = [...argv];
  const sub = args[0] && !args[0].startsWith('-') ? args.shift()! : 'serve';
  const opts = new Map<string, string>();
  const flags = new Set<string>();
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
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const name = a.includes('=') ? a.slice(0, a.indexOf('=')) : a;
    if (name === '--help' || name === '-h') return { kind: 'help', text: USAGE };
    if (name === '--version' || name === '-V') return { kind: 'version' };
    if (name === '--with-secrets') {
      flags.add('with-secrets');
      continue;
    }
    const key = VALUE_FLAGS[name];
    if (!key) return { kind: 'error', message: `unknown argument "${a}"\n${USAGE}` };
    const v = takeValue(args, i, name);
    if (typeof v !== 'string') return { kind: 'error', message: `${v.error}\n${USAGE}` };
    opts.set(key, v);
    if (!a.includes('=')) i++;
  }
  switch (sub) {
    case 'serve': {
      const configPath = opts.get('config') ?? env.AISIX_CONFIG;
      if (!configPath) {
        return { kind: 'error', message: `no configuration file: pass --config <path> or set AISIX_CONFIG\n${USAGE}` };
      }
      return { kind: 'serve', configPath };
    }
    case 'validate': {
      const resourcesPath = opts.get('resources');
      if (!resourcesPath) return { kind: 'error', message: `validate needs --resources <file>\n${USAGE}` };
      return { kind: 'validate', resourcesPath };
    }
    case 'export': {
      const etcd = opts.get('etcd');
      if (!etcd) return { kind: 'error', message: `export needs --etcd <endpoints>\n${USAGE}` };
      return {
        kind: 'export',
        endpoints: etcd.split(',').map((s) => s.trim()).filter(Boolean),
        prefix: opts.get('prefix') ?? '/aisix',
        output: opts.get('output'),
        withSecrets: flags.has('with-secrets'),
        user: opts.get('user'),
        passwordEnv: opts.get('password-env'),
      };
    }
    default:
      return { kind: 'error', message: `unknown command "${sub}"\n${USAGE}` };
  }
}

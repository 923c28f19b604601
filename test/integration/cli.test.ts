// Command-line parsing (README.md "Command line") and the version constant.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseCli, USAGE } from '../../src/cli.ts';
import { VERSION } from '../../src/version.ts';
import { GOOD, MALFORMED, MALFORMED_REPORT } from '../support/aisix-fixtures.ts';
import { scratchDir } from '../support/scratch.ts';

describe('serve', () => {
  test('--config, -c, --config=, -c=', () => {
    for (
      const argv of [['--config', 'a.yaml'], ['-c', 'a.yaml'], ['--config=a.yaml'], ['-c=a.yaml'], [
        'serve',
        '--config',
        'a.yaml',
      ]]
    ) {
      assert.deepEqual(parseCli(argv, {}), { kind: 'serve', configPath: 'a.yaml' }, argv.join(' '));
    }
  });

  test('a value with = and spaces is kept whole', () => {
    assert.deepEqual(parseCli(['--config=/etc/x=y/conf file.yaml'], {}), {
      kind: 'serve',
      configPath: '/etc/x=y/conf file.yaml',
    });
  });

  test('AISIX_CONFIG when no flag is given; the flag wins over the env', () => {
    assert.deepEqual(parseCli([], { AISIX_CONFIG: '/etc/sluice/config.yaml' }), {
      kind: 'serve',
      configPath: '/etc/sluice/config.yaml',
    });
    assert.deepEqual(parseCli(['-c', 'flag.yaml'], { AISIX_CONFIG: 'env.yaml' }), {
      kind: 'serve',
      configPath: 'flag.yaml',
    });
  });

  test('no config at all is an error', () => {
    const r = parseCli([], {});
    assert.equal(r.kind, 'error');
    assert.equal(
      r.kind === 'error' && r.message,
      `no configuration file: pass --config <path> or set AISIX_CONFIG\n${USAGE}`,
    );
    assert.equal(parseCli([], { AISIX_CONFIG: '' }).kind, 'error');
  });

  test('the last of repeated flags wins', () => {
    assert.deepEqual(parseCli(['-c', 'one.yaml', '--config', 'two.yaml'], {}), {
      kind: 'serve',
      configPath: 'two.yaml',
    });
  });
});

describe('validate', () => {
  test('validate --resources <file>', () => {
    assert.deepEqual(parseCli(['validate', '--resources', 'r.yaml'], {}), {
      kind: 'validate',
      resourcesPath: 'r.yaml',
    });
    assert.deepEqual(parseCli(['validate', '--resources=r.yaml'], {}), { kind: 'validate', resourcesPath: 'r.yaml' });
  });

  test('validate without --resources is an error (AISIX_CONFIG does not help)', () => {
    const r = parseCli(['validate'], { AISIX_CONFIG: 'c.yaml' });
    assert.equal(r.kind, 'error');
    assert.equal(r.kind === 'error' && r.message, `validate needs --resources <file> or --config <file>\n${USAGE}`);
  });
});

describe('export', () => {
  test('--etcd with a list of endpoints, defaults', () => {
    assert.deepEqual(parseCli(['export', '--etcd', 'http://a:2379, http://b:2379,'], {}), {
      kind: 'export',
      endpoints: ['http://a:2379', 'http://b:2379'],
      prefix: '/aisix',
      output: undefined,
      withSecrets: false,
      user: undefined,
      passwordEnv: undefined,
    });
  });

  test('every option', () => {
    assert.deepEqual(
      parseCli([
        'export',
        '--etcd=http://a:2379',
        '--prefix',
        '/custom',
        '-o',
        'out.yaml',
        '--with-secrets',
        '--user',
        'root',
        '--password-env',
        'ETCD_PW',
      ], {}),
      {
        kind: 'export',
        endpoints: ['http://a:2379'],
        prefix: '/custom',
        output: 'out.yaml',
        withSecrets: true,
        user: 'root',
        passwordEnv: 'ETCD_PW',
      },
    );
    const long = parseCli(['export', '--etcd', 'http://a:2379', '--output', 'o.yaml'], {});
    assert.equal(long.kind === 'export' && long.output, 'o.yaml');
  });

  test("AISIX's flags: --reveal-secrets, --etcd repeated; --with-secrets stays its alias", () => {
    const r = parseCli(
      ['export', '--etcd', 'http://a:2379', '--etcd=http://b:2379,http://c:2379', '--reveal-secrets'],
      {},
    );
    assert.equal(r.kind, 'export');
    assert.deepEqual(r.kind === 'export' && r.endpoints, ['http://a:2379', 'http://b:2379', 'http://c:2379']);
    assert.equal(r.kind === 'export' && r.withSecrets, true);
    const alias = parseCli(['export', '--etcd', 'http://a:2379', '--with-secrets'], {});
    assert.equal(alias.kind === 'export' && alias.withSecrets, true);
  });

  test('export without --etcd is an error', () => {
    const r = parseCli(['export', '-o', 'x.yaml'], {});
    assert.equal(r.kind === 'error' && r.message, `export needs --etcd <endpoints>\n${USAGE}`);
  });
});

describe('errors, help and version', () => {
  test('an unknown flag is an error naming it', () => {
    for (
      const [argv, name] of [[['--bogus'], '--bogus'], [['-c', 'a.yaml', '--port', '80'], '--port'], [[
        'validate',
        '--resources',
        'r',
        '-x',
      ], '-x'], [['--bogus=1'], '--bogus=1']] as const
    ) {
      const r = parseCli(argv, {});
      assert.equal(r.kind, 'error', argv.join(' '));
      assert.equal(r.kind === 'error' && r.message, `unknown argument "${name}"\n${USAGE}`);
    }
  });

  test('a positional argument after the command is an error', () => {
    const r = parseCli(['-c', 'a.yaml', 'stray'], {});
    assert.equal(r.kind === 'error' && r.message, `unknown argument "stray"\n${USAGE}`);
  });

  test('a flag with a missing value is an error', () => {
    for (
      const [argv, flag] of [
        [['--config'], '--config'],
        [['-c'], '-c'],
        [['-c', '--other'], '-c'],
        [['validate', '--resources'], '--resources'],
        [['export', '--etcd'], '--etcd'],
        [['export', '--etcd', 'e', '--prefix'], '--prefix'],
      ] as const
    ) {
      const r = parseCli(argv, { AISIX_CONFIG: 'env.yaml' });
      assert.equal(r.kind, 'error', argv.join(' '));
      assert.equal(r.kind === 'error' && r.message, `${flag} needs a value\n${USAGE}`);
    }
  });

  test('an unknown command', () => {
    const r = parseCli(['frobnicate'], {});
    assert.equal(r.kind === 'error' && r.message, `unknown command "frobnicate"\n${USAGE}`);
  });

  test('--help / -h and --version / -V', () => {
    assert.deepEqual(parseCli(['--help'], {}), { kind: 'help', text: USAGE });
    assert.deepEqual(parseCli(['validate', '-h'], {}), { kind: 'help', text: USAGE });
    assert.deepEqual(parseCli(['--version'], {}), { kind: 'version' });
    assert.deepEqual(parseCli(['-V'], {}), { kind: 'version' });
  });

  test('USAGE documents the three commands', () => {
    assert.match(USAGE, /sluice --config <path>/);
    assert.match(USAGE, /sluice validate --resources <file>/);
    assert.match(USAGE, /sluice export --etcd <endpoints> \[--prefix \/aisix\] \[-o file\]/);
  });
});

describe('version', () => {
  test('src/version.ts VERSION equals package.json version', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    assert.equal(VERSION, pkg.version);
    assert.match(VERSION, /^\d+\.\d+\.\d+(-[\w.]+)?$/);
  });
});

describe('sluice validate (the real binary; AISIX golden output, docs/aisix-compatibility.md "Command line")', () => {
  const ROOT = resolve(import.meta.dirname, '..', '..');
  const BIN = join(ROOT, 'bin/sluice');
  const run = (file: string) =>
    spawnSync(BIN, ['validate', '--resources', file], { encoding: 'utf8', timeout: 20_000 });
  const dir = scratchDir('sluice-validate');

  test('a good file: exit 0, exactly the OK line on stdout, nothing on stderr', () => {
    const file = join(dir, 'good.yaml');
    writeFileSync(file, GOOD);
    const r = run(file);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, `OK: ${file} loaded 5 resource(s)\n`);
    assert.equal(r.stderr, '');
  });

  test("the malformed file of AISIX's staged checks: exit 1, exactly its 4 errors on stderr, nothing on stdout", () => {
    const file = join(dir, 'malformed.yaml');
    writeFileSync(file, MALFORMED);
    const r = run(file);
    assert.equal(r.status, 1);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, `${MALFORMED_REPORT(file)}\n`);
  });
});

// `sluice validate --config <file>` (README.md "Command line"): the command line, then the command on the
// test platform's in-memory files — the OK line on stdout, or the boot's report on stderr and exit 1.
// Run: node --import tsx --test test/unit/validate-config.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseCli, USAGE } from '../../src/cli.ts';
import { validateConfig } from '../../src/tools/validate-config.ts';
import { testPlatform } from '../support/platform.ts';

const CONFIG = 'resources_file: resources.yaml\nproxy: { addr: "127.0.0.1:0" }\nadmin: { enabled: false }\n';
const RESOURCES = `_format_version: "1"
provider_keys: [{ display_name: offline, provider: echo }]
models: [{ display_name: echo, provider: echo, model_name: echo, provider_key: offline }]
`;

/** Run the command on these files; what it wrote to stdout and stderr. */
async function run(files: Record<string, string>, env: Record<string, string> = {}) {
  const p = testPlatform(env);
  for (const [path, text] of Object.entries(files)) p.fileMap.set(path, text);
  let stdout = '';
  const stderr: string[] = [];
  p.writeOut = (t) => void (stdout += t);
  p.writeLog = (l) => void stderr.push(l);
  const code = await validateConfig(p, '/etc/sluice/config.yaml');
  return { code, stdout, stderr: stderr.join('\n') };
}

describe('validate --config: the command line', () => {
  test('--config and -c; not with --resources; neither is an error naming both', () => {
    for (const argv of [['validate', '--config', 'c.yaml'], ['validate', '-c=c.yaml']]) {
      assert.deepEqual(parseCli(argv, {}), { kind: 'validate-config', configPath: 'c.yaml' });
    }
    assert.deepEqual(parseCli(['validate', '--config', 'c.yaml', '--resources', 'r.yaml'], {}), {
      kind: 'error',
      message: `validate takes --resources or --config, not both\n${USAGE}`,
    });
    assert.match(USAGE, /sluice validate --config <file>/);
  });
});

describe('validate --config: the command', () => {
  test('file mode: config and resources load → the OK line on stdout, exit 0', async () => {
    const r = await run({ '/etc/sluice/config.yaml': CONFIG, '/etc/sluice/resources.yaml': RESOURCES });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'OK: /etc/sluice/config.yaml with /etc/sluice/resources.yaml loaded 2 resource(s)\n');
    assert.equal(r.stderr, '');
  });

  test('environment overrides apply as at boot: an invalid one is the loader report, exit 1', async () => {
    const r = await run({ '/etc/sluice/config.yaml': CONFIG, '/etc/sluice/resources.yaml': RESOURCES }, {
      AISIX_PROXY__ADDR: 'nowhere',
    });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /proxy\.addr: must be host:port.*\(from environment variable AISIX_PROXY__ADDR\)/);
  });

  test('a resources file that fails the pipeline: its report, exit 1', async () => {
    const r = await run({
      '/etc/sluice/config.yaml': CONFIG,
      '/etc/sluice/resources.yaml':
        '_format_version: "1"\nmodels: [{ display_name: m, model_name: x, provider_key: nope }]\n',
    });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^resources file \/etc\/sluice\/resources\.yaml: 1 error/);
    assert.match(r.stderr, /references unknown provider key "nope"/);
  });

  test('a missing resources file or TLS file is named, exit 1', async () => {
    const missing = await run({ '/etc/sluice/config.yaml': CONFIG });
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^resources file \/etc\/sluice\/resources\.yaml: cannot read it: ENOENT/);
    const tls = await run({
      '/etc/sluice/config.yaml': CONFIG.replace(
        '"127.0.0.1:0"',
        '"127.0.0.1:0", tls: { cert_file: c.pem, key_file: k.pem }',
      ),
      '/etc/sluice/resources.yaml': RESOURCES,
    });
    assert.equal(tls.code, 1);
    assert.match(tls.stderr, /proxy\.tls\.cert_file: cannot read \/etc\/sluice\/c\.pem/);
  });

  test('etcd mode: the config checks, the source is named and not read; ignored AISIX keys on stderr', async () => {
    const r = await run({
      '/etc/sluice/config.yaml':
        'etcd: { endpoints: [http://e:2379], prefix: /gw }\nproxy: { addr: ":3000", workers: 4 }\nadmin: { enabled: false }\n',
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'OK: /etc/sluice/config.yaml (resources from etcd http://e:2379 prefix /gw, not read)\n');
    assert.equal(r.stderr, 'config file /etc/sluice/config.yaml: AISIX keys Sluice ignores: proxy.workers');
  });
});

// `npm run image`: build Sluice's container image from the Containerfile with buildah, without pulling
// any base image (FROM scratch). Compiles the executable (node build.mjs --binary), stages the build
// context in a temporary folder — the executable, the shared libraries `ldd` says it links, the CA
// certificates, a passwd/group entry for uid 10001 — and labels the image with the version and the
// git revision. docs/deploy.md says how to run it.
//   node deploy/image.mjs [--tag localhost/sluice:0.1.0]    prints the image id on stdout
// buildah reads its usual configuration (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF, …).
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const UID = 10001;
const CA_CERTS = '/etc/ssl/certs/ca-certificates.crt';
const INSTALL = 'install it (Debian: `apt-get install -y buildah podman runc`)';

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...opts });
  if (r.error) throw new Error(`${cmd}: ${r.error.code === 'ENOENT' ? `not found: ${INSTALL}` : r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${r.status}):\n${r.stderr}`);
  return r.stdout;
}

/** The absolute paths of the shared objects the executable loads, the dynamic loader included. */
function linkedLibraries(exe) {
  return run('ldd', [exe]).split('\n').map((l) => l.match(/(\/\S+) \(0x/)?.[1]).filter(Boolean);
}

function stage(ctx, exe) {
  const rootfs = join(ctx, 'rootfs');
  const put = (from, to = from) => {
    mkdirSync(dirname(join(rootfs, to)), { recursive: true });
    copyFileSync(from, join(rootfs, to)); // follows symlinks: the library itself, under the name ldd gave
  };
  put(exe, '/usr/local/bin/sluice');
  for (const lib of linkedLibraries(exe)) put(lib);
  put(CA_CERTS);
  const etc = (name, text) => writeFileSync(join(rootfs, 'etc', name), text);
  etc('passwd', `sluice:x:${UID}:${UID}:sluice:/nonexistent:/sbin/nologin\n`);
  etc('group', `sluice:x:${UID}:\n`);
  etc('nsswitch.conf', 'hosts: files dns\n');
  copyFileSync(join(ROOT, 'Containerfile'), join(ctx, 'Containerfile'));
}

function revision() {
  const r = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) return 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8' });
  return `${r.stdout.trim()}${dirty.stdout.trim() ? '-dirty' : ''}`;
}

function main() {
  const version = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;
  const i = process.argv.indexOf('--tag');
  const tag = i > 0 ? process.argv[i + 1] : `localhost/sluice:${version}`;
  const exe = run(process.execPath, ['build.mjs', '--binary'], { cwd: ROOT }).trim();
  const ctx = mkdtempSync(join(tmpdir(), 'sluice-image-'));
  try {
    stage(ctx, join(ROOT, exe));
    const args = ['bud', '--quiet', '--layers=false', '-f', join(ctx, 'Containerfile'), '-t', tag];
    args.push('--build-arg', `VERSION=${version}`, '--build-arg', `REVISION=${revision()}`);
    process.stdout.write(run('buildah', [...args, ctx]));
  } finally {
    rmSync(ctx, { recursive: true, force: true });
  }
}

try {
  main();
} catch (e) {
  console.error(`deploy/image.mjs: ${e.message}`);
  process.exit(1);
}

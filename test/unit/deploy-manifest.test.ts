// deploy/kubernetes/sluice.yaml against what it deploys (docs/deploy.md "Kubernetes"): the image the
// Containerfile builds (its user, ports, entrypoint), a pod that needs no writable root, the probe and grace
// arithmetic of docs/operations.md and the memory budget of docs/deploy.md "Memory" stated in the manifest's
// header, from its own ConfigMap; and the hardening of docs/security.md "Deployments" (seccomp, no service
// account token, secrets as files, the status port behind a NetworkPolicy, finite body and idle bounds).
// Run: node --import tsx --test test/unit/deploy-manifest.test.ts
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config/load.ts';
import { VERSION } from '../../src/version.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
// deno-lint-ignore no-explicit-any -- Kubernetes objects under test
const docs = parseAllDocuments(read('deploy/kubernetes/sluice.yaml')).map((d) => d.toJS() as Record<string, any>);
const deployment = docs.find((d) => d.kind === 'Deployment')!;
const pod = deployment.spec.template.spec;
const container = pod.containers[0];
const configMap = docs.find((d) => d.kind === 'ConfigMap')!;
const config = parse(configMap.data['config.yaml']);
/** The ConfigMap's config.yaml as the gateway reads it: every default filled in. */
const loaded = loadConfig('/etc/sluice/config.yaml', configMap.data['config.yaml'], {});
if (!loaded.ok) throw new Error(loaded.report.format());
const effective = loaded.config;
const MiB = 1024 * 1024;
const containerfile = read('Containerfile');
const instruction = (name: string) => containerfile.match(new RegExp(`^${name} (.+)$`, 'm'))?.[1];

describe('deploy/kubernetes/sluice.yaml', () => {
  test('runs the Containerfile image of this version with its entrypoint: args only, exec form', () => {
    assert.match(container.image, new RegExp(`/sluice:${VERSION.replace(/\./g, '\\.')}$`));
    assert.equal(container.command, undefined, 'the image entrypoint is the executable');
    assert.deepEqual(JSON.parse(instruction('ENTRYPOINT')!), ['/usr/local/bin/sluice']);
    assert.deepEqual(container.args, ['--config', '/etc/sluice/config.yaml']);
  });

  test("as the image's non-root user, on a read-only root, the config and state on volumes", () => {
    const [uid, gid] = instruction('USER')!.split(':').map(Number);
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.equal(pod.securityContext.runAsUser, uid);
    assert.equal(pod.securityContext.runAsGroup, gid);
    assert.equal(container.securityContext.readOnlyRootFilesystem, true);
    const mounts = Object.fromEntries(container.volumeMounts.map((m: { mountPath: string }) => [m.mountPath, m]));
    assert.equal(mounts['/etc/sluice'].readOnly, true);
    assert.ok(mounts['/var/lib/sluice'], 'a writable volume for the snapshot cache');
  });

  test('the ports are the listeners of its config.yaml, and the image exposes them', () => {
    const port = (addr: string) => Number(addr.slice(addr.lastIndexOf(':') + 1));
    const ports = Object.fromEntries(
      container.ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort]),
    );
    assert.equal(ports.proxy, port(config.proxy.addr));
    assert.equal(ports.status, port(config.observability.metrics.prometheus.addr));
    const exposed = instruction('EXPOSE')!.split(' ').map(Number);
    for (const p of Object.values(ports)) assert.ok(exposed.includes(p as number), `EXPOSE ${p}`);
  });

  test('probes and grace period follow docs/operations.md from the ConfigMap', () => {
    const minDrain = config.shutdown.min_drain_secs;
    const r = container.readinessProbe;
    assert.equal(r.httpGet.path, '/readyz');
    assert.equal(container.livenessProbe.httpGet.path, '/livez');
    // Readiness detection (period × threshold) plus ~5 s of propagation fits in the drain window.
    assert.ok(r.periodSeconds * r.failureThreshold + 5 <= minDrain, 'min_drain_secs covers detection');
    // terminationGracePeriodSeconds = min_drain_secs + longest stream (the upstream timeout) + 10 s margin.
    const longest = config.upstream.timeout_ms / 1000;
    assert.equal(pod.terminationGracePeriodSeconds, minDrain + longest + 10);
  });

  test('Pod Security "restricted": RuntimeDefault seccomp, no privilege escalation, no capabilities', () => {
    assert.deepEqual(pod.securityContext.seccompProfile, { type: 'RuntimeDefault' });
    assert.equal(container.securityContext.allowPrivilegeEscalation, false);
    assert.deepEqual(container.securityContext.capabilities, { drop: ['ALL'] });
  });

  test('no service account token is mounted (Sluice never calls the Kubernetes API)', () => {
    assert.equal(pod.automountServiceAccountToken, false);
  });

  test('memory requests and limits are the budget of docs/deploy.md "Memory", from the ConfigMap', () => {
    // The figures of the manifest's header: the gateway under load, four bodies at the limit held at once at
    // four times their size each, and 1,000 open streams.
    const UNDER_LOAD = 128 * MiB;
    const BODIES_AT_ONCE = 4;
    const BODY_COST = 4;
    const STREAMS = 96 * MiB;
    const requests = UNDER_LOAD + effective.cache.memory.max_bytes + effective.upstream.max_buffered_response_bytes;
    const body = effective.proxy.request_body_limit_bytes;
    assert.ok(body > 0, 'proxy.request_body_limit_bytes is finite: the budget counts on it');
    const budget = requests + BODIES_AT_ONCE * BODY_COST * body + STREAMS;
    const { requests: req, limits } = container.resources;
    assert.equal(quantity(req.memory), requests, `requests.memory = ${requests / MiB} MiB`);
    const limit = quantity(limits.memory);
    assert.ok(limit >= budget && limit - budget <= 256 * MiB, `limits.memory ${limit / MiB} MiB for ${budget / MiB}`);
  });

  test('secrets reach the pod as a file from a Secret volume, never as environment variables', () => {
    assert.equal(container.envFrom, undefined, 'no envFrom');
    for (const e of container.env ?? []) assert.equal(e.valueFrom?.secretKeyRef, undefined, `env ${e.name}`);
    const mount = container.volumeMounts.find((m: { mountPath: string }) => m.mountPath === '/etc/sluice');
    const volume = pod.volumes.find((v: { name: string }) => v.name === mount.name);
    const sources = volume.projected.sources;
    const secretName = sources.find((x: { secret?: object }) => x.secret).secret.name;
    const secret = docs.find((d) => d.kind === 'Secret' && d.metadata.name === secretName);
    assert.ok(secret, `the ${secretName} Secret`);
    // config.yaml's resources_file is the Secret's file in the mounted folder.
    assert.equal(config.resources_file, `/etc/sluice/${Object.keys(secret.stringData)[0]}`);
    assert.ok(sources.some((x: { configMap?: { name: string } }) => x.configMap?.name === configMap.metadata.name));
    // Readable by the image's group (fsGroup) only: 0440.
    assert.equal(volume.projected.defaultMode, 0o440);
    assert.equal(pod.securityContext.fsGroup, pod.securityContext.runAsGroup);
    // No plaintext caller key: the file names callers by hash.
    const resources = parse(secret.stringData['resources.yaml']);
    for (const k of resources.api_keys) assert.match(k.key_hash, /^[0-9a-f]{64}$/, k.display_name);
  });

  test('a NetworkPolicy keeps the status port to the monitoring namespace; the proxy port stays open', () => {
    const policy = docs.find((d) => d.kind === 'NetworkPolicy')!;
    assert.ok(policy, 'a NetworkPolicy');
    assert.deepEqual(policy.spec.podSelector.matchLabels, deployment.spec.template.metadata.labels);
    assert.deepEqual(policy.spec.policyTypes, ['Ingress']);
    const rules = policy.spec.ingress as { from?: unknown[]; ports: { port: string | number }[] }[];
    const named = (p: string | number) => (typeof p === 'number' ? p : containerPort(p));
    const status = rules.filter((r) => r.ports.some((p) => named(p.port) === containerPort('status')));
    assert.equal(status.length, 1, 'one rule admits the status port');
    assert.deepEqual(status[0]!.from, [
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } },
    ]);
    assert.deepEqual(status[0]!.ports.map((p) => named(p.port)), [containerPort('status')]);
    const proxy = rules.filter((r) => r.ports.some((p) => named(p.port) === containerPort('proxy')));
    assert.deepEqual(proxy.map((r) => r.from), [undefined], 'the proxy port: from anywhere');
    // The status listener binds every interface in the pod (the policy is what keeps it private).
    assert.equal(config.observability.metrics.prometheus.addr, `0.0.0.0:${containerPort('status')}`);
  });

  test('request bodies and idle connections are bounded (finite values, not the AISIX 0)', () => {
    assert.ok(config.proxy?.request_body_limit_bytes > 0, 'proxy.request_body_limit_bytes set, not 0');
    assert.ok(config.downstream?.idle_timeout_secs > 0, 'downstream.idle_timeout_secs set, not 0');
  });
});

/** A container port's number by its name. */
function containerPort(name: string): number {
  return container.ports.find((p: { name: string }) => p.name === name).containerPort;
}

/** A Kubernetes memory quantity (`256Mi`, `1Gi`) in bytes. */
function quantity(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)$/.exec(q);
  if (!m) throw new Error(`unexpected quantity ${q}`);
  return Number(m[1]) * { Ki: 1024, Mi: MiB, Gi: 1024 * MiB }[m[2] as 'Ki' | 'Mi' | 'Gi'];
}

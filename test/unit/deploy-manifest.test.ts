// deploy/kubernetes/sluice.yaml against what it deploys (docs/deploy.md "Kubernetes"): the image the
// Containerfile builds (its user, ports, entrypoint), a pod that needs no writable root, and the probe
// and grace arithmetic of docs/operations.md stated in the manifest's header, from its own ConfigMap.
// Run: node --import tsx --test test/unit/deploy-manifest.test.ts
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { VERSION } from '../../src/version.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
// deno-lint-ignore no-explicit-any -- Kubernetes objects under test
const docs = parseAllDocuments(read('deploy/kubernetes/sluice.yaml')).map((d) => d.toJS() as Record<string, any>);
const deployment = docs.find((d) => d.kind === 'Deployment')!;
const pod = deployment.spec.template.spec;
const container = pod.containers[0];
const config = parse(docs.find((d) => d.kind === 'ConfigMap')!.data['config.yaml']);
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
});

// A unit-test Gateway whose upstream client records every request it is asked to send, wherever it goes:
// for tests that must prove a credential never left the gateway, or reached only the host it belongs to.
import type { UpstreamRequest } from '../../src/platform.ts';
import { fetchUpstream } from '../../src/upstream-fetch.ts';
import { loadConfig } from '../../src/config/load.ts';
import { Gateway } from '../../src/gateway.ts';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { sha256Hex } from '../../src/util/crypto.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { BASE_CONFIG, type TestPlatform, testPlatform } from './platform.ts';

export interface RecordingGateway {
  gw: Gateway;
  platform: TestPlatform;
  app: ReturnType<typeof createProxyApp>;
  /** Every upstream request the gateway made, in order (token endpoints included). */
  sent: UpstreamRequest[];
  /** POST `body` as JSON to the proxy with the caller's bearer key. */
  post(path: string, body: unknown, key: string): Promise<Response>;
}

export async function recordingGateway(
  resources: string,
  env: Record<string, string> = {},
  config = BASE_CONFIG,
  now?: () => Date,
): Promise<RecordingGateway> {
  const platform = testPlatform(env);
  const sent: UpstreamRequest[] = [];
  platform.upstream = (opts) => {
    const f = fetchUpstream(fetch, opts);
    return (req) => {
      sent.push(req);
      return f(req);
    };
  };
  const c = loadConfig('/t/config.yaml', config, platform.env);
  if (!c.ok) throw new Error(c.report.format());
  const gw = new Gateway(c.config, platform, now ? { clock: () => now().getTime() } : {});
  const r = await loadResourcesFile('/t/resources.yaml', resources, platform.env);
  if (!r.ok) throw new Error(r.report.format());
  gw.apply(r.snapshot, { configHash: await sha256Hex(resources) });
  gw.lifecycle.serve();
  const app = createProxyApp(gw);
  const post = (path: string, body: unknown, key: string) =>
    Promise.resolve(app.request(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }, { peer: '127.0.0.1:5555' }));
  return { gw, platform, app, sent, post };
}

// The OpenAI-style and Anthropic mock upstreams with a Gateway over them and its proxy app, for the proxy's
// app.request() tests (test/unit/proxy-responses, proxy-stream-estimate, test/conformance/surface).
import { after, before } from 'node:test';
import { createProxyApp } from '../../src/proxy/app.ts';
import type { Gateway } from '../../src/gateway.ts';
import { type MockAnthropic, startMockAnthropic } from './mock-anthropic.ts';
import { type MockUpstream, startMockUpstream } from './mock-upstream.ts';
import { gatewayWith, type TestPlatform } from './platform.ts';

export interface ProxyOverMocks {
  mock: MockUpstream;
  anth: MockAnthropic;
  gw: Gateway;
  platform: TestPlatform;
  app: ReturnType<typeof createProxyApp>;
  /** A JSON POST through `app` as the holder of `key`. */
  post(path: string, body: unknown, key: string): Promise<Response>;
}

/**
 * Registers the enclosing `before` and `after`: both mocks started (`mocks.rules`: enforcing the real APIs'
 * rules), then a Gateway on `resources(mock.base, anth.url)` with `opts` (as `gatewayWith` takes them) and its
 * proxy app; the gateway stopped and both mocks closed after. The rig's fields are set once `before` ran.
 */
export function proxyOverMocks(
  resources: (openaiBase: string, anthropicBase: string) => string,
  opts: Parameters<typeof gatewayWith>[1] = {},
  mocks: { rules?: boolean } = {},
): ProxyOverMocks {
  // Filled in by `before`, which runs ahead of every test that reads the rig.
  const rig = {
    post: (path, body, key) =>
      Promise.resolve(rig.app.request(path, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })),
  } as ProxyOverMocks;
  before(async () => {
    rig.mock = await startMockUpstream(mocks);
    rig.anth = await startMockAnthropic(mocks);
    ({ gw: rig.gw, platform: rig.platform } = await gatewayWith(resources(rig.mock.base, rig.anth.url), opts));
    rig.app = createProxyApp(rig.gw);
  });
  after(async () => {
    rig.gw.stop();
    await rig.mock.close();
    await rig.anth.close();
  });
  return rig;
}

/**
 * The head of a resources file over the two mocks: an OpenAI, a DeepSeek (OpenAI-style) and an Anthropic key,
 * with the models `gpt`, `deep` and `claude` (no retries), ending without a newline; the caller's text goes on
 * with its other models and `api_keys` from the next line.
 */
export function threeVendors(openaiBase: string, anthropicBase: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: oa, provider: openai, api_key: k-oa, api_base: "${openaiBase}" }
  - { display_name: ds, provider: deepseek, adapter: openai, api_key: k-ds, api_base: "${openaiBase}" }
  - { display_name: an, provider: anthropic, api_key: k-an, api_base: "${anthropicBase}" }
models:
  - { display_name: gpt, provider_key: oa, model_name: gpt-upstream, retries: 0 }
  - { display_name: deep, provider_key: ds, model_name: deep-upstream, retries: 0 }
  - { display_name: claude, provider_key: an, model_name: claude-upstream, retries: 0 }`;
}

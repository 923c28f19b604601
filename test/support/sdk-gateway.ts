// A gateway process over the OpenAI-style and Anthropic mocks with the official `openai` and
// `@anthropic-ai/sdk` clients pointed at it, for the SDK process tests (test/process/sdk-clients, sdk-wire).
import { after, before } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { type MockAnthropic, startMockAnthropic } from './mock-anthropic.ts';
import { type MockUpstream, startMockUpstream } from './mock-upstream.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from './process.ts';

export interface SdkGateway {
  oai: MockUpstream;
  ant: MockAnthropic;
  gw: GatewayProcess;
  /** As the caller holding `CALLER_KEY`, on the gateway's `/v1`, no retries. */
  openai: OpenAI;
  /** As the caller holding `CALLER_KEY`, on the gateway, no retries. */
  anthropic: Anthropic;
}

/**
 * Registers the enclosing `before` and `after`: both mocks started, then a gateway of `runtime` (Node when
 * none) on the stock config with `resources(oai.base, ant.url)` and `CALLER_KEY`, ready, and a client of each
 * SDK; the gateway stopped and both mocks closed after. The fields are set once `before` ran.
 */
export function sdkGateway(
  resources: (openaiBase: string, anthropicBase: string) => string,
  runtime?: RuntimeName,
): SdkGateway {
  // Filled in by `before`, which runs ahead of every test that reads it.
  const rig = {} as SdkGateway;
  before(async () => {
    [rig.oai, rig.ant] = await Promise.all([startMockUpstream(), startMockAnthropic()]);
    rig.gw = await spawnGateway({
      runtime,
      config: baseConfig(),
      env: { CALLER_KEY },
      files: { 'resources.yaml': resources(rig.oai.base, rig.ant.url) },
    });
    await rig.gw.waitReady();
    rig.openai = new OpenAI({ apiKey: CALLER_KEY, baseURL: rig.gw.url('/v1'), maxRetries: 0 });
    rig.anthropic = new Anthropic({ apiKey: CALLER_KEY, baseURL: rig.gw.url(''), maxRetries: 0 });
  });
  after(async () => {
    await rig.gw.stop();
    await Promise.all([rig.oai.close(), rig.ant.close()]);
  });
  return rig;
}

/** `params` streamed through `client.messages.stream`: the text of its `text` events, and the final message. */
export async function streamedMessage(
  client: Anthropic,
  params: Anthropic.MessageStreamParams,
): Promise<{ text: string; final: Anthropic.Message }> {
  const stream = client.messages.stream(params);
  let text = '';
  stream.on('text', (t) => {
    text += t;
  });
  const final = await stream.finalMessage();
  return { text, final };
}

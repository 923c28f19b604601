// Black-box: the official `openai` and `@anthropic-ai/sdk` clients against a real gateway on Node, Bun and
// Deno reaching the cloud mocks (docs/configuration.md "AWS Bedrock", "Vertex AI", "Azure OpenAI"): chat
// JSON and stream, tools, embeddings, /v1/messages translated, failover from Bedrock to Azure — and no
// configured credential in any log line.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { AAD, AZURE_KEY, type MockAzure, startMockAzure } from '../support/mock-azure.ts';
import { AWS, awsError, event, type MockBedrock, startMockBedrock, streamFrames } from '../support/mock-bedrock.ts';
import { type MockVertex, PROJECT, startMockVertex } from '../support/mock-vertex.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, type RuntimeName, spawnGateway } from '../support/process.ts';

let az: MockAzure;
let br: MockBedrock;
let vx: MockVertex;
let saKey: string;

before(async () => {
  [az, br, vx] = await Promise.all([startMockAzure(), startMockBedrock(), startMockVertex()]);
  saKey = vx.newServiceAccount().private_key;
});

after(async () => {
  await Promise.all([az.close(), br.close(), vx.close()]);
  assert.deepEqual(br.rejected, [], 'every SigV4 signature verified');
  assert.deepEqual(vx.refusedMints, [], 'every JWT verified');
});

function resources(): string {
  const sa = { ...JSON.parse(JSON.stringify(vx.newServiceAccount())) };
  const aad = JSON.stringify({ ...AAD, authority_host: az.url });
  return `_format_version: "1"
provider_keys:
  - { display_name: aws, adapter: bedrock, api_key: '${JSON.stringify(AWS)}', api_base: "${br.url}" }
  - { display_name: azure, adapter: azure-openai, api_key: "${AZURE_KEY}", api_base: "${az.url}" }
  - { display_name: azure-aad, adapter: azure-openai, api_key: '${aad}', api_base: "${az.url}" }
  - { display_name: gcp, adapter: vertex, api_key: '${
    JSON.stringify({ project: PROJECT, region: 'us-central1', service_account_json: sa })
  }', api_base: "${vx.url}" }
models:
  - { display_name: llama, provider_key: aws, model_name: "meta.llama3-1-70b-instruct-v1:0", retries: 0 }
  - { display_name: titan, provider_key: aws, model_name: "amazon.titan-embed-text-v2:0", retries: 0 }
  - { display_name: gpt, provider_key: azure, model_name: gpt-4o-prod, retries: 0 }
  - { display_name: gpt-aad, provider_key: azure-aad, model_name: gpt-4o-prod, retries: 0 }
  - { display_name: gemini, provider_key: gcp, model_name: gemini-2.0-flash, retries: 0 }
  - { display_name: vembed, provider_key: gcp, model_name: text-embedding-005, retries: 0 }
  - { display_name: resilient, routing: { strategy: failover, targets: [{ model: llama, priority: 1 }, { model: gpt, priority: 0 }] } }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;
}

for (const runtime of ['node', 'bun', 'deno'] as RuntimeName[]) {
  describe(`${runtime}: the cloud families through the SDKs`, () => {
    let gw: GatewayProcess;
    let openai: OpenAI;
    let anthropic: Anthropic;

    before(async () => {
      gw = await spawnGateway({
        runtime,
        config: baseConfig(),
        env: { CALLER_KEY },
        files: { 'resources.yaml': resources() },
      });
      await gw.waitReady();
      openai = new OpenAI({ apiKey: CALLER_KEY, baseURL: gw.url('/v1'), maxRetries: 0 });
      anthropic = new Anthropic({ apiKey: CALLER_KEY, baseURL: gw.url(''), maxRetries: 0 });
    });

    after(async () => {
      await gw.stop();
      const secrets = [AWS.secret_access_key, AZURE_KEY, AAD.client_secret, saKey, ...az.minted, ...vx.minted];
      for (const line of gw.logs) {
        const text = JSON.stringify(line);
        for (const s of secrets) assert.equal(text.includes(s), false, `a log line carries a secret: ${text}`);
      }
    });

    test('chat JSON and stream on each family', async () => {
      const messages = [{ role: 'user' as const, content: 'hi' }];
      for (
        const [model, want] of [['llama', 'hi from converse'], ['gpt', 'hi from azure'], ['gpt-aad', 'hi from azure'], [
          'gemini',
          'hi from gemini-2.0-flash',
        ]]
      ) {
        const r = await openai.chat.completions.create({ model: model!, messages });
        assert.equal(r.choices[0]!.message.content, want, model);
      }
      for (
        const [model, want] of [['llama', 'Hello from Bedrock'], ['gpt', 'hello azure'], [
          'gemini',
          'Hello from Gemini',
        ]]
      ) {
        const stream = await openai.chat.completions.create({ model: model!, messages, stream: true });
        let text = '';
        for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
        assert.equal(text, want, model);
      }
    });

    test('a streamed Bedrock tool call reaches the SDK whole', async () => {
      br.script(streamFrames([
        event('messageStart', { role: 'assistant' }),
        event('contentBlockStart', {
          contentBlockIndex: 0,
          start: { toolUse: { toolUseId: 'tu_9', name: 'get_weather' } },
        }),
        event('contentBlockDelta', { contentBlockIndex: 0, delta: { toolUse: { input: '{"city":"Oslo"}' } } }),
        event('messageStop', { stopReason: 'tool_use' }),
      ]));
      const stream = openai.chat.completions.stream({
        model: 'llama',
        messages: [{ role: 'user', content: 'weather?' }],
        tools: [{
          type: 'function',
          function: { name: 'get_weather', parameters: { type: 'object', properties: {} } },
        }],
      });
      const done = await stream.finalChatCompletion();
      const call = done.choices[0]!.message.tool_calls![0]!;
      assert.equal(call.type === 'function' && call.function.arguments, '{"city":"Oslo"}');
      assert.equal(done.choices[0]!.finish_reason, 'tool_calls');
    });

    test('embeddings on Bedrock Titan and Vertex', async () => {
      const t = await openai.embeddings.create({ model: 'titan', input: ['a', 'bb'], encoding_format: 'float' });
      assert.deepEqual(t.data.map((d) => d.embedding[0]), [1, 2]);
      const v = await openai.embeddings.create({ model: 'vembed', input: 'abc', encoding_format: 'float' });
      assert.equal(v.data[0]!.embedding[0], 3);
    });

    test('/v1/messages translated to Bedrock and Vertex', async () => {
      for (const [model, want] of [['llama', 'hi from converse'], ['gemini', 'hi from gemini-2.0-flash']]) {
        const m = await anthropic.messages.create({
          model: model!,
          max_tokens: 32,
          messages: [{ role: 'user', content: 'hi' }],
        });
        assert.equal(m.content[0]!.type === 'text' && m.content[0]!.text, want);
      }
    });

    test('failover: Bedrock unavailable, Azure answers', async () => {
      const before = br.requests.length;
      br.script(awsError(503, 'ServiceUnavailableException'));
      const r = await openai.chat.completions.create({
        model: 'resilient',
        messages: [{ role: 'user', content: 'hi' }],
      });
      assert.equal(r.choices[0]!.message.content, 'hi from azure');
      assert.equal(br.requests.length, before + 1, 'Bedrock was tried first');
    });
  });
}

// The memory cache store's byte bound on a real Node gateway (docs/cache.md "The memory bound"): 10,000
// distinct prompts with large answers go through a gateway whose store may hold 16 MiB; the store's own
// gauge never passes the bound, and the process's resident memory stays far below what the answers would
// take if they were all kept.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { chatCompletion, type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { type GatewayProcess, spawnGateway } from '../support/process.ts';

const KEY = 'sk-cache-memory';
const MAX_BYTES = 16 * 1024 * 1024;
const ANSWER_CHARS = 64 * 1024;
const REQUESTS = 10_000;
/** What V8 keeps of the answers passed through before collecting them. */
const GC_HEADROOM = 128 * 1024 * 1024;

function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

describe('memory cache store bound (Node gateway)', { timeout: 300_000 }, () => {
  let up: MockUpstream;
  let gw: GatewayProcess;
  before(async () => {
    up = await startMockUpstream();
    up.setDefault({ body: chatCompletion('gpt-upstream', 'x'.repeat(ANSWER_CHARS)) });
    gw = await spawnGateway({
      runtime: 'node',
      config: `resources_file: resources.yaml
proxy: { addr: "127.0.0.1:{{proxy}}" }
admin: { enabled: false }
observability: { access_log: false, metrics: { prometheus: { addr: "127.0.0.1:{{status}}" } } }
shutdown: { min_drain_secs: 0 }
cache: { memory: { max_bytes: ${MAX_BYTES} } }
`,
      files: {
        'resources.yaml': `_format_version: "1"
provider_keys:
  - { display_name: mock, provider: openai, api_key: sk-up, api_base: ${up.base} }
models:
  - { display_name: gpt-big, model_name: gpt-upstream, provider_key: mock, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
cache_policies:
  - { name: big, scope: env }
`,
      },
      env: { CALLER: KEY },
    });
    await gw.waitReady();
  });
  after(async () => {
    await gw?.stop();
    await up?.close();
  });

  const send = async (from: number, to: number, workers = 16) => {
    let next = from;
    await Promise.all(Array.from({ length: workers }, async () => {
      while (next < to) {
        const i = next++;
        const r = await fetch(gw.url('/v1/chat/completions'), {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'gpt-big', messages: [{ role: 'user', content: `prompt ${i}` }] }),
        });
        assert.equal(r.status, 200);
        await r.arrayBuffer();
      }
    }));
  };
  const gauge = async (name: string) => {
    const m = await (await fetch(gw.url('/metrics', 'status'))).text();
    return Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(m)?.[1]);
  };

  test(`${REQUESTS} large answers: the store holds at most max_bytes, RSS stays bounded`, async () => {
    await send(0, 300); // the store is full (16 MiB / 128 KiB charged per answer) and the heap warmed up
    const baseline = rssBytes(gw.proc.pid!);
    let peak = baseline;
    for (let from = 300; from < REQUESTS; from += 1000) {
      await send(from, Math.min(from + 1000, REQUESTS));
      peak = Math.max(peak, rssBytes(gw.proc.pid!));
      assert.ok((await gauge('sluice_cache_memory_bytes')) <= MAX_BYTES);
    }
    const entries = await gauge('sluice_cache_memory_entries');
    assert.ok(entries > 0 && entries <= Math.floor(MAX_BYTES / (2 * ANSWER_CHARS)), `entries: ${entries}`);
    // Kept whole, the answers would take REQUESTS × ANSWER_CHARS bytes at least (625 MiB); bounded, the
    // resident set grows by at most the bound plus the runtime's garbage-collection headroom (docs/cache.md).
    const growth = peak - baseline;
    assert.ok(growth < MAX_BYTES + GC_HEADROOM, `RSS grew by ${Math.round(growth / 1048576)} MiB`);
  });
});

// Tag routing end to end (docs/routing.md "Tag routing"): the proxy app through app.request() against one mock
// upstream that records which target's upstream model each call named, plus the pure eligibility rule.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Gateway } from '../../src/gateway.ts';
import { createProxyApp } from '../../src/proxy/app.ts';
import { noTagMatch, requestTags, tagEligible } from '../../src/routing/strategy-tag.ts';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { BASE_CONFIG, gatewayWith } from '../support/platform.ts';

const CALLER = 'sk-caller-tags-SECRET-1';
const ENV = { CALLER, UPSTREAM_KEY: 'sk-upstream-tags-SECRET-9' };

let up: MockUpstream;
let gw: Gateway;
let app: ReturnType<typeof createProxyApp>;

before(async () => {
  up = await startMockUpstream();
  ({ gw } = await gatewayWith(
    `_format_version: "1"
provider_keys:
  - { display_name: p, provider: openai, api_key: "\${UPSTREAM_KEY}", api_base: ${up.base} }
models:
  - { display_name: m-eu, provider_key: p, model_name: up-eu, retries: 0 }
  - { display_name: m-us, provider_key: p, model_name: up-us, retries: 0 }
  - { display_name: m-def, provider_key: p, model_name: up-def, retries: 0 }
  - { display_name: m-plain, provider_key: p, model_name: up-plain, retries: 0 }
  - { display_name: m-eu-private, provider_key: p, model_name: up-eu-private, retries: 0, allowed_cidrs: [10.9.0.0/16] }
  - display_name: tagged
    routing:
      targets:
        - { model: m-eu, tags: [eu, gdpr] }
        - { model: m-us, tags: [us] }
        - { model: m-def, tags: [default] }
        - { model: m-plain }
  - display_name: no-default
    routing:
      targets:
        - { model: m-eu, tags: [eu] }
        - { model: m-plain }
  - display_name: untagged
    routing:
      targets:
        - { model: m-us }
        - { model: m-eu }
  - display_name: cidr-tagged
    routing:
      targets:
        - { model: m-eu-private, tags: [eu] }
        - { model: m-us, tags: [us] }
api_keys:
  - { display_name: caller, key_env: CALLER, allowed_models: ["*"] }
`,
    { env: ENV, config: BASE_CONFIG },
  ));
  app = createProxyApp(gw);
});
after(async () => {
  gw.stop();
  await up.close();
});

async function chat(model: string, tags?: string, peer = '127.0.0.1:5555'): Promise<Response> {
  return await app.request('/v1/chat/completions', {
    method: 'POST',
    headers: {
      authorization: `Bearer ${CALLER}`,
      'content-type': 'application/json',
      ...(tags === undefined ? {} : { 'x-aisix-routing-tags': tags }),
    },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
  }, { peer });
}

/** The upstream model the last call named, after checking the answer was a 200. */
async function servedTo(res: Response): Promise<string> {
  assert.equal(res.status, 200, await res.clone().text());
  await res.body?.cancel();
  const last = up.requests.at(-1)!;
  assert.equal(last.headers['x-aisix-routing-tags'], undefined, 'the tags header is never sent upstream');
  return String(last.json?.model);
}

describe('tag routing through the proxy', () => {
  test('a request tag selects the target sharing it; any one of several tags is enough', async () => {
    assert.equal(await servedTo(await chat('tagged', 'eu')), 'up-eu');
    assert.equal(await servedTo(await chat('tagged', 'us')), 'up-us');
    assert.equal(await servedTo(await chat('tagged', ' nope , gdpr ')), 'up-eu');
    const res = await chat('tagged', 'us');
    assert.equal(res.headers.get('x-aisix-served-by'), 'm-us');
    await res.body?.cancel();
  });

  test('unmatched tags and no tags select the default-tagged target', async () => {
    assert.equal(await servedTo(await chat('tagged', 'apac')), 'up-def');
    assert.equal(await servedTo(await chat('tagged')), 'up-def');
    assert.equal(await servedTo(await chat('tagged', ' , ')), 'up-def');
  });

  test('comparison is exact and case-sensitive', async () => {
    assert.equal(await servedTo(await chat('tagged', 'EU')), 'up-def');
  });

  test('no tagged target at all: the strategy sees every target, tags or not', async () => {
    assert.equal(await servedTo(await chat('untagged', 'eu')), 'up-us');
    assert.equal(await servedTo(await chat('untagged')), 'up-us');
  });

  test('no tags and no default: every target is eligible (the untagged one included)', async () => {
    assert.equal(await servedTo(await chat('no-default')), 'up-eu');
  });

  test("unmatched tags and no default: AISIX's 400, no upstream call", async () => {
    const before = up.requests.length;
    const res = await chat('no-default', 'us,"x"');
    assert.equal(res.status, 400);
    assert.deepEqual(await res.json(), {
      error: {
        message: 'request payload is invalid: no routing target matches request tags ["us", "\\"x\\""]',
        type: 'invalid_request_error',
      },
    });
    assert.equal(up.requests.length, before);
  });

  test('tags narrow before allowed_cidrs: the only tagged target excluding the caller is a 403', async () => {
    const before = up.requests.length;
    const res = await chat('cidr-tagged', 'eu', '192.0.2.7:4000');
    assert.equal(res.status, 403);
    const body = await res.json() as { error: { code: string; message: string } };
    assert.equal(body.error.code, 'ip_restricted');
    assert.ok(!body.error.message.includes('m-eu-private'), 'the refusal names no member');
    assert.equal(up.requests.length, before);
    // The caller the member admits is served by it; another tag reaches the other member.
    assert.equal(await servedTo(await chat('cidr-tagged', 'eu', '10.9.1.1:4000')), 'up-eu-private');
    assert.equal(await servedTo(await chat('cidr-tagged', 'us', '192.0.2.7:4000')), 'up-us');
  });
});

describe('tag eligibility (pure)', () => {
  const t = (tags?: string[]) => ({ tags });
  test('the header: split on commas, trimmed, empties dropped', () => {
    assert.deepEqual(requestTags(new Headers({ 'x-aisix-routing-tags': ' a,, b ,c ' })), ['a', 'b', 'c']);
    assert.deepEqual(requestTags(new Headers()), []);
  });
  test('the four cases of the rule', () => {
    const eu = t(['eu']);
    const def = t(['default']);
    const plain = t();
    assert.deepEqual(tagEligible([plain, t([])], ['eu']), [plain, t([])]);
    assert.deepEqual(tagEligible([eu, def, plain], ['eu']), [eu]);
    assert.deepEqual(tagEligible([eu, def, plain], ['us']), [def]);
    assert.deepEqual(tagEligible([eu, def, plain], []), [def]);
    assert.deepEqual(tagEligible([eu, plain], []), [eu, plain]);
    assert.deepEqual(tagEligible([eu, plain], ['us']), []);
  });
  test("the 400's list is written as Rust's Debug writes it", () => {
    assert.equal(noTagMatch(['eu']), 'request payload is invalid: no routing target matches request tags ["eu"]');
    assert.equal(
      noTagMatch(['a\\b', 'c\td']),
      'request payload is invalid: no routing target matches request tags ["a\\\\b", "c\\td"]',
    );
  });
});

// Reloads that cannot half-apply (issue 14), against a real gateway process: a file missing a collection
// that served before is refused and the old snapshot keeps serving; an explicit empty list removes a
// collection; a file being written while the reload reads it is waited for.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type MockUpstream, startMockUpstream } from '../support/mock-upstream.ts';
import { baseConfig, CALLER_KEY, type GatewayProcess, resourcesFor, spawnGateway } from '../support/process.ts';

const SECOND_MODEL = `  - display_name: second
    model_name: gpt-2
    provider_key: mock
`;

/** resourcesFor's file with its `api_keys:` section cut off (what a non-atomic write can leave). */
function withoutApiKeys(text: string): string {
  const i = text.indexOf('api_keys:');
  assert.ok(i > 0);
  return text.slice(0, i);
}

describe('file reloads that cannot half-apply', () => {
  let mock: MockUpstream;
  let gw: GatewayProcess;
  const file = () => join(gw.dir, 'resources.yaml');
  const status = async () => (await fetch(gw.url('/status/config', 'status'))).json();
  const chat = async (model = 'gpt-test') => {
    const r = await fetch(gw.url('/v1/chat/completions'), {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }] }),
    });
    await r.arrayBuffer();
    return r.status;
  };
  /** SIGHUP, then the outcome line of this reload (counted from now). */
  const reload = async (): Promise<string> => {
    const from = gw.logs.length;
    gw.signal('SIGHUP');
    const line = await gw.waitForLog((l) =>
      gw.logs.indexOf(l) >= from &&
      (l.msg === 'resources file reloaded' || l.msg === 'resources file reload failed — keeping the previous snapshot')
    );
    return String(line.msg);
  };

  before(async () => {
    mock = await startMockUpstream();
    gw = await spawnGateway({
      config: baseConfig(),
      files: { 'resources.yaml': resourcesFor(mock.base) },
      env: { CALLER_KEY },
    });
    await gw.waitReady();
  });
  after(async () => {
    await gw?.stop();
    await mock?.close();
  });

  test('a truncated file (its api_keys section gone) is refused; the old snapshot serves; out_of_sync says why', async () => {
    const seq0 = (await status()).applied.apply_seq;
    writeFileSync(file(), withoutApiKeys(resourcesFor(mock.base)));
    assert.equal(await reload(), 'resources file reload failed — keeping the previous snapshot');
    const s = await status();
    assert.equal(s.state, 'out_of_sync');
    assert.equal(s.applied.apply_seq, seq0, 'nothing applied');
    assert.equal(s.last_reload.successful, false);
    assert.equal(s.last_failure.last_error_kind, 'validate');
    assert.match(s.last_failure.last_error, /`api_keys` \(1 served\) absent from the new file/);
    assert.match(s.last_failure.last_error, /write it as an empty list: `api_keys: \[\]`/);
    assert.equal(await chat(), 200, 'the caller key of the previous snapshot still works');
    // A file with the section back reloads.
    writeFileSync(file(), resourcesFor(mock.base));
    assert.equal(await reload(), 'resources file reloaded');
    assert.equal((await status()).state, 'synced');
  });

  test('an explicit `api_keys: []` removes every key on purpose: applied', async () => {
    writeFileSync(file(), `${withoutApiKeys(resourcesFor(mock.base))}api_keys: []\n`);
    assert.equal(await reload(), 'resources file reloaded');
    const s = await status();
    assert.equal(s.state, 'synced');
    assert.equal(s.applied.resource_counts.api_keys, undefined);
    assert.equal(await chat(), 401, 'no caller key is configured any more');
    // Once applied without api keys, a file without the section is no longer a truncation.
    writeFileSync(file(), withoutApiKeys(resourcesFor(mock.base)));
    assert.equal(await reload(), 'resources file reloaded');
    writeFileSync(file(), resourcesFor(mock.base));
    assert.equal(await reload(), 'resources file reloaded');
    assert.equal(await chat(), 200);
  });

  test('a file written in two steps while the reload reads it: the reload waits for it to settle', async () => {
    const full = resourcesFor(mock.base, '').replace('api_keys:', `${SECOND_MODEL}api_keys:`);
    const cut = full.indexOf(SECOND_MODEL);
    // Step one: a valid file without the second model, then SIGHUP; step two lands as the reload begins.
    writeFileSync(file(), full.slice(0, cut) + full.slice(cut + SECOND_MODEL.length));
    const from = gw.logs.length;
    gw.signal('SIGHUP');
    await gw.waitForLog((l) => gw.logs.indexOf(l) >= from && l.msg === 'reloading the resources file');
    writeFileSync(file(), full);
    const done = await gw.waitForLog((l) =>
      gw.logs.indexOf(l) >= from &&
      (l.msg === 'resources file reloaded' || l.msg === 'resources file reload failed — keeping the previous snapshot')
    );
    assert.equal(done.msg, 'resources file reloaded');
    assert.equal(done.resources, 4, 'the complete file applied, not its first step');
    assert.equal((await status()).applied.resource_counts.models, 2);
    assert.equal(await chat('second'), 200);
  });
});

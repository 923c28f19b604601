// `Platform.gzip` on Node, Bun and Deno (runtimes/node-gzip.ts): gzip that any gunzip reads back, at once for a
// usual batch and on the thread pool for a large one, and what the Datadog exporter sends with it.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { gunzipSync } from 'node:zlib';
import { nodeGzip, SYNC_MAX_CHARS } from '../../runtimes/node-gzip.ts';
import { datadogDelivery } from '../../src/usage/datadog.ts';
import { Cancel } from '../../src/util/cancel.ts';

describe('node gzip', () => {
  test('a batch and a larger one come back whole, as UTF-8, in buffers of their own', async () => {
    const small = `[${Array.from({ length: 100 }, (_, i) => `{"n":${i},"s":"é\u2028😀"}`).join(',')}]`;
    const large = 'x'.repeat(SYNC_MAX_CHARS) + 'ü'.repeat(1000);
    for (const text of [small, large]) {
      const zipped = await nodeGzip(text);
      assert.ok(zipped instanceof Uint8Array);
      assert.equal(zipped.byteOffset, 0);
      assert.equal(zipped.buffer.byteLength, zipped.byteLength);
      assert.deepEqual([zipped[0], zipped[1]], [0x1f, 0x8b]);
      assert.equal(gunzipSync(zipped).toString('utf8'), text);
    }
  });

  test('the Datadog exporter posts its batch through the gzip it is given', async () => {
    let sent: Uint8Array | undefined;
    const zipped: string[] = [];
    const deliver = datadogDelivery(
      { site: '127.0.0.1:9', credential_ref: 'x' },
      {},
      (_url, _headers, body) => {
        sent = body;
        return Promise.resolve({ status: 202, text: '' });
      },
      (text) => {
        zipped.push(text);
        return nodeGzip(text);
      },
    );
    assert.deepEqual(await deliver(['{"a":1}', '{"b":"é"}'], new Cancel()), { ok: true });
    assert.deepEqual(zipped, ['[{"a":1},{"b":"é"}]']);
    assert.equal(gunzipSync(sent!).toString('utf8'), '[{"a":1},{"b":"é"}]');
  });
});

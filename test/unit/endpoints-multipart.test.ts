// The upload's form as the gateway reads and writes it (src/endpoints/upload.ts, docs/batch-files-endpoints.md
// "Files"): the gateway's own multipart reader and writer, the same on every runtime (Bun's `FormData` dropped a
// file's type and gave a parsed form no boundary), checked against hand-written bodies and the web parser.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseUpload } from '../../src/endpoints/upload.ts';
import { ProxyError } from '../../src/http/errors.ts';

const enc = (s: string) => new TextEncoder().encode(s);
const TYPE = 'multipart/form-data; boundary=XyZ';

test('parseUpload drops the model hint and writes a form the web parser reads back whole', async () => {
  const caller = new FormData();
  caller.append('model', ' batch-mini ');
  caller.append('file', new File([new Uint8Array([0, 255, 13, 10])], 'data.bin', { type: 'application/jsonl' }));
  caller.append('purpose', 'batch');
  const sent = new Response(caller);
  const type = sent.headers.get('content-type')!;
  const up = parseUpload(new Uint8Array(await sent.arrayBuffer()), type);
  assert.ok(!(up instanceof ProxyError), 'parsed');
  assert.equal(up.model, 'batch-mini');
  const form = await new Response(up.body.bytes, { headers: { 'content-type': up.body.contentType } }).formData();
  assert.deepEqual([...form.keys()], ['purpose', 'file']);
  assert.equal(form.get('purpose'), 'batch');
  const file = form.get('file') as File;
  assert.equal(file.name, 'data.bin');
  assert.equal(file.type, 'application/jsonl');
  assert.deepEqual(new Uint8Array(await file.arrayBuffer()), new Uint8Array([0, 255, 13, 10]));
});

test('parseUpload refuses a form without a file part, and a `file` that is a text field', () => {
  const text = enc('--XyZ\r\nContent-Disposition: form-data; name="file"\r\n\r\nnot a file\r\n--XyZ--\r\n');
  const r = parseUpload(text, TYPE);
  assert.ok(r instanceof ProxyError);
  assert.equal(r.message, 'request payload is invalid: multipart body must include a `file` field');
  const bad = parseUpload(enc('nothing'), TYPE);
  assert.ok(bad instanceof ProxyError);
  assert.equal(bad.message, 'request payload is invalid: invalid multipart form data');
});

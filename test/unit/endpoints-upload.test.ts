// The upload's form as the gateway writes it for the upstream (docs/batch-files-endpoints.md "Files"): its own
// multipart encoding, the same on every runtime (Bun's `new Response(form)` gave no boundary for a parsed form),
// read back by the web parser with the fields, file name, type and bytes intact.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeMultipart, parseUpload } from '../../src/endpoints/upload.ts';
import { ProxyError } from '../../src/http/errors.ts';

const decode = (b: Uint8Array) => new TextDecoder().decode(b);

test('encodeMultipart names its boundary in the content type and ends with the closing delimiter', async () => {
  const { bytes, contentType } = await encodeMultipart([
    { name: 'purpose', value: 'batch' },
    { name: 'file', value: new Blob(['{"a":1}\n'], { type: 'application/jsonl' }), fileName: 'in.jsonl' },
  ]);
  const boundary = /^multipart\/form-data; boundary=(\S+)$/.exec(contentType)?.[1];
  assert.ok(boundary, contentType);
  assert.equal(
    decode(bytes),
    `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n` +
      `Content-Type: application/jsonl\r\n\r\n{"a":1}\n\r\n--${boundary}--\r\n`,
  );
});

test('encodeMultipart escapes quotes and line breaks in names and file names', async () => {
  const { bytes } = await encodeMultipart([{ name: 'a"b', value: new Blob(['x']), fileName: 'x"\r\ny.txt' }]);
  const text = decode(bytes);
  assert.match(text, /name="a%22b"; filename="x%22%0D%0Ay.txt"\r\nContent-Type: application\/octet-stream\r\n/);
});

test('parseUpload drops the model hint and writes a form the web parser reads back whole', async () => {
  const caller = new FormData();
  caller.append('model', ' batch-mini ');
  caller.append('file', new File([new Uint8Array([0, 255, 13, 10])], 'data.bin', { type: 'application/jsonl' }));
  caller.append('purpose', 'batch');
  const sent = new Response(caller);
  const type = sent.headers.get('content-type')!;
  const up = await parseUpload(new Uint8Array(await sent.arrayBuffer()), type);
  assert.ok(!(up instanceof ProxyError), 'parsed');
  assert.equal(up.model, 'batch-mini');
  assert.match(up.body.contentType, /^multipart\/form-data; boundary=/);
  const form = await new Response(up.body.bytes, { headers: { 'content-type': up.body.contentType } }).formData();
  assert.deepEqual([...form.keys()], ['purpose', 'file']);
  assert.equal(form.get('purpose'), 'batch');
  const file = form.get('file') as File;
  assert.equal(file.name, 'data.bin');
  assert.equal(file.type, 'application/jsonl');
  assert.deepEqual(new Uint8Array(await file.arrayBuffer()), new Uint8Array([0, 255, 13, 10]));
});

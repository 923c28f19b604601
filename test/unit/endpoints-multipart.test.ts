// The upload's form as the gateway reads and writes it (src/endpoints/multipart.ts, docs/batch-files-endpoints.md
// "Files"): its own multipart parser and encoder, the same on every runtime (Bun's `FormData` dropped a file's
// type and gave a parsed form no boundary), checked against hand-written bodies and the web parser.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeMultipart, parseMultipart } from '../../src/endpoints/multipart.ts';
import { parseUpload } from '../../src/endpoints/upload.ts';
import { ProxyError } from '../../src/http/errors.ts';

const enc = (s: string) => new TextEncoder().encode(s);
const decode = (b: Uint8Array) => new TextDecoder().decode(b);
const TYPE = 'multipart/form-data; boundary=XyZ';

test('parseMultipart reads text fields and a file with its name, type and bytes', () => {
  const body = 'preamble\r\n--XyZ\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n' +
    '--XyZ  \r\ncontent-disposition: form-data; name="file"; filename="in.jsonl"\r\n' +
    'Content-Type: application/jsonl\r\n\r\n{"a":1}\n\r\n--XyZ--\r\nepilogue';
  const parts = parseMultipart(enc(body), TYPE)!;
  assert.deepEqual(parts.map((p) => [p.name, p.fileName, p.type, decode(p.data)]), [
    ['purpose', undefined, undefined, 'batch'],
    ['file', 'in.jsonl', 'application/jsonl', '{"a":1}\n'],
  ]);
});

test('parseMultipart takes a quoted boundary, a quoted-pair and an RFC 5987 file name', () => {
  const body = '--a b\r\nContent-Disposition: form-data; name="x\\"y"; filename*=UTF-8\'\'%C3%A9t%C3%A9.txt\r\n\r\n' +
    'v\r\n--a b--';
  const parts = parseMultipart(enc(body), 'multipart/form-data; boundary="a b"')!;
  assert.deepEqual(parts.map((p) => [p.name, p.fileName]), [['x"y', 'été.txt']]);
});

test('parseMultipart refuses a body that is no well-formed form', () => {
  const part = '--XyZ\r\nContent-Disposition: form-data; name="a"\r\n\r\nv';
  assert.equal(parseMultipart(enc(`${part}\r\n--XyZ--`), 'multipart/form-data'), undefined, 'no boundary');
  assert.equal(parseMultipart(enc(part), TYPE), undefined, 'no closing delimiter');
  assert.equal(parseMultipart(enc('junk--XyZ--'), TYPE), undefined, 'delimiter not at a line start');
  const noName = '--XyZ\r\nContent-Disposition: form-data\r\n\r\nv\r\n--XyZ--';
  assert.equal(parseMultipart(enc(noName), TYPE), undefined, 'a part without a name');
  const notForm = '--XyZ\r\nContent-Disposition: attachment; name="a"\r\n\r\nv\r\n--XyZ--';
  assert.equal(parseMultipart(enc(notForm), TYPE), undefined, 'a part that is no form-data');
});

test('encodeMultipart writes its boundary into the content type and escapes names', () => {
  const { bytes, contentType } = encodeMultipart([
    { name: 'purpose', data: enc('batch') },
    { name: 'a"b', data: new Uint8Array([0, 13, 10]), fileName: 'x"\r\ny.txt' },
  ]);
  const boundary = /^multipart\/form-data; boundary=(\S+)$/.exec(contentType)?.[1];
  assert.ok(boundary, contentType);
  assert.equal(
    decode(bytes),
    `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="a%22b"; filename="x%22%0D%0Ay.txt"\r\n` +
      `Content-Type: application/octet-stream\r\n\r\n\0\r\n\r\n--${boundary}--\r\n`,
  );
});

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

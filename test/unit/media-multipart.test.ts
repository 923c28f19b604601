// The bounded multipart reader and the upstream form encoder (docs/media-endpoints.md "Multipart bodies"):
// the same parts whatever the chunking (a delimiter split across chunks, bytes that look like one inside a
// file), what the runtime's own parser reads, the grammar's refusals, and a re-encoding the runtime reads back.
// Run: node --import tsx --test test/unit/media-multipart.test.ts
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { boundaryOf, MAX_PARTS, MultipartError, MultipartParser, readMultipart } from '../../src/media/multipart.ts';
import { encodeForm, type FormPart, partBytes } from '../../src/providers/form.ts';
import { ProxyError } from '../../src/http/errors.ts';

const enc = new TextEncoder();
const BOUNDARY = 'XyZ-123';

/** A file whose bytes contain CR LF `--` and most of the delimiter, but never all of it. */
const TRICKY = new Uint8Array([
  ...enc.encode('a\r\n--XyZ-12\r\n--XyZ'),
  0,
  255,
  13,
  10,
  ...enc.encode('--XyZ-12'),
  13,
]);

/** A body as browsers and the runtimes' own parsers write it. */
const STRICT = new Uint8Array([
  ...enc.encode(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper\r\n`),
  ...enc.encode(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a %22b%22.wav"\r\n` +
      'Content-Type: audio/wav\r\n\r\n',
  ),
  ...TRICKY,
  ...enc.encode(`\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name="empty"\r\n\r\n\r\n`),
  ...enc.encode(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nÜber\r\n`),
  ...enc.encode(`--${BOUNDARY}--\r\n`),
]);

/** The same parts with what RFC 2046 also allows: a preamble, padding after a boundary, an epilogue. */
const BODY = new Uint8Array([
  ...enc.encode('preamble to ignore\r\n'),
  ...STRICT.subarray(0, BOUNDARY.length + 2),
  ...enc.encode(' \t'),
  ...STRICT.subarray(BOUNDARY.length + 2),
  ...enc.encode('epilogue'),
]);

function parse(pieces: Uint8Array[]): FormPart[] {
  const p = new MultipartParser(BOUNDARY);
  for (const x of pieces) p.push(x);
  return p.end();
}

const view = (parts: FormPart[]) =>
  parts.map((p) => ({ name: p.name, filename: p.filename, type: p.contentType, bytes: [...partBytes(p)] }));

describe('MultipartParser', () => {
  const whole = view(parse([BODY]));

  test('reads every part, its filename and type, raw bytes included', () => {
    assert.deepEqual(whole, [
      { name: 'model', filename: undefined, type: undefined, bytes: [...enc.encode('whisper')] },
      { name: 'file', filename: 'a %22b%22.wav', type: 'audio/wav', bytes: [...TRICKY] },
      { name: 'empty', filename: undefined, type: undefined, bytes: [] },
      { name: 'prompt', filename: undefined, type: undefined, bytes: [...enc.encode('Über')] },
    ]);
  });

  test('the same parts at every split into two chunks, and one byte at a time', () => {
    for (let i = 1; i < BODY.length; i++) {
      assert.deepEqual(view(parse([BODY.subarray(0, i), BODY.subarray(i)])), whole, `split at ${i}`);
    }
    assert.deepEqual(view(parse([...BODY].map((b) => new Uint8Array([b])))), whole);
  });

  test("what the runtime's own parser reads; a quoted-string's escapes are read too", async () => {
    assert.deepEqual(view(parse([STRICT])), whole);
    const form = await new Request('http://x/', {
      method: 'POST',
      headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
      body: STRICT,
    }).formData();
    const file = form.get('file') as File;
    assert.equal(file.name, 'a "b".wav');
    const escaped = enc.encode(
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="f"; filename="a \\"b\\".wav"\r\n\r\nv\r\n--${BOUNDARY}--`,
    );
    assert.equal(parse([escaped])[0]!.filename, 'a "b".wav');
    assert.deepEqual([...new Uint8Array(await file.arrayBuffer())], whole[1]!.bytes);
    assert.equal(form.get('prompt'), 'Über');
  });

  test('refusals: no closing boundary, a part without a name, a boundary not followed by CRLF, too many parts', () => {
    const p = new MultipartParser('b');
    p.push(enc.encode('--b\r\nContent-Disposition: form-data; name="x"\r\n\r\nv'));
    assert.throws(() => p.end(), MultipartError);
    assert.throws(() => parse([enc.encode(`--${BOUNDARY}\r\nContent-Type: text/plain\r\n\r\nv\r\n--${BOUNDARY}--`)]));
    assert.throws(() => parse([enc.encode(`--${BOUNDARY}junk`)]), /not followed by CRLF/);
    const many = enc.encode(
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="x"\r\n\r\nv\r\n`.repeat(MAX_PARTS + 1),
    );
    assert.throws(() => parse([many]), /at most/);
  });
});

describe('boundaryOf', () => {
  test('multipart/form-data only, with a boundary of 1 to 70 characters, quoted or not', () => {
    assert.equal(boundaryOf('multipart/form-data; boundary=abc'), 'abc');
    assert.equal(boundaryOf('Multipart/Form-Data; charset=utf-8; BOUNDARY="a b;c"'), 'a b;c');
    assert.equal(boundaryOf('multipart/form-data'), undefined);
    assert.equal(boundaryOf('multipart/mixed; boundary=abc'), undefined);
    assert.equal(boundaryOf('application/json'), undefined);
    assert.equal(boundaryOf(null), undefined);
    assert.equal(boundaryOf(`multipart/form-data; boundary=${'x'.repeat(71)}`), undefined);
  });
});

describe('readMultipart', () => {
  const req = (body: BodyInit, type = `multipart/form-data; boundary=${BOUNDARY}`) =>
    new Request('http://x/', { method: 'POST', headers: { 'content-type': type }, body });

  test('another content type: AISIX 400; over the limit: 413', async () => {
    const notForm = await readMultipart(req('{}', 'application/json'), 0);
    assert.ok(notForm instanceof ProxyError);
    assert.equal(notForm.message, 'request payload is invalid: invalid multipart form data');
    const tooBig = await readMultipart(req(BODY), BODY.length - 1);
    assert.ok(tooBig instanceof ProxyError);
    assert.equal(tooBig.status, 413);
    const fits = await readMultipart(req(BODY), BODY.length);
    assert.ok(Array.isArray(fits));
    assert.equal(fits.length, 4);
  });
});

describe('encodeForm', () => {
  test('every part in order, files as they came, the first text field of a name given carries its new text', async () => {
    const parts = parse([BODY]);
    const withTwoModels = [...parts, { name: 'model', chunks: [enc.encode('second')], size: 6 }];
    const { body, contentType } = encodeForm(withTwoModels, {
      model: 'whisper-1',
      prompt: 'masked [EMAIL]',
      file: 'not a file',
    });
    const form = await new Request('http://x/', { method: 'POST', headers: { 'content-type': contentType }, body })
      .formData();
    assert.deepEqual(form.getAll('model'), ['whisper-1', 'second']);
    const file = form.get('file') as File;
    assert.equal(file.name, 'a "b".wav'); // %22 as the runtime reads it
    assert.equal(file.type, 'audio/wav');
    assert.deepEqual([...new Uint8Array(await file.arrayBuffer())], [...TRICKY]);
    assert.equal(form.get('empty'), '');
    assert.equal(form.get('prompt'), 'masked [EMAIL]');
    assert.deepEqual([...form.keys()], ['model', 'file', 'empty', 'prompt', 'model']);
  });
});

// A real Aliyun SLS PutLogs intake on a loopback socket, in the test process: it checks each POST the way SLS
// does — the path `/logstores/<logstore>/shards/lb`, `Content-Type: application/x-protobuf`, API version
// 0.6.0, `Content-MD5` of the body, the `LOG <id>:<signature>` over AISIX's string to sign with the key pair's
// secret, `x-log-compresstype: lz4` — then LZ4-decompresses the body to `x-log-bodyrawsize` bytes and decodes
// the `LogGroup`. Its decoders are written here independently of src/usage/sls-wire.ts.
import { createHash, createHmac } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export const SLS_KEY_ID = 'LTAI-sls-test';
export const SLS_SECRET = 'sls-secret';

export interface SlsIntake {
  /** `http://127.0.0.1:<port>`: the exporter's `endpoint`. */
  endpoint: string;
  /** Every log accepted, its contents as an object, plus `__time__`. */
  logs: Record<string, string>[];
  /** POSTs that broke SLS's rules, each with why (answered 400/401). */
  invalid: string[];
  attempts: number;
  /** The next answers: a status and SLS's error body. */
  failNext(n: number, status: number, errorCode: string): void;
  close(): Promise<void>;
}

export async function startSlsIntake(): Promise<SlsIntake> {
  let failures: { n: number; status: number; errorCode: string } | undefined;
  const intake: SlsIntake = {
    endpoint: '',
    logs: [],
    invalid: [],
    attempts: 0,
    failNext: (n, status, errorCode) => {
      failures = { n, status, errorCode };
    },
    close: () => new Promise((r) => server.close(() => r())),
  };
  const server = http.createServer(async (req, res) => {
    intake.attempts++;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const answer = (status: number, errorCode?: string, errorMessage = '') =>
      res.writeHead(status, { 'content-type': 'application/json', 'x-log-requestid': 'sls-req' })
        .end(errorCode ? JSON.stringify({ errorCode, errorMessage }) : '');
    const refuse = (status: number, code: string, why: string) => {
      intake.invalid.push(`${code}: ${why}`);
      answer(status, code, why);
    };
    const h = req.headers;
    const m = /^\/logstores\/([^/]+)\/shards\/lb$/.exec(req.url ?? '');
    if (req.method !== 'POST' || !m) return refuse(404, 'InvalidMethod', `${req.method} ${req.url}`);
    if (h['content-type'] !== 'application/x-protobuf') {
      return refuse(400, 'InvalidContentType', String(h['content-type']));
    }
    if (h['x-log-apiversion'] !== '0.6.0') return refuse(400, 'InvalidAPIVersion', String(h['x-log-apiversion']));
    const md5 = createHash('md5').update(body).digest('hex').toUpperCase();
    if (h['content-md5'] !== md5) return refuse(400, 'InvalidContentMD5', `${h['content-md5']} != ${md5}`);
    const date = String(h.date);
    if (Number.isNaN(Date.parse(date)) || Math.abs(Date.now() - Date.parse(date)) > 900_000) {
      return refuse(400, 'RequestTimeTooSkewed', date);
    }
    const logHeaders = Object.keys(h).filter((k) => k.startsWith('x-log-') || k.startsWith('x-acs-')).sort();
    const toSign = `POST\n${md5}\napplication/x-protobuf\n${date}\n${
      logHeaders.map((k) => `${k}:${h[k]}`).join('\n')
    }\n${req.url}`;
    const want = `LOG ${SLS_KEY_ID}:${createHmac('sha1', SLS_SECRET).update(toSign).digest('base64')}`;
    if (h.authorization !== want) return refuse(401, 'SignatureNotMatch', String(h.authorization));
    if (h['x-log-compresstype'] !== 'lz4') return refuse(400, 'InvalidCompressType', String(h['x-log-compresstype']));
    const rawSize = Number(h['x-log-bodyrawsize']);
    let logs: Record<string, string>[];
    try {
      logs = decodeLogGroup(lz4Decompress(body, rawSize));
    } catch (e) {
      return refuse(400, 'PostBodyInvalid', (e as Error).message);
    }
    if (failures && failures.n > 0) {
      failures.n--;
      return answer(failures.status, failures.errorCode, 'scripted');
    }
    intake.logs.push(...logs);
    answer(200);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  intake.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return intake;
}

/** LZ4 block decompression to exactly `size` bytes; throws on anything malformed. */
export function lz4Decompress(src: Uint8Array, size: number): Uint8Array {
  const out = new Uint8Array(size);
  let ip = 0;
  let op = 0;
  const len = (n: number) => {
    if (n !== 15) return n;
    let b: number;
    do {
      b = src[ip++]!;
      if (b === undefined) throw new Error('truncated length');
      n += b;
    } while (b === 255);
    return n;
  };
  while (ip < src.length) {
    const token = src[ip++]!;
    const lit = len(token >> 4);
    if (ip + lit > src.length || op + lit > size) throw new Error('literals past the end');
    out.set(src.subarray(ip, ip + lit), op);
    ip += lit;
    op += lit;
    if (ip === src.length) break;
    const offset = src[ip]! | (src[ip + 1]! << 8);
    ip += 2;
    if (offset === 0 || offset > op) throw new Error(`bad offset ${offset}`);
    const ml = len(token & 15) + 4;
    if (op + ml > size) throw new Error('match past the end');
    for (let i = 0; i < ml; i++, op++) out[op] = out[op - offset]!;
  }
  if (op !== size) throw new Error(`decompressed ${op} bytes, x-log-bodyrawsize says ${size}`);
  return out;
}

function decodeLogGroup(b: Uint8Array): Record<string, string>[] {
  const dec = new TextDecoder('utf-8', { fatal: true });
  const logs: Record<string, string>[] = [];
  for (const [f, v] of fields(b)) {
    if (f !== 1 || typeof v === 'number') throw new Error(`LogGroup field ${f}`);
    const log: Record<string, string> = {};
    for (const [lf, lv] of fields(v)) {
      if (lf === 1 && typeof lv === 'number') log.__time__ = String(lv);
      else if (lf === 2 && typeof lv !== 'number') {
        let key = '';
        let value = '';
        for (const [cf, cv] of fields(lv)) {
          if (typeof cv === 'number') throw new Error('Content field is a varint');
          if (cf === 1) key = dec.decode(cv);
          else if (cf === 2) value = dec.decode(cv);
        }
        if (key === '') throw new Error('Content without a Key');
        log[key] = value;
      } else throw new Error(`Log field ${lf}`);
    }
    if (log.__time__ === undefined) throw new Error('Log without Time');
    logs.push(log);
  }
  return logs;
}

function* fields(b: Uint8Array): Generator<[number, number | Uint8Array]> {
  let i = 0;
  const varint = () => {
    let n = 0;
    let mul = 1;
    for (;;) {
      const x = b[i++];
      if (x === undefined) throw new Error('truncated varint');
      n += (x & 0x7f) * mul;
      if (x < 0x80) return n;
      mul *= 128;
    }
  };
  while (i < b.length) {
    const key = varint();
    const wire = key & 7;
    if (wire === 0) yield [key >> 3, varint()];
    else if (wire === 2) {
      const n = varint();
      if (i + n > b.length) throw new Error('truncated field');
      yield [key >> 3, b.subarray(i, i + n)];
      i += n;
    } else throw new Error(`wire type ${wire}`);
  }
}

// A Bedrock runtime endpoint on a loopback port that checks what AWS checks: the SigV4 signature
// recomputed here with node:crypto from the received method, path, query, signed headers and body bytes
// (403 InvalidSignatureException otherwise), the clock skew, the operation's body shape. It answers in
// AWS's shapes: Converse and InvokeModel JSON, ConverseStream as binary event-stream frames written in
// pieces (CRC-32 from node:zlib, independent of the gateway's table), REST-JSON errors naming an ARN.
import * as crypto from 'node:crypto';
import type * as http from 'node:http';
import { crc32 } from 'node:zlib';
import { type CloudRequest, type CloudServer, sendJson, startCloudServer, writePiece } from './mock-cloud.ts';

export const AWS = {
  access_key_id: 'AKIDMOCKEXAMPLE7Q',
  secret_access_key: 'mock-aws-SECRET-wJalrXUtnFEMI/K7MDENG',
  region: 'us-west-2',
};
/** An ARN-bearing phrase AWS puts in its error text: the caller must never see it. */
export const ARN_TEXT = 'arn:aws:bedrock:us-west-2:123456789012:foundation-model/x';

export interface MockBedrock extends CloudServer {
  /** Requests whose signature or clock did not verify (answered 403). */
  rejected: string[];
  /** Session token the mock expects when a request carries one. */
  sessionToken?: string;
}

// ---- SigV4, recomputed --------------------------------------------------------------------------------------

const AUTH =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/;

/** RFC 3986 encoding as SigV4 wants it (unreserved characters kept, everything else %XX upper-case). */
function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

const sha256 = (b: Buffer | string) => crypto.createHash('sha256').update(b).digest('hex');
const hmac = (key: Buffer | string, data: string) => crypto.createHmac('sha256', key).update(data).digest();

/** Why the signature of `r` does not verify for `secret`, or undefined when it does. */
export function sigv4Problem(
  r: CloudRequest,
  keyId: string,
  secret: string,
  region: string,
  service: string,
): string | undefined {
  const m = AUTH.exec(String(r.headers.authorization ?? ''));
  if (!m) return 'authorization header malformed';
  const [, id, day, reg, svc, signedList, signature] = m as unknown as string[];
  if (id !== keyId) return `unknown access key ${id}`;
  if (reg !== region || svc !== service) return `scope ${reg}/${svc}`;
  const amzDate = String(r.headers['x-amz-date'] ?? '');
  if (!/^\d{8}T\d{6}Z$/.test(amzDate) || amzDate.slice(0, 8) !== day) return 'x-amz-date';
  const at = Date.UTC(
    +amzDate.slice(0, 4),
    +amzDate.slice(4, 6) - 1,
    +amzDate.slice(6, 8),
    +amzDate.slice(9, 11),
    +amzDate.slice(11, 13),
    +amzDate.slice(13, 15),
  );
  if (Math.abs(Date.now() - at) > 5 * 60_000) return 'clock skew';
  const signed = signedList!.split(';');
  if (!signed.includes('host') || !signed.includes('x-amz-date')) return 'host and x-amz-date must be signed';
  if (r.headers['x-amz-security-token'] !== undefined && !signed.includes('x-amz-security-token')) {
    return 'token unsigned';
  }
  const canonicalUri = r.path.split('/').map((seg) => uriEncode(seg)).join('/');
  const query = r.query === ''
    ? ''
    : r.query.split('&').map((kv) => kv.split('=')).sort(([a], [b]) => (a! < b! ? -1 : 1)).map(([k, v]) =>
      `${k}=${v ?? ''}`
    ).join('&');
  const headers = signed.map((h) => `${h}:${String(r.headers[h] ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  const canonical = ['POST', canonicalUri, query, headers, signedList, sha256(r.raw)].join('\n');
  const scope = `${day}/${region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonical)].join('\n');
  let key: Buffer = hmac(`AWS4${secret}`, day!);
  for (const part of [region, service, 'aws4_request']) key = hmac(key, part);
  const expected = crypto.createHmac('sha256', key).update(toSign).digest('hex');
  return expected === signature ? undefined : 'signature mismatch';
}

// ---- event-stream frames --------------------------------------------------------------------------------------

/** One event-stream message with string headers (type 7), as AWS frames them. */
export function frame(headers: Record<string, string>, payload: unknown): Buffer {
  const hs = Buffer.concat(
    Object.entries(headers).map(([k, v]) => {
      const name = Buffer.from(k);
      const value = Buffer.from(v);
      const len = Buffer.alloc(2);
      len.writeUInt16BE(value.length);
      return Buffer.concat([Buffer.from([name.length]), name, Buffer.from([7]), len, value]);
    }),
  );
  const body = Buffer.from(typeof payload === 'string' ? payload : JSON.stringify(payload));
  const total = 12 + hs.length + body.length + 4;
  const prelude = Buffer.alloc(8);
  prelude.writeUInt32BE(total, 0);
  prelude.writeUInt32BE(hs.length, 4);
  const preludeCrc = Buffer.alloc(4);
  preludeCrc.writeUInt32BE(crc32(prelude));
  const head = Buffer.concat([prelude, preludeCrc, hs, body]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(head));
  return Buffer.concat([head, crc]);
}

export function event(type: string, payload: unknown): Buffer {
  return frame({ ':event-type': type, ':content-type': 'application/json', ':message-type': 'event' }, payload);
}

export function exception(type: string, payload: unknown): Buffer {
  return frame({ ':exception-type': type, ':content-type': 'application/json', ':message-type': 'exception' }, payload);
}

/** A text answer's ConverseStream events (with AWS's padding member `p`, which readers must ignore). */
export function textEvents(pieces: string[]): Buffer[] {
  return [
    event('messageStart', { role: 'assistant', p: 'abcdefgh' }),
    ...pieces.map((text) => event('contentBlockDelta', { contentBlockIndex: 0, delta: { text }, p: 'ab' })),
    event('contentBlockStop', { contentBlockIndex: 0 }),
    event('messageStop', { stopReason: 'end_turn' }),
    event('metadata', { usage: { inputTokens: 5, outputTokens: 2, totalTokens: 7 }, metrics: { latencyMs: 12 } }),
  ];
}

/** Stream `frames` as ConverseStream does, each frame split inside its prelude across two writes. */
export function streamFrames(frames: Buffer[]): (req: CloudRequest, res: http.ServerResponse) => Promise<void> {
  return async (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream' });
    res.flushHeaders();
    for (const f of frames) {
      await writePiece(res, f.subarray(0, 5));
      await writePiece(res, f.subarray(5));
    }
    res.end();
  };
}

export function awsError(status: number, type: string, retryAfter?: string) {
  return (_req: CloudRequest, res: http.ServerResponse) =>
    sendJson(res, status, { message: `User: ${ARN_TEXT} is not authorized or throttled` }, {
      'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
      ...(retryAfter ? { 'retry-after': retryAfter } : {}),
    });
}

// ---- the endpoint -------------------------------------------------------------------------------------------

/** InvokeModelWithResponseStream's frames for Claude: `chunk` events carrying each Messages event base64-encoded. */
export function claudeChunks(id: string): Buffer[] {
  const events = [
    {
      type: 'message_start',
      message: {
        id: 'msg_bdrk_s',
        type: 'message',
        role: 'assistant',
        model: id,
        content: [],
        usage: { input_tokens: 7, output_tokens: 0, cache_read_input_tokens: 5 },
      },
    },
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'native claude' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 2 } },
    { type: 'message_stop', 'amazon-bedrock-invocationMetrics': { inputTokenCount: 7, outputTokenCount: 2 } },
  ];
  return events.map((e) => event('chunk', { bytes: Buffer.from(JSON.stringify(e)).toString('base64'), p: 'abc' }));
}

function converseAnswer(text: string): Record<string, unknown> {
  return {
    output: { message: { role: 'assistant', content: [{ text }] } },
    stopReason: 'end_turn',
    usage: { inputTokens: 4, outputTokens: 3, totalTokens: 7 },
    metrics: { latencyMs: 10 },
  };
}

/** Body shape problems for an operation (what Bedrock's validation would refuse). */
function bodyProblem(op: string, id: string, json: Record<string, unknown> | undefined): string | undefined {
  if (!json) return 'body is not JSON';
  if ('model' in json || 'stream' in json) return 'model/stream must not be in the body';
  if (op.startsWith('invoke') && id.includes('anthropic.')) {
    return json.anthropic_version === 'bedrock-2023-05-31' ? undefined : 'anthropic_version';
  }
  if (op === 'invoke') return undefined;
  const msgs = json.messages;
  if (!Array.isArray(msgs) || msgs.some((m) => !Array.isArray((m as { content?: unknown }).content))) {
    return 'messages[].content must be block arrays';
  }
  return undefined;
}

export async function startMockBedrock(): Promise<MockBedrock> {
  const rejected: string[] = [];
  const state: { sessionToken?: string } = {};
  const handler = async (req: CloudRequest, res: http.ServerResponse) => {
    const problem = sigv4Problem(req, AWS.access_key_id, AWS.secret_access_key, AWS.region, 'bedrock') ??
      (state.sessionToken && req.headers['x-amz-security-token'] !== state.sessionToken ? 'session token' : undefined);
    if (problem) {
      rejected.push(problem);
      return sendJson(res, 403, { message: `The request signature we calculated does not match (${problem})` }, {
        'x-amzn-errortype': 'InvalidSignatureException',
      });
    }
    const m = /^\/model\/([^/]+)\/(converse|converse-stream|invoke|invoke-with-response-stream)$/.exec(req.path);
    if (!m) {
      return sendJson(res, 404, { message: 'UnknownOperationException' }, {
        'x-amzn-errortype': 'UnknownOperationException',
      });
    }
    const id = decodeURIComponent(m[1]!);
    const op = m[2]!;
    const shape = bodyProblem(op, id, req.json);
    if (shape) return sendJson(res, 400, { message: shape }, { 'x-amzn-errortype': 'ValidationException' });
    if (op === 'converse-stream') return streamFrames(textEvents(['Hello', ' from', ' Bedrock']))(req, res);
    if (op === 'invoke-with-response-stream') return streamFrames(claudeChunks(id))(req, res);
    if (op === 'converse') return sendJson(res, 200, converseAnswer('hi from converse'));
    if (id.includes('titan-embed')) {
      const text = String(req.json!.inputText);
      return sendJson(res, 200, { embedding: [text.length, 0.5], inputTextTokenCount: 3 });
    }
    if (id.includes('cohere.embed')) {
      const texts = req.json!.texts as string[];
      return sendJson(res, 200, {
        id: 'e',
        texts,
        embeddings: texts.map((t) => [t.length, 0.25]),
        response_type: 'embeddings_floats',
      });
    }
    return sendJson(res, 200, {
      id: 'msg_bdrk_01',
      type: 'message',
      role: 'assistant',
      model: id,
      content: [{ type: 'text', text: 'hi from claude on bedrock' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 6, output_tokens: 5, cache_read_input_tokens: 2 },
    });
  };
  const server = await startCloudServer(handler);
  return Object.assign(server, {
    rejected,
    get sessionToken() {
      return state.sessionToken;
    },
    set sessionToken(v: string | undefined) {
      state.sessionToken = v;
    },
  });
}

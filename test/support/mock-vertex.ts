// Google's token endpoint and the Vertex AI model endpoints on one loopback server, checking what Google
// checks: the service-account JWT (RS256 signature verified with the key's public half; iss, scope, aud,
// iat, exp), the bearer each model call carries, the publisher paths, Gemini's and Claude's body shapes.
// Answers: Gemini JSON and SSE (no [DONE], mixed separators), Claude Messages, the OpenAI shim, :predict.
import * as crypto from 'node:crypto';
import type * as http from 'node:http';
import { type CloudRequest, type CloudServer, sendJson, startCloudServer, writePiece } from './mock-cloud.ts';

export const PROJECT = 'my-secret-proj';
export const STATIC_TOKEN = 'ya29.static-SECRET-token';

export interface ServiceAccountFile {
  type: 'service_account';
  project_id: string;
  private_key_id: string;
  private_key: string;
  client_email: string;
  client_id: string;
  token_uri: string;
}

export interface MockVertex extends CloudServer {
  /** Tokens issued, in order. */
  minted: string[];
  /** Why assertions were refused. */
  refusedMints: string[];
  /**
   * A fresh service-account key file whose `token_uri` is this mock; its public key is trusted from now on
   * (in place of the older key of `rotating`, when given: the same account with a new key).
   */
  newServiceAccount(rotating?: ServiceAccountFile): ServiceAccountFile;
  /** Hold token answers until `release()` (to line up concurrent first requests). */
  holdMints(): { release(): void };
}

const b64url = (s: string) => Buffer.from(s, 'base64url').toString('utf8');

function verifyAssertion(jwt: string, trusted: Map<string, crypto.KeyObject>, aud: string): string | undefined {
  const parts = jwt.split('.');
  if (parts.length !== 3) return 'not a JWT';
  const header = JSON.parse(b64url(parts[0]!)) as Record<string, unknown>;
  if (JSON.stringify(header) !== '{"alg":"RS256","typ":"JWT"}') return `header ${JSON.stringify(header)}`;
  const claims = JSON.parse(b64url(parts[1]!)) as Record<string, number | string>;
  const key = trusted.get(String(claims.iss));
  if (!key) return `unknown iss ${claims.iss}`;
  const ok = crypto.verify(
    'RSA-SHA256',
    Buffer.from(`${parts[0]}.${parts[1]}`),
    key,
    Buffer.from(parts[2]!, 'base64url'),
  );
  if (!ok) return 'bad signature';
  if (claims.scope !== 'https://www.googleapis.com/auth/cloud-platform') return 'scope';
  if (claims.aud !== aud) return `aud ${claims.aud}`;
  if (Number(claims.exp) - Number(claims.iat) !== 3600) return 'exp - iat';
  if (Math.abs(Number(claims.iat) - Date.now() / 1000) > 10) return 'iat';
  if ('sub' in claims) return 'sub';
  return undefined;
}

export function geminiAnswer(text: string): Record<string, unknown> {
  return {
    candidates: [{ content: { role: 'model', parts: [{ text }] }, finishReason: 'STOP' }],
    usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 2, totalTokenCount: 6 },
    modelVersion: 'gemini-2.0-flash',
  };
}

/** Gemini SSE events as written, separators alternating `\n\n` and `\r\n\r\n`, usage on every chunk (as Vertex does). */
export function geminiSse(events: unknown[]) {
  return async (_req: CloudRequest, res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.flushHeaders();
    for (let i = 0; i < events.length; i++) {
      await writePiece(res, `data: ${JSON.stringify(events[i])}${i % 2 ? '\r\n\r\n' : '\n\n'}`);
    }
    res.end();
  };
}

function geminiChunks(): unknown[] {
  const usage = (n: number) => ({ promptTokenCount: 4, candidatesTokenCount: n, totalTokenCount: 4 + n });
  return [
    { candidates: [{ content: { role: 'model', parts: [{ text: 'Hello' }] } }], usageMetadata: usage(1) },
    { candidates: [{ content: { role: 'model', parts: [{ text: ' from' }] } }], usageMetadata: usage(2) },
    {
      candidates: [{ content: { role: 'model', parts: [{ text: ' Gemini' }] }, finishReason: 'STOP' }],
      usageMetadata: usage(3),
    },
  ];
}

export function vertexError(status: number, grpc: string) {
  return (_req: CloudRequest, res: http.ServerResponse) =>
    sendJson(res, status, { error: { code: status, message: `Quota exceeded for project ${PROJECT}`, status: grpc } });
}

function modelProblem(req: CloudRequest, publisher: string, op: string): string | undefined {
  const j = req.json;
  if (!j) return 'body is not JSON';
  if (publisher === 'google' && op !== 'predict') {
    const contents = j.contents as { role: string }[] | undefined;
    if (!Array.isArray(contents) || contents.some((c) => c.role !== 'user' && c.role !== 'model')) {
      return 'contents[].role';
    }
    if (op === 'streamGenerateContent' && req.query !== 'alt=sse') return 'alt=sse';
  }
  if (publisher === 'anthropic') {
    if (j.anthropic_version !== 'vertex-2023-10-16' || 'model' in j) return 'anthropic_version / model';
    if ((op === 'streamRawPredict') !== (j.stream === true)) return 'stream member';
  }
  return undefined;
}

export async function startMockVertex(): Promise<MockVertex> {
  const minted: string[] = [];
  const refusedMints: string[] = [];
  const trusted = new Map<string, crypto.KeyObject>();
  let hold: Promise<void> | undefined;
  let serverUrl = '';
  const handler = async (req: CloudRequest, res: http.ServerResponse) => {
    if (req.path === '/token') {
      if (hold) await hold;
      const form = new URLSearchParams(req.body);
      const problem = req.headers['content-type'] !== 'application/x-www-form-urlencoded'
        ? 'content-type'
        : form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer'
        ? 'grant_type'
        : verifyAssertion(form.get('assertion') ?? '', trusted, `${serverUrl}/token`);
      if (problem) {
        refusedMints.push(problem);
        return sendJson(res, 400, {
          error: 'invalid_grant',
          error_description: `Invalid JWT Signature for ${PROJECT}`,
        });
      }
      const token = `ya29.mock-${minted.length + 1}-SECRET`;
      minted.push(token);
      return sendJson(res, 200, { access_token: token, expires_in: 3599, token_type: 'Bearer' });
    }
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!bearer || (bearer !== STATIC_TOKEN && !minted.includes(bearer))) {
      return sendJson(res, 401, {
        error: { code: 401, message: 'Request had invalid authentication credentials.', status: 'UNAUTHENTICATED' },
      });
    }
    const m = new RegExp(
      `^/v1/projects/${PROJECT}/locations/([a-z0-9-]+)/(?:publishers/([a-z]+)/models/([^/:]+):([A-Za-z]+)|endpoints/openapi/chat/completions)$`,
    ).exec(req.path);
    if (!m) {
      return sendJson(res, 404, { error: { code: 404, message: `not found in ${PROJECT}`, status: 'NOT_FOUND' } });
    }
    const [, , publisher = 'openapi', model, op = 'chat'] = m;
    const problem = modelProblem(req, publisher, op);
    if (problem) return sendJson(res, 400, { error: { code: 400, message: problem, status: 'INVALID_ARGUMENT' } });
    if (op === 'predict') {
      const instances = req.json!.instances as { content: string }[];
      return sendJson(res, 200, {
        predictions: instances.map((i) => ({
          embeddings: { values: [i.content.length, 0.5], statistics: { token_count: 2, truncated: false } },
        })),
      });
    }
    if (op === 'generateContent') return sendJson(res, 200, geminiAnswer(`hi from ${model}`));
    if (op === 'streamGenerateContent') return geminiSse(geminiChunks())(req, res);
    if (publisher === 'anthropic' && op === 'rawPredict') {
      return sendJson(res, 200, {
        id: 'msg_vrtx_01',
        type: 'message',
        role: 'assistant',
        model,
        content: [{ type: 'text', text: 'hi from claude on vertex' }],
        stop_reason: 'end_turn',
        usage: { input_tokens: 5, output_tokens: 4, cache_creation_input_tokens: 3 },
      });
    }
    if (publisher === 'anthropic') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const ev = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
      res.write(
        ev('message_start', {
          type: 'message_start',
          message: { id: 'msg_1', model, usage: { input_tokens: 3, output_tokens: 0 } },
        }),
      );
      res.write(
        ev('content_block_delta', {
          type: 'content_block_delta',
          index: 0,
          delta: { type: 'text_delta', text: 'claude streams' },
        }),
      );
      res.write(
        ev('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 2 } }),
      );
      res.end(ev('message_stop', { type: 'message_stop' }));
      return;
    }
    return sendJson(res, 200, {
      id: 'chatcmpl-shim',
      object: 'chat.completion',
      created: 1,
      model: String(req.json!.model),
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi from the shim' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
    });
  };
  const server = await startCloudServer(handler);
  serverUrl = server.url;
  let keys = 0;
  return Object.assign(server, {
    minted,
    refusedMints,
    newServiceAccount(rotating?: ServiceAccountFile): ServiceAccountFile {
      const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', {
        modulusLength: 2048,
        publicExponent: 65537,
      });
      const email = rotating?.client_email ?? `sluice-test-${++keys}@${PROJECT}.iam.gserviceaccount.com`;
      trusted.set(email, publicKey);
      return {
        type: 'service_account',
        project_id: PROJECT,
        private_key_id: `kid-SECRET-${keys}`,
        private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
        client_email: email,
        client_id: `10000000000000000${keys}`,
        token_uri: `${server.url}/token`,
      };
    },
    holdMints() {
      let release!: () => void;
      hold = new Promise<void>((r) => {
        release = r;
      });
      return {
        release: () => {
          hold = undefined;
          release();
        },
      };
    },
  });
}

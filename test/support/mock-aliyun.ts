// A mock of Aliyun's green-cip RPC endpoint on a real loopback socket, checking what Aliyun checks before it
// answers (docs/guardrails.md "Aliyun"): a form body, the common parameters (signature v1 over the sorted
// form with the access key's secret, HMAC-SHA1, version 1.0, a fresh nonce, a timestamp within 15 minutes),
// the action's version and services, `ServiceParameters` JSON with a `content` of at most 2000 characters.
// Verdicts follow fixed words in the content so a test scripts outcomes by its prompt.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { signV1 } from '../../src/guardrails/remote/aliyun-rpc.ts';
import { sleep } from './until.ts';

export const ALIYUN_KEY_ID = 'LTAI-test-key';
export const ALIYUN_SECRET = 'aliyun-secret';

/** Words the mock reacts to. */
export const ALIYUN_WORDS = {
  /** TextModerationPlus: RiskLevel high, label `political_content`; MultiModalGuard: Suggestion block. */
  risky: 'forbidden-topic',
  /** TextModerationPlus: RiskLevel medium. */
  medium: 'borderline-topic',
  /** MultiModalGuard: Suggestion mask, each `13812345678` desensitized to `138****5678`. */
  phone: '13812345678',
  /** MultiModalGuard: Suggestion mask with no desensitized text. */
  undesensitized: 'mask-me-blind',
} as const;

const SERVICES: Record<string, string[]> = {
  TextModerationPlus: ['llm_query_moderation', 'llm_response_moderation'],
  MultiModalGuard: [
    'query_security_check_pro',
    'response_security_check_pro',
    'query_security_check',
    'response_security_check',
  ],
};

export interface AliyunCall {
  params: Record<string, string>;
  service: string;
  serviceParameters: Record<string, unknown>;
  requestId: string;
}

export type AliyunFault =
  | { kind: 'status'; status: number; body?: unknown }
  | { kind: 'code'; code: unknown }
  | { kind: 'slow'; ms: number }
  | { kind: 'not_json' };

export interface MockAliyun {
  url: string;
  calls: AliyunCall[];
  /** Answers that failed Aliyun's checks, with why (a test asserts none). */
  refused: string[];
  fault: AliyunFault | undefined;
  /** Answer ids from the body only (no `x-acs-request-id` header). */
  idInBodyOnly: boolean;
  close(): Promise<void>;
}

export async function startMockAliyun(): Promise<MockAliyun> {
  const seenNonces = new Set<string>();
  let n = 0;
  const mock: MockAliyun = {
    url: '',
    calls: [],
    refused: [],
    fault: undefined,
    idInBodyOnly: false,
    close: () => new Promise((r) => server.close(() => r())),
  };
  const server = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const requestId = `REQ-${++n}`;
    const send = (status: number, body: unknown) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (!mock.idInBodyOnly) headers['x-acs-request-id'] = requestId;
      res.writeHead(status, headers).end(typeof body === 'string' ? body : JSON.stringify(body));
    };
    const refuse = (code: string, why: string) => {
      mock.refused.push(`${code}: ${why}`);
      send(400, { Code: code, Message: why, RequestId: requestId });
    };
    if (req.method !== 'POST' || req.url !== '/') return refuse('InvalidAction', `${req.method} ${req.url}`);
    if (req.headers['content-type'] !== 'application/x-www-form-urlencoded') {
      return refuse('InvalidParameter', `content-type ${req.headers['content-type']}`);
    }
    const form = Object.fromEntries(new URLSearchParams(raw));
    const { Signature, ...params } = form;
    for (const k of ['AccessKeyId', 'Action', 'Format', 'SignatureMethod', 'SignatureNonce', 'SignatureVersion']) {
      if (!params[k]) return refuse('MissingParameter', k);
    }
    if (params.AccessKeyId !== ALIYUN_KEY_ID) return refuse('InvalidAccessKeyId.NotFound', params.AccessKeyId!);
    if (params.SignatureMethod !== 'HMAC-SHA1' || params.SignatureVersion !== '1.0') {
      return refuse('InvalidSignatureMethod', `${params.SignatureMethod} ${params.SignatureVersion}`);
    }
    if (Signature !== await signV1(params, ALIYUN_SECRET)) return refuse('SignatureDoesNotMatch', 'signature');
    if (seenNonces.has(params.SignatureNonce!)) return refuse('SignatureNonceUsed', params.SignatureNonce!);
    seenNonces.add(params.SignatureNonce!);
    const at = Date.parse(params.Timestamp ?? '');
    if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(params.Timestamp ?? '') || Math.abs(Date.now() - at) > 900_000) {
      return refuse('InvalidTimeStamp.Format', String(params.Timestamp));
    }
    if (params.Version !== '2022-03-02') return refuse('InvalidVersion', String(params.Version));
    const services = SERVICES[params.Action!];
    if (!services) return refuse('InvalidAction.NotFound', params.Action!);
    if (!services.includes(params.Service ?? '')) return refuse('InvalidParameter', `Service ${params.Service}`);
    let sp: Record<string, unknown>;
    try {
      sp = JSON.parse(params.ServiceParameters ?? '');
    } catch {
      return refuse('InvalidParameter', 'ServiceParameters is not JSON');
    }
    const content = sp.content;
    if (typeof content !== 'string' || content === '') return refuse('InvalidParameter', 'content');
    if ([...content].length > 2000) return refuse('InvalidParameter', 'content over 2000 characters');
    mock.calls.push({ params, service: params.Service!, serviceParameters: sp, requestId });
    const fault = mock.fault;
    if (fault?.kind === 'slow') await sleep(fault.ms);
    if (fault?.kind === 'status') return send(fault.status, fault.body ?? { Code: 'Throttling', Message: content });
    if (fault?.kind === 'not_json') return send(200, 'not json');
    if (fault?.kind === 'code') return send(200, { Code: fault.code, Message: 'scripted', RequestId: requestId });
    if (params.Action === 'TextModerationPlus') {
      const level = content.includes(ALIYUN_WORDS.risky)
        ? 'high'
        : content.includes(ALIYUN_WORDS.medium)
        ? 'medium'
        : 'none';
      const result = level === 'none' ? [{ Label: 'nonLabel' }] : [{ Label: 'political_content', Confidence: 99 }];
      return send(200, { Code: 200, Data: { RiskLevel: level, Result: result }, RequestId: requestId });
    }
    if (content.includes(ALIYUN_WORDS.risky)) {
      return send(200, {
        Code: 200,
        Data: {
          Suggestion: 'block',
          Detail: [{ Type: 'contentModeration', Suggestion: 'block', Result: [{ Label: 'political_content' }] }],
        },
        RequestId: requestId,
      });
    }
    if (content.includes(ALIYUN_WORDS.phone) || content.includes(ALIYUN_WORDS.undesensitized)) {
      const masked = content.replaceAll(ALIYUN_WORDS.phone, '138****5678');
      const ext = content.includes(ALIYUN_WORDS.undesensitized) ? {} : { Desensitization: masked };
      return send(200, {
        Code: 200,
        Data: {
          Suggestion: 'mask',
          // Aliyun sends `Ext` as an object or as a JSON string: the mock sends a string.
          Detail: [{
            Type: 'sensitiveData',
            Level: 'S2',
            Suggestion: 'mask',
            Result: [{ Label: 'phone', Ext: JSON.stringify(ext) }],
          }],
        },
        RequestId: requestId,
      });
    }
    return send(200, { Code: 200, Data: { Suggestion: 'pass', Detail: [] }, RequestId: requestId });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  mock.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return mock;
}

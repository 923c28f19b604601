// Mock guardrail services on one real loopback socket, speaking each wire API Sluice calls
// (docs/guardrails.md "Remote kinds"): OpenAI moderation, Presidio analyze + anonymize, Lakera Guard v2,
// Azure Content Safety shieldPrompt and text:analyze, Aliyun TextModerationPlus (its signature checked). Their verdicts follow fixed words in the text so a test
// can script outcomes by its prompt; `fault` makes the next answers slow, failing or malformed.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { signV1 } from '../../src/guardrails/remote/aliyun.ts';
import { sleep } from './until.ts';

/** The access key secret the Aliyun mock checks signatures with. */
export const ALIYUN_SECRET = 'aliyun-secret';

/** What the mock does instead of answering normally. */
export type Fault =
  | { kind: 'slow'; ms: number }
  | { kind: 'status'; status: number }
  | { kind: 'malformed' }
  | { kind: 'not_json' };

export interface GuardRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  /** The JSON body, or a form's fields. */
  json: Record<string, unknown>;
}

/** Aliyun: HTTP 400 with a symbolic code when the signature does not verify; else the RiskLevel. */
async function aliyun(form: Record<string, string>): Promise<{ status: number; body: unknown }> {
  const { Signature, ...params } = form;
  if (Signature !== await signV1(params, ALIYUN_SECRET)) {
    return {
      status: 400,
      body: { Code: 'SignatureDoesNotMatch', Message: `string to sign: ${params.ServiceParameters}` },
    };
  }
  const content = String(JSON.parse(params.ServiceParameters ?? '{}').content);
  return { status: 200, body: { Code: 200, Data: { RiskLevel: content.includes(TRIGGERS.hate) ? 'high' : 'none' } } };
}

export interface MockGuardrails {
  url: string;
  requests: GuardRequest[];
  /** Every request from now on gets this fault (undefined: answer normally). */
  fault: Fault | undefined;
  close(): Promise<void>;
}

/** Words the mocks react to. */
export const TRIGGERS = {
  /** OpenAI moderation flags it (`violence` category, score 0.9). */
  violent: 'violent',
  /** Lakera flags prompt injection; Azure Prompt Shield detects an attack. */
  injection: 'ignore previous instructions',
  /** Azure text moderation: Hate severity 4. */
  hate: 'hateful',
} as const;

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g;

function emails(text: string): { start: number; end: number }[] {
  return [...text.matchAll(EMAIL)].map((m) => ({ start: m.index, end: m.index + m[0].length }));
}

function answer(path: string, j: Record<string, unknown>): unknown {
  if (path.endsWith('/moderations')) {
    const flagged = String(j.input).includes(TRIGGERS.violent);
    return {
      id: 'modr-1',
      model: j.model,
      results: [{
        flagged,
        categories: { violence: flagged, hate: false },
        category_scores: { violence: flagged ? 0.9 : 0.01, hate: 0.2 },
      }],
    };
  }
  if (path.endsWith('/analyze')) {
    const text = String(j.text);
    return emails(text).map((e) => ({ entity_type: 'EMAIL_ADDRESS', ...e, score: 1 }));
  }
  if (path.endsWith('/anonymize')) {
    let text = String(j.text);
    const results = (j.analyzer_results as { start: number; end: number; entity_type: string }[]).sort((a, b) =>
      b.start - a.start
    );
    for (const r of results) text = `${text.slice(0, r.start)}<${r.entity_type}>${text.slice(r.end)}`;
    return { text, items: results.map((r) => ({ entity_type: r.entity_type, operator: 'replace' })) };
  }
  if (path.endsWith('/v2/guard')) {
    const messages = j.messages as { content: string }[];
    const injection = messages.some((m) => m.content.includes(TRIGGERS.injection));
    const payload = messages.flatMap((m, i) =>
      [...m.content.matchAll(EMAIL)].map((x) => ({
        message_id: i,
        // code point offsets, as Lakera gives them
        start: Array.from(m.content.slice(0, x.index)).length,
        end: Array.from(m.content.slice(0, x.index)).length + Array.from(x[0]).length,
        detector_type: 'pii/email',
      }))
    );
    const breakdown = [
      { detector_type: 'prompt_attack', detected: injection },
      { detector_type: 'pii/email', detected: payload.length > 0 },
    ];
    return { flagged: injection || payload.length > 0, payload, breakdown };
  }
  if (path.includes('text:shieldPrompt')) {
    return {
      userPromptAnalysis: { attackDetected: String(j.userPrompt).includes(TRIGGERS.injection) },
      documentsAnalysis: [],
    };
  }
  if (path.includes('text:analyze')) {
    const hate = String(j.text).includes(TRIGGERS.hate);
    return {
      blocklistsMatch: [],
      categoriesAnalysis: [{ category: 'Hate', severity: hate ? 4 : 0 }, { category: 'Violence', severity: 0 }],
    };
  }
  return undefined;
}

export async function startMockGuardrails(): Promise<MockGuardrails> {
  const requests: GuardRequest[] = [];
  const state: { fault: Fault | undefined } = { fault: undefined };
  const server = http.createServer(async (req, res) => {
    const parts: Buffer[] = [];
    for await (const p of req) parts.push(p as Buffer);
    let json: Record<string, unknown> = {};
    const raw = Buffer.concat(parts).toString('utf8');
    const isForm = req.headers['content-type'] === 'application/x-www-form-urlencoded';
    try {
      json = isForm ? Object.fromEntries(new URLSearchParams(raw)) : JSON.parse(raw);
    } catch {
      // recorded as {}
    }
    const path = req.url ?? '';
    requests.push({ path, headers: req.headers, json });
    const fault = state.fault;
    if (fault?.kind === 'slow') {
      // Until `ms` pass or the caller hangs up, so a caller that timed out leaves no timer behind.
      const gone = new AbortController();
      res.on('close', () => gone.abort());
      await sleep(fault.ms, gone.signal);
      if (res.destroyed) return;
    }
    if (fault?.kind === 'status') {
      res.writeHead(fault.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `mock ${fault.status}` } }));
      return;
    }
    if (fault?.kind === 'not_json') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('<html>proxy error</html>');
      return;
    }
    if (isForm && fault?.kind !== 'malformed') {
      const a = await aliyun(json as Record<string, string>);
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(a.body));
      return;
    }
    const body = fault?.kind === 'malformed' ? { unexpected: true } : answer(path, json);
    if (body === undefined) {
      res.writeHead(404).end();
      return;
    }
    if (res.destroyed) return;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    requests,
    get fault() {
      return state.fault;
    },
    set fault(f) {
      state.fault = f;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

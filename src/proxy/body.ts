// The pipeline's body step: read and parse a JSON request body under `proxy.request_body_limit_bytes`
// (0 = no limit), then check what its endpoint requires (validate.ts). A declared length over the limit is
// refused before reading; an undeclared one is counted as it streams in.
import { errors, ProxyError } from '../http/errors.ts';
import type { Step } from './pipeline.ts';
import { validateBody } from './validate.ts';

const decoder = new TextDecoder();

async function readLimited(req: Request, limit: number): Promise<string | ProxyError> {
  const declared = req.headers.get('content-length');
  if (limit > 0 && declared !== null && Number(declared) > limit) return errors.tooLarge(limit);
  if (limit === 0 || declared !== null || !req.body) return req.text();
  const reader = req.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      return errors.tooLarge(limit);
    }
    parts.push(value);
  }
  const all = new Uint8Array(size);
  let off = 0;
  for (const p of parts) {
    all.set(p, off);
    off += p.byteLength;
  }
  return decoder.decode(all);
}

export async function readJsonObject(req: Request, limit: number): Promise<Record<string, unknown> | ProxyError> {
  let text: string | ProxyError;
  try {
    text = await readLimited(req, limit);
  } catch {
    return errors.badRequest('could not read the request body');
  }
  if (typeof text !== 'string') return text;
  if (text.length === 0) return errors.badRequest('request body is empty; expected a JSON object');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return errors.badRequest(`malformed JSON in request body: ${(e as Error).message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return errors.badRequest('request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

export function readBodyStep(limit: number): Step {
  return {
    name: 'read body',
    async run(call) {
      const body = await readJsonObject(call.c.req.raw, limit);
      if (body instanceof ProxyError) return body;
      const invalid = validateBody(call.route.call, body);
      if (invalid) return errors.badRequest(invalid);
      call.body = body;
      return undefined;
    },
  };
}

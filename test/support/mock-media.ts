// An OpenAI-style upstream of the audio, image and rerank endpoints (docs/media-endpoints.md) that checks what
// the real APIs check before answering: the bearer key, the content type (JSON, or multipart with a boundary),
// the model names each endpoint serves, a file part with an audio (or image) name and type, required fields.
// Every request it accepted or refused is recorded, its multipart fields parsed by the runtime's own parser.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const MEDIA_KEY = 'sk-media-upstream';

export interface MediaRequest {
  path: string;
  contentType: string;
  authorization: string | undefined;
  /** An Azure OpenAI request (`/openai/deployments/<deployment>/…`): its deployment and `api-version`. */
  azure?: { deployment: string; apiVersion: string | null };
  /** JSON bodies. */
  json?: Record<string, unknown>;
  /** Multipart text fields, in order (repeated names kept). */
  fields?: [string, string][];
  /** Multipart file parts. */
  files?: { field: string; filename: string; type: string; size: number }[];
  bytes: number;
}

export interface MockMedia {
  /** `http://127.0.0.1:<port>/v1` */
  base: string;
  requests: MediaRequest[];
  close(): Promise<void>;
}

const AUDIO_EXT = /\.(flac|mp3|mp4|mpeg|mpga|m4a|ogg|wav|webm)$/i;
const SPEECH_TYPES: Record<string, string> = {
  mp3: 'audio/mpeg',
  opus: 'audio/ogg',
  aac: 'audio/aac',
  flac: 'audio/flac',
  wav: 'audio/wav',
  pcm: 'audio/pcm',
};
const TRANSCRIBE_MODELS = new Set(['whisper-1', 'gpt-4o-transcribe']);

function error(res: ServerResponse, status: number, message: string, param?: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ error: { message, type: 'invalid_request_error', param: param ?? null, code: null } }));
}

function json(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function bodyOf(req: IncomingMessage): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of req) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

/** The multipart form, parsed by the runtime (a 400 from the real API for anything it cannot parse). */
async function formOf(contentType: string, body: Buffer): Promise<FormData | undefined> {
  if (!/^multipart\/form-data;\s*boundary=/i.test(contentType)) return undefined;
  try {
    return await new Request('http://mock/', {
      method: 'POST',
      headers: { 'content-type': contentType },
      body: new Uint8Array(body),
    })
      .formData();
  } catch {
    return undefined;
  }
}

async function speech(req: MediaRequest, res: ServerResponse): Promise<void> {
  const b = req.json!;
  if (b.model !== 'tts-1' && b.model !== 'gpt-4o-mini-tts') return error(res, 404, `model ${b.model} not found`);
  if (typeof b.input !== 'string' || b.input === '') return error(res, 400, 'input is required', 'input');
  if (typeof b.voice !== 'string') return error(res, 400, 'voice is required', 'voice');
  const format = typeof b.response_format === 'string' ? b.response_format : 'mp3';
  const type = SPEECH_TYPES[format];
  if (!type) return error(res, 400, `unsupported response_format ${format}`, 'response_format');
  // `hang`: no answer at all; `stall`: the head and one chunk, then silence.
  if (b.input === 'hang') return;
  if (b.input === 'stall') {
    res.writeHead(200, { 'content-type': type });
    return void res.write(Buffer.alloc(1024, 1));
  }
  // `big:<n>` asks for n bytes of audio, sent in 64 KiB chunks; otherwise a few bytes per character.
  const big = /^big:(\d+)$/.exec(b.input);
  const size = big ? Number(big[1]) : b.input.length * 4;
  res.writeHead(200, { 'content-type': type, 'transfer-encoding': 'chunked' });
  const chunk = Buffer.alloc(65_536, 0x55);
  for (let sent = 0; sent < size;) {
    const n = Math.min(chunk.length, size - sent);
    if (!res.write(chunk.subarray(0, n))) await new Promise((r) => res.once('drain', r));
    sent += n;
  }
  res.end();
}

function transcription(form: FormData, res: ServerResponse, translate: boolean): void {
  const model = form.get('model');
  if (typeof model !== 'string' || !TRANSCRIBE_MODELS.has(model)) return error(res, 400, `invalid model ${model}`);
  const file = form.get('file');
  if (!(file instanceof File)) return error(res, 400, 'file is required', 'file');
  if (!AUDIO_EXT.test(file.name)) return error(res, 400, `Invalid file format ${file.name}`, 'file');
  const prompt = form.get('prompt');
  const text = `${translate ? 'translated' : 'heard'} ${file.size} bytes${
    typeof prompt === 'string' ? ` (${prompt})` : ''
  }`;
  if (form.get('stream') === 'true') {
    // gpt-4o-transcribe's SSE: text deltas, then the whole text with the usage.
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(`data: ${JSON.stringify({ type: 'transcript.text.delta', delta: text.slice(0, 5) })}\n\n`);
    const usage = { type: 'tokens', input_tokens: 9, output_tokens: 4, total_tokens: 13 };
    return void res.end(`data: ${JSON.stringify({ type: 'transcript.text.done', text, usage })}\n\n`);
  }
  const format = form.get('response_format') ?? 'json';
  if (format === 'text') {
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
    return void res.end(`${text}\n`);
  }
  if (format === 'srt' || format === 'vtt') {
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
    return void res.end(`1\n00:00:00,000 --> 00:00:02,000\n${text}\n`);
  }
  if (format === 'verbose_json') {
    return json(res, {
      task: translate ? 'translate' : 'transcribe',
      language: 'english',
      duration: 8.5,
      text,
      segments: [],
    });
  }
  const usage = model === 'whisper-1'
    ? { type: 'duration', seconds: 3 }
    : { type: 'tokens', input_tokens: 14, output_tokens: 6, total_tokens: 20 };
  return json(res, { text, usage });
}

function generation(req: MediaRequest, res: ServerResponse): void {
  const b = req.json!;
  if (b.model !== 'gpt-image-1' && b.model !== 'dall-e-3') return error(res, 400, `invalid model ${b.model}`, 'model');
  if (typeof b.prompt !== 'string') return error(res, 400, 'prompt is required', 'prompt');
  const data = [{ b64_json: Buffer.from(`image of ${b.prompt}`).toString('base64') }];
  const usage = b.model === 'gpt-image-1'
    ? { input_tokens: 11, output_tokens: 1056, total_tokens: 1067, input_tokens_details: { text_tokens: 11 } }
    : undefined;
  return json(res, { created: 1_700_000_000, data, ...(usage ? { usage } : {}) });
}

function edit(form: FormData, res: ServerResponse): void {
  const model = form.get('model');
  if (model !== 'gpt-image-1' && model !== 'dall-e-2') return error(res, 400, `invalid model ${model}`, 'model');
  const images = [...form.getAll('image'), ...form.getAll('image[]')];
  if (images.length === 0 || !images.every((i) => i instanceof File && /^image\//.test(i.type))) {
    return error(res, 400, 'image must be one or more image files', 'image');
  }
  if (typeof form.get('prompt') !== 'string') return error(res, 400, 'prompt is required', 'prompt');
  return json(res, {
    created: 1_700_000_000,
    data: [{ b64_json: Buffer.from(`edited ${images.length}`).toString('base64') }],
    usage: { input_tokens: 300, output_tokens: 1056, total_tokens: 1356 },
  });
}

function rerank(req: MediaRequest, res: ServerResponse): void {
  const b = req.json!;
  if (b.model !== 'rerank-english-v3.0') return error(res, 400, `invalid model ${b.model}`, 'model');
  if (typeof b.query !== 'string' || !Array.isArray(b.documents)) {
    return error(res, 400, 'query and documents are required');
  }
  const results = b.documents.map((_, index) => ({ index, relevance_score: 1 / (index + 1) }));
  return json(res, { id: 'rr-1', results, meta: { billed_units: { search_units: 1, input_tokens: 42 } } });
}

export async function startMockMedia(): Promise<MockMedia> {
  const requests: MediaRequest[] = [];
  const server = createServer(async (req, res) => {
    const contentType = req.headers['content-type'] ?? '';
    const body = await bodyOf(req);
    const url = new URL(req.url ?? '/', 'http://mock');
    // Azure OpenAI: the deployment in the path, `api-version` required, the resource key in `api-key`.
    const azure = /^\/openai\/deployments\/([^/]+)(\/.*)$/.exec(url.pathname);
    const path = azure ? `/v1${azure[2]}` : url.pathname;
    const r: MediaRequest = { path, contentType, authorization: req.headers.authorization, bytes: body.length };
    if (azure) r.azure = { deployment: azure[1]!, apiVersion: url.searchParams.get('api-version') };
    requests.push(r);
    const authorized = azure
      ? req.headers['api-key'] === MEDIA_KEY && r.azure!.apiVersion !== null && !req.headers.authorization
      : req.headers.authorization === `Bearer ${MEDIA_KEY}`;
    if (!authorized) return error(res, 401, 'Incorrect API key provided');
    // The model `broken` is an outage: 500 on every endpoint, whatever the body.
    if (body.includes('broken')) return error(res, 500, 'The server had an error while processing your request.');
    const multipart = path === '/v1/audio/transcriptions' || path === '/v1/audio/translations' ||
      path === '/v1/images/edits';
    if (multipart) {
      const form = await formOf(contentType, body);
      if (!form) return error(res, 400, 'Could not parse multipart form');
      r.fields = [];
      r.files = [];
      for (const [k, v] of form) {
        if (typeof v === 'string') r.fields.push([k, v]);
        else r.files.push({ field: k, filename: v.name, type: v.type, size: v.size });
      }
      if (path === '/v1/images/edits') return edit(form, res);
      return transcription(form, res, path === '/v1/audio/translations');
    }
    if (!/^application\/json/.test(contentType)) return error(res, 400, 'expected application/json');
    try {
      r.json = JSON.parse(body.toString('utf8'));
    } catch {
      return error(res, 400, 'We could not parse the JSON body of your request.');
    }
    if (path === '/v1/audio/speech') return speech(r, res);
    if (path === '/v1/images/generations') return generation(r, res);
    if (path === '/v1/rerank') return rerank(r, res);
    return error(res, 404, `no route ${path}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    base: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A PCM WAV header (`fmt ` then, after an odd-sized `LIST` chunk, `data`) for `dataBytes` of audio. */
export function wavHeader(dataBytes: number, sampleRate = 16_000, channels = 1, bits = 16): Uint8Array<ArrayBuffer> {
  const list = 3; // odd: the chunk is padded to an even size
  const buf = new Uint8Array(12 + 24 + 8 + list + 1 + 8);
  const v = new DataView(buf.buffer);
  const put = (at: number, s: string) => [...s].forEach((ch, i) => (buf[at + i] = ch.charCodeAt(0)));
  put(0, 'RIFF');
  v.setUint32(4, buf.length - 8 + dataBytes, true);
  put(8, 'WAVE');
  put(12, 'fmt ');
  v.setUint32(16, 16, true);
  v.setUint16(20, 1, true);
  v.setUint16(22, channels, true);
  v.setUint32(24, sampleRate, true);
  v.setUint32(28, sampleRate * channels * (bits / 8), true);
  v.setUint16(32, channels * (bits / 8), true);
  v.setUint16(34, bits, true);
  put(36, 'LIST');
  v.setUint32(40, list, true);
  put(48, 'data');
  v.setUint32(52, dataBytes, true);
  return buf;
}

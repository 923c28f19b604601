// A raw-HTTP upstream on 127.0.0.1 with OpenAI's files, batches and videos APIs and DashScope's video tasks, for
// the tests of src/endpoints/ (docs/batch-files-endpoints.md). It checks what those APIs check: the bearer, a
// multipart upload with a `purpose` and a named `file` and no other field, a batch naming an uploaded file and
// no unknown member, DashScope's async header. Everything it receives is recorded.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface JobsReceived {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

export interface MockJobs {
  /** `http://127.0.0.1:<port>` (no path: the gateway adds `/v1`). */
  url: string;
  received: JobsReceived[];
  files: Map<string, { filename: string; purpose: string; bytes: Buffer; type: string }>;
  batches: Map<string, Record<string, unknown>>;
  videos: Map<string, Record<string, unknown>>;
  /** Fine-tuning jobs by id. */
  jobs: Map<string, Record<string, unknown>>;
  close(): Promise<void>;
}

const KEY = 'sk-upstream';
const PURPOSES = ['assistants', 'batch', 'fine-tune', 'vision', 'user_data', 'evals'];
const BATCH_MEMBERS = ['input_file_id', 'endpoint', 'completion_window', 'metadata', 'output_expires_after'];

function send(res: import('node:http').ServerResponse, status: number, body: unknown, type = 'application/json') {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  res.writeHead(status, { 'content-type': type, 'content-length': bytes.length });
  res.end(bytes);
}

const invalid = (message: string, param?: string) => ({
  error: { message, type: 'invalid_request_error', param: param ?? null, code: null },
});

export async function mockJobs(): Promise<MockJobs> {
  const received: JobsReceived[] = [];
  const files = new Map<string, { filename: string; purpose: string; bytes: Buffer; type: string }>();
  const batches = new Map<string, Record<string, unknown>>();
  const videos = new Map<string, Record<string, unknown>>();
  const jobs = new Map<string, Record<string, unknown>>();
  let n = 0;
  // A request the mock cannot handle (a body it cannot parse) is a 500 naming why, not a request left open.
  const server: Server = createServer((req, res) => {
    route(req, res).catch((e) => res.headersSent ? res.destroy() : send(res, 500, invalid(`mock-jobs: ${String(e)}`)));
  });

  async function route(req: IncomingMessage, res: import('node:http').ServerResponse) {
    const parts: Buffer[] = [];
    for await (const p of req) parts.push(p as Buffer);
    const body = Buffer.concat(parts);
    const url = new URL(req.url ?? '/', 'http://x');
    const path = url.pathname;
    received.push({ method: req.method ?? '', path: path + url.search, headers: req.headers, body });
    if (path.startsWith('/api/v1/')) return dashscope(req, res, path, body);
    if (req.headers.authorization !== `Bearer ${KEY}`) {
      return send(res, 401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error' } });
    }
    const ft = /^\/v1\/fine_tuning\/jobs(?:\/([^/]+))?(?:\/(cancel))?$/.exec(path);
    if (ft) return fineTuningApi(req.method ?? '', ft[1], ft[2], res, body);
    const m = /^\/v1\/(files|batches|videos)(?:\/([^/]+))?(?:\/(content|cancel))?$/.exec(path);
    if (!m) return send(res, 404, invalid(`Unknown path ${path}`));
    const [, family, id, action] = m;
    if (family === 'files') return filesApi(req.method ?? '', id, action, req, res, body);
    if (family === 'batches') return batchesApi(req.method ?? '', id, action, req, res, body);
    return videosApi(req.method ?? '', id, action, res, body);
  }

  async function filesApi(
    method: string,
    id: string | undefined,
    action: string | undefined,
    req: IncomingMessage,
    res: import('node:http').ServerResponse,
    body: Buffer,
  ) {
    if (method === 'POST' && !id) {
      const type = req.headers['content-type'] ?? '';
      if (!type.startsWith('multipart/form-data')) return send(res, 400, invalid('expected multipart/form-data'));
      // An unreadable form is a 400, as OpenAI answers it: a thrown parse would leave the request unanswered.
      const form = await new Response(new Uint8Array(body), { headers: { 'content-type': type } }).formData()
        .catch(() => undefined);
      if (!form) return send(res, 400, invalid('Could not parse multipart form'));
      for (const name of form.keys()) {
        if (name !== 'purpose' && name !== 'file') return send(res, 400, invalid(`Unrecognized argument: ${name}`));
      }
      const purpose = form.get('purpose');
      const file = form.get('file');
      if (typeof purpose !== 'string' || !PURPOSES.includes(purpose)) {
        return send(res, 400, invalid("'purpose' is a required property", 'purpose'));
      }
      if (!(file instanceof File) || file.name === '') return send(res, 400, invalid('file is required', 'file'));
      const fid = `file-${++n}`;
      const bytes = Buffer.from(await file.arrayBuffer());
      files.set(fid, { filename: file.name, purpose, bytes, type: file.type });
      return send(res, 200, fileObject(fid));
    }
    if (method === 'GET' && !id) {
      return send(res, 200, { object: 'list', data: [...files.keys()].map(fileObject), has_more: false });
    }
    const f = id ? files.get(id) : undefined;
    if (!f || !id) return send(res, 404, invalid(`No such File object: ${id}`, 'id'));
    if (method === 'GET' && action === 'content') return send(res, 200, f.bytes, 'application/octet-stream');
    if (method === 'GET') return send(res, 200, fileObject(id));
    if (method === 'DELETE') {
      files.delete(id);
      return send(res, 200, { id, object: 'file', deleted: true });
    }
    return send(res, 405, invalid('method not allowed'));
  }

  function fileObject(id: string) {
    const f = files.get(id)!;
    return {
      id,
      object: 'file',
      bytes: f.bytes.length,
      created_at: 1,
      filename: f.filename,
      purpose: f.purpose,
      status: 'processed',
    };
  }

  function batchesApi(
    method: string,
    id: string | undefined,
    action: string | undefined,
    req: IncomingMessage,
    res: import('node:http').ServerResponse,
    body: Buffer,
  ) {
    if (method === 'POST' && !id) {
      if (!(req.headers['content-type'] ?? '').startsWith('application/json')) {
        return send(res, 400, invalid('expected JSON'));
      }
      const b = JSON.parse(body.toString()) as Record<string, unknown>;
      const unknown = Object.keys(b).find((k) => !BATCH_MEMBERS.includes(k));
      if (unknown) return send(res, 400, invalid(`Unrecognized request argument supplied: ${unknown}`));
      if (typeof b.input_file_id !== 'string' || !files.has(b.input_file_id)) {
        return send(res, 400, invalid(`Invalid 'input_file_id': '${b.input_file_id}'.`, 'input_file_id'));
      }
      if (b.completion_window !== '24h') return send(res, 400, invalid('completion_window must be 24h'));
      const bid = `batch_${++n}`;
      const batch = {
        id: bid,
        object: 'batch',
        endpoint: b.endpoint,
        input_file_id: b.input_file_id,
        completion_window: '24h',
        status: 'validating',
        output_file_id: null,
        error_file_id: null,
        created_at: 1,
      };
      batches.set(bid, batch);
      return send(res, 200, batch);
    }
    if (method === 'GET' && !id) {
      return send(res, 200, { object: 'list', data: [...batches.values()], has_more: false });
    }
    const b = id ? batches.get(id) : undefined;
    if (!b) return send(res, 404, invalid(`No batch with id '${id}' found.`));
    if (method === 'POST' && action === 'cancel') {
      b.status = 'cancelling';
      return send(res, 200, b);
    }
    if (method === 'GET' && !action) return send(res, 200, b);
    return send(res, 405, invalid('method not allowed'));
  }

  function fineTuningApi(
    method: string,
    id: string | undefined,
    action: string | undefined,
    res: import('node:http').ServerResponse,
    body: Buffer,
  ) {
    if (method === 'POST' && !id) {
      const b = JSON.parse(body.toString()) as Record<string, unknown>;
      if (typeof b.model !== 'string') return send(res, 400, invalid('model is required', 'model'));
      for (const f of ['training_file', 'validation_file']) {
        if (b[f] !== undefined && !files.has(String(b[f]))) return send(res, 400, invalid(`invalid ${f}`, f));
      }
      if (b.provider !== undefined) return send(res, 400, invalid('Unrecognized request argument supplied: provider'));
      const job = {
        id: `ftjob-${++n}`,
        object: 'fine_tuning.job',
        model: b.model,
        training_file: b.training_file,
        validation_file: b.validation_file ?? null,
        result_files: [],
        status: 'validating_files',
      };
      jobs.set(job.id, job);
      return send(res, 200, job);
    }
    if (method === 'GET' && !id) return send(res, 200, { object: 'list', data: [...jobs.values()], has_more: false });
    const j = id ? jobs.get(id) : undefined;
    if (!j) return send(res, 404, invalid(`No fine-tuning job ${id}`));
    if (action === 'cancel') j.status = 'cancelled';
    return send(res, 200, j);
  }

  function videosApi(
    method: string,
    id: string | undefined,
    action: string | undefined,
    res: import('node:http').ServerResponse,
    body: Buffer,
  ) {
    if (method === 'POST' && !id) {
      const b = JSON.parse(body.toString()) as Record<string, unknown>;
      if (typeof b.prompt !== 'string' || typeof b.model !== 'string') return send(res, 400, invalid('bad video'));
      if (b.seconds !== undefined && typeof b.seconds !== 'string') {
        return send(res, 400, invalid("Invalid type for 'seconds': expected a string", 'seconds'));
      }
      const vid = `video_${++n}`;
      const v = { id: vid, object: 'video', model: b.model, status: 'queued', progress: 0, seconds: b.seconds ?? '4' };
      videos.set(vid, v);
      return send(res, 200, v);
    }
    const v = id ? videos.get(id) : undefined;
    if (!v) return send(res, 404, { error: { code: 'not_found', message: `Video ${id} not found` } });
    if (method === 'GET' && action === 'content') {
      if (v.status !== 'completed') return send(res, 400, invalid('Video is not ready'));
      return send(res, 200, Buffer.from('MP4-BYTES'), 'video/mp4');
    }
    return send(res, 200, v);
  }

  function dashscope(req: IncomingMessage, res: import('node:http').ServerResponse, path: string, body: Buffer) {
    if (req.headers.authorization !== `Bearer ${KEY}`) return send(res, 401, { code: 'InvalidApiKey', message: 'bad' });
    if (path === '/api/v1/services/aigc/video-generation/video-synthesis') {
      if (req.headers['x-dashscope-async'] !== 'enable') {
        return send(res, 403, { code: 'AccessDenied', message: 'current user api does not support synchronous calls' });
      }
      const b = JSON.parse(body.toString()) as { input?: { prompt?: string } };
      if (!b.input?.prompt) return send(res, 400, { code: 'InvalidParameter', message: 'input.prompt is required' });
      const tid = `task-${++n}`;
      videos.set(tid, { task_status: 'PENDING' });
      return send(res, 200, { request_id: 'r', output: { task_id: tid, task_status: 'PENDING' } });
    }
    const t = /^\/api\/v1\/tasks\/([^/]+)$/.exec(path);
    const v = t?.[1] ? videos.get(t[1]) : undefined;
    if (!v) return send(res, 404, { code: 'NotFound', message: 'task not found' });
    return send(res, 200, {
      output: { task_id: t![1], task_status: v.task_status, ...(v.video_url ? { video_url: v.video_url } : {}) },
      usage: { duration: 5 },
    });
  }

  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    files,
    batches,
    videos,
    jobs,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

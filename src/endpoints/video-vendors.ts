// What each video vendor's API looks like (docs/batch-files-endpoints.md "Videos"): where a task is submitted
// and polled, how the caller's `{model, prompt, seconds, size}` is written for it, and how its task status
// reads. One entry per vendor; the handler (videos.ts) knows none of them.
import { directUrl } from '../providers/direct-url.ts';

export type VideoStatus = 'queued' | 'in_progress' | 'completed' | 'failed';

export interface VideoAsk {
  model: string;
  prompt: string;
  seconds?: number;
  size?: { w: number; h: number };
}

export interface VideoTask {
  status: VideoStatus;
  progress?: number;
  seconds?: string;
  url?: string;
  error?: { code?: string; message?: string };
}

export interface VideoVendor {
  /** The root the vendor's paths are joined to, from the key's base. */
  root(base: string): string;
  submit(root: string, ask: VideoAsk): { url: string; body: unknown; headers?: Record<string, string> };
  /** The upstream task id and its first status, or undefined when the answer names none. */
  submitted(json: Record<string, unknown>): { id: string; status: VideoStatus } | undefined;
  poll(root: string, id: string): { url: string; headers?: Record<string, string> };
  read(json: Record<string, unknown>): VideoTask;
  /** The completed video is proxied through the gateway (OpenAI) rather than redirected to. */
  proxied?: (root: string, id: string) => string;
}

type J = Record<string, unknown>;
const obj = (v: unknown): J => (typeof v === 'object' && v !== null && !Array.isArray(v) ? v as J : {});
const str = (v: unknown): string | undefined =>
  typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : undefined;
const stripOne = (base: string, suffixes: string[]) => {
  const b = base.replace(/\/+$/, '');
  const s = suffixes.find((x) => b.endsWith(x));
  return s ? b.slice(0, -s.length) : b;
};
const mapStatus = (s: unknown, queued: string[], running: string[], done: string[]): VideoStatus => {
  const v = typeof s === 'string' ? s : '';
  if (queued.includes(v)) return 'queued';
  if (running.includes(v)) return 'in_progress';
  return done.includes(v) ? 'completed' : 'failed';
};
const idOf = (j: J) => str(j.id) ?? str(j.task_id);

const alibaba: VideoVendor = {
  root: (b) => stripOne(b, ['/compatible-mode/v1', '/api/v1', '/v1']),
  submit: (root, a) => ({
    url: `${root}/api/v1/services/aigc/video-generation/video-synthesis`,
    headers: { 'x-dashscope-async': 'enable' },
    body: {
      model: a.model,
      input: { prompt: a.prompt },
      ...(a.seconds !== undefined || a.size
        ? {
          parameters: {
            ...(a.seconds !== undefined ? { duration: a.seconds } : {}),
            ...(a.size ? { size: `${a.size.w}*${a.size.h}` } : {}),
          },
        }
        : {}),
    },
  }),
  submitted: (j) => {
    const out = obj(j.output);
    const id = str(out.task_id) ?? idOf(j);
    return id ? { id, status: alibabaStatus(out.task_status) } : undefined;
  },
  poll: (root, id) => ({ url: `${root}/api/v1/tasks/${id}` }),
  read: (j) => {
    const out = obj(j.output);
    const usage = obj(j.usage);
    const seconds = str(usage.output_video_duration) ?? str(usage.duration);
    return {
      status: alibabaStatus(out.task_status),
      ...(str(out.video_url) ? { url: str(out.video_url) } : {}),
      ...(seconds ? { seconds } : {}),
      error: { code: str(out.code), message: str(out.message) },
    };
  },
};
function alibabaStatus(s: unknown): VideoStatus {
  return mapStatus(s, ['PENDING'], ['RUNNING'], ['SUCCEEDED']);
}

const zhipu: VideoVendor = {
  root: (b) => stripOne(b, ['/api/paas/v4']),
  submit: (root, a) => ({
    url: `${root}/api/paas/v4/videos/generations`,
    body: {
      model: a.model,
      prompt: a.prompt,
      ...(a.seconds !== undefined ? { duration: a.seconds } : {}),
      ...(a.size ? { size: `${a.size.w}x${a.size.h}` } : {}),
    },
  }),
  submitted: (j) => {
    const id = idOf(j);
    return id ? { id, status: j.task_status === undefined ? 'queued' : zhipuStatus(j.task_status) } : undefined;
  },
  poll: (root, id) => ({ url: `${root}/api/paas/v4/async-result/${id}` }),
  read: (j) => {
    const first = obj(Array.isArray(j.video_result) ? j.video_result[0] : undefined);
    return { status: zhipuStatus(j.task_status), ...(str(first.url) ? { url: str(first.url) } : {}) };
  },
};
function zhipuStatus(s: unknown): VideoStatus {
  return mapStatus(s, [], ['PROCESSING'], ['SUCCESS']);
}

const volcengine: VideoVendor = {
  root: (b) => stripOne(b, ['/api/v3']),
  // `size` is checked by the handler and not sent: the vendor takes its resolution from the prompt.
  submit: (root, a) => ({
    url: `${root}/api/v3/contents/generations/tasks`,
    body: {
      model: a.model,
      content: [{ type: 'text', text: a.prompt }],
      ...(a.seconds !== undefined ? { duration: a.seconds } : {}),
    },
  }),
  submitted: (j) => {
    const id = idOf(j);
    return id ? { id, status: 'queued' } : undefined;
  },
  poll: (root, id) => ({ url: `${root}/api/v3/contents/generations/tasks/${id}` }),
  read: (j) => {
    const err = obj(j.error);
    const url = str(obj(j.content).video_url);
    const seconds = str(j.duration);
    return {
      status: mapStatus(j.status, ['queued'], ['running'], ['succeeded']),
      ...(url ? { url } : {}),
      ...(seconds ? { seconds } : {}),
      error: { code: str(err.code), message: str(err.message) },
    };
  },
};

const RUNWAY_VERSION = { 'x-runway-version': '2024-11-06' };
const runway: VideoVendor = {
  root: (b) => b.replace(/\/+$/, ''),
  submit: (root, a) => ({
    url: `${root}/v1/text_to_video`,
    headers: RUNWAY_VERSION,
    body: {
      model: a.model,
      promptText: a.prompt,
      ...(a.seconds !== undefined ? { duration: a.seconds } : {}),
      ...(a.size ? { ratio: `${a.size.w}:${a.size.h}` } : {}),
    },
  }),
  submitted: (j) => {
    const id = idOf(j);
    return id ? { id, status: 'queued' } : undefined;
  },
  poll: (root, id) => ({ url: `${root}/v1/tasks/${id}`, headers: RUNWAY_VERSION }),
  read: (j) => {
    const url = Array.isArray(j.output) ? str(j.output[0]) : undefined;
    return {
      status: mapStatus(j.status, ['PENDING', 'THROTTLED'], ['RUNNING'], ['SUCCEEDED']),
      ...(url ? { url } : {}),
      error: { code: str(j.failureCode), message: str(j.failure) },
    };
  },
};

const OPENAI_STATUSES: readonly string[] = ['queued', 'in_progress', 'completed', 'failed'];
const openaiStatus = (s: unknown): VideoStatus =>
  typeof s === 'string' && OPENAI_STATUSES.includes(s) ? s as VideoStatus : 'failed';
const openai: VideoVendor = {
  root: (b) => b,
  submit: (root, a) => ({
    url: directUrl(root, '/videos'),
    body: {
      model: a.model,
      prompt: a.prompt,
      ...(a.seconds !== undefined ? { seconds: String(a.seconds) } : {}),
      ...(a.size ? { size: `${a.size.w}x${a.size.h}` } : {}),
    },
  }),
  submitted: (j) => {
    const id = idOf(j);
    return id ? { id, status: j.status === undefined ? 'queued' : openaiStatus(j.status) } : undefined;
  },
  poll: (root, id) => ({ url: directUrl(root, `/videos/${id}`) }),
  read: (j) => {
    const err = obj(j.error);
    const seconds = str(j.seconds);
    return {
      status: openaiStatus(j.status),
      ...(typeof j.progress === 'number' ? { progress: Math.min(100, Math.max(0, j.progress)) } : {}),
      ...(seconds ? { seconds } : {}),
      error: { code: str(err.code), message: str(err.message) },
    };
  },
  proxied: (root, id) => directUrl(root, `/videos/${id}/content`),
};

/** The vendor of a model's `provider` (case-insensitive), or undefined: not served on `/v1/videos`. */
export function videoVendor(provider: string | undefined): VideoVendor | undefined {
  switch ((provider ?? '').trim().toLowerCase()) {
    case 'alibaba':
      return alibaba;
    case 'zhipuai':
    case 'zhipu':
      return zhipu;
    case 'volcengine':
      return volcengine;
    case 'runwayml':
    case 'runway':
      return runway;
    case 'openai':
      return openai;
    default:
      return undefined;
  }
}

// What the gateway reads of an A2A answer as it passes (docs/a2a.md "Telemetry"), without changing a byte:
// how many events carried a `result`, the task and context and the task state the call ended on, when the
// first result came, and (for the calls that make an agent produce) its words. Both versions' shapes are
// read: 0.3's `kind`-tagged results and 1.0's `task` / `statusUpdate` wrappers.
import { isRecord, ResultText, unwrapResult } from './text.ts';

const STATES = new Set([
  'submitted',
  'working',
  'input-required',
  'completed',
  'canceled',
  'failed',
  'rejected',
  'auth-required',
]);

/** `TASK_STATE_INPUT_REQUIRED` (1.0) and `input-required` (0.3) are one state; anything else is `unknown`. */
export function normaliseState(s: unknown): string | undefined {
  if (typeof s !== 'string') return undefined;
  const v = s.startsWith('TASK_STATE_') ? s.slice(11).toLowerCase().replaceAll('_', '-') : s;
  return STATES.has(v) ? v : 'unknown';
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The task state a JSON-RPC `result` reports, if it reports one. */
export function stateOf(result: unknown): string | undefined {
  if (!isObject(result)) return undefined;
  for (const wrapper of ['task', 'statusUpdate']) {
    const inner = result[wrapper];
    if (isObject(inner) && isObject(inner.status)) return normaliseState(inner.status.state);
  }
  return isObject(result.status) ? normaliseState(result.status.state) : undefined;
}

/** The longest `data:` line read for facts; a longer one is passed on unread. */
const MAX_LINE = 1_048_576;

export class AnswerFacts {
  /** Events with a `result` relayed. */
  events = 0;
  /** The last task state seen. */
  state: string | undefined = undefined;
  /** When the first result went by (clock ms). */
  firstResultAt: number | undefined = undefined;
  /** The task the call named or was answered about, and its context (AISIX's `a2a_task_id`, `a2a_context_id`). */
  taskId: string | undefined = undefined;
  contextId: string | undefined = undefined;
  private rest = '';
  private readonly decoder = new TextDecoder();

  constructor(
    private readonly now: () => number,
    /** The agent's words, read when the call is one that makes it produce. */
    readonly text?: ResultText,
  ) {}

  /**
   * What the request already says: the task and context a send continues (`params.message`), or the ones a
   * task operation names (`params.taskId`, else `params.id`), so a call that fails still names its task.
   */
  request(rpc: Record<string, unknown>): void {
    const params = rpc.params;
    if (!isRecord(params)) return;
    for (const from of [params.message, params]) {
      if (!isRecord(from)) continue;
      this.taskId = nonEmpty(from.taskId) ?? this.taskId;
      this.contextId = nonEmpty(from.contextId) ?? this.contextId;
    }
    // `params.id` only as a fallback: on 1.0's push-config operations it is the config's id, not the task's.
    this.taskId ??= nonEmpty(params.id);
  }

  /** One whole JSON-RPC answer (a unary call's). */
  answer(v: unknown): void {
    if (!isObject(v) || !('result' in v)) return;
    this.firstResultAt ??= this.now();
    this.state = stateOf(v.result) ?? this.state;
    this.ids(v.result);
    this.text?.observe(v.result);
  }

  /** A task names itself in `id` (a message's `id` is no task's: only a result with `status` is a task). */
  private ids(result: unknown): void {
    const r = unwrapResult(result);
    if (!r) return;
    this.contextId = nonEmpty(r.contextId) ?? this.contextId;
    this.taskId = nonEmpty(r.taskId) ?? this.taskId;
    if ('status' in r) this.taskId = nonEmpty(r.id) ?? this.taskId;
  }

  /** One chunk of an SSE answer, as it goes out. */
  chunk(bytes: Uint8Array): void {
    const text = this.rest + this.decoder.decode(bytes, { stream: true });
    const lines = text.split('\n');
    this.rest = lines.pop() ?? '';
    if (this.rest.length > MAX_LINE) this.rest = '';
    for (const line of lines) this.line(line.endsWith('\r') ? line.slice(0, -1) : line);
  }

  private line(line: string): void {
    if (!line.startsWith('data:')) return;
    let v: unknown;
    try {
      v = JSON.parse(line.slice(5));
    } catch {
      return;
    }
    if (!isObject(v) || !('result' in v)) return;
    this.events++;
    this.answer(v);
  }
}

function nonEmpty(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** The chunks as they are, each shown to `facts` on its way out. */
export function observed(chunks: AsyncIterable<Uint8Array>, facts: AnswerFacts): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      const it = chunks[Symbol.asyncIterator]();
      return {
        async next() {
          const r = await it.next();
          if (!r.done) facts.chunk(r.value);
          return r;
        },
        return: async () => (await it.return?.()) ?? { done: true, value: undefined },
      };
    },
  };
}

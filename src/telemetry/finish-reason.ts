// Why the model stopped (`gen_ai.response.finish_reasons`, docs/operations.md "Tracing"), read from the
// answer the caller got, and only for a traced request: OpenAI's `finish_reason` (chat and completions, the
// first choice's) and Anthropic's `stop_reason`, in a JSON answer or in a stream's `data:` lines. Embeddings
// have none. A string value inside the answer's text cannot match: its quotes are escaped.

const FINISH = /"finish_reason"\s*:\s*"((?:[^"\\]|\\.){1,64})"/;
const STOP = /"stop_reason"\s*:\s*"((?:[^"\\]|\\.){1,64})"/g;

/**
 * The finish reason of a JSON answer or of one stream event's JSON, or undefined (none, or `null` while a
 * stream is still going). Anthropic's is its last `stop_reason`: a tool's `input` object comes before it.
 */
export function finishReasonOf(json: string): string | undefined {
  const f = FINISH.exec(json);
  if (f) return f[1];
  if (!json.includes('"stop_reason"')) return undefined;
  let last: string | undefined;
  for (const m of json.matchAll(STOP)) last = m[1];
  return last;
}

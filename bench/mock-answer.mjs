// The mock upstream's fixed answers (bench/mock-upstream.mjs): the JSON one, shared with bench/inproc.ts,
// and the stream's chunks, shared with bench/stream-edits.ts, so each measures the same bytes.
export const CREATED = 1_700_000_000;

export const CHAT_COMPLETION = {
  id: 'chatcmpl-bench0000000000000000000000',
  object: 'chat.completion',
  created: CREATED,
  model: 'mock-model',
  choices: [{
    index: 0,
    message: { role: 'assistant', content: 'Hello! This is a fixed answer from the benchmark upstream.' },
    logprobs: null,
    finish_reason: 'stop',
  }],
  usage: { prompt_tokens: 12, completion_tokens: 12, total_tokens: 24 },
  system_fingerprint: 'fp_bench',
};

/** Stream chunk `i` of `chunks` as an SSE event; `fingerprint` is where the mock stamps a send time. */
export function chunkJson(i, fingerprint, chunks) {
  const last = i === chunks - 1;
  return `data: ${
    JSON.stringify({
      id: 'chatcmpl-bench0000000000000000000000',
      object: 'chat.completion.chunk',
      created: CREATED,
      model: 'mock-model',
      system_fingerprint: fingerprint,
      choices: [{
        index: 0,
        delta: i === 0 ? { role: 'assistant', content: 'tok0 ' } : last ? {} : { content: `tok${i} ` },
        logprobs: null,
        finish_reason: last ? 'stop' : null,
      }],
    })
  }\n\n`;
}

/** OpenAI's usage-only chunk, sent before `[DONE]` to a stream that asks `include_usage`. */
export const USAGE_CHUNK = {
  id: 'chatcmpl-bench0000000000000000000000',
  object: 'chat.completion.chunk',
  created: CREATED,
  model: 'mock-model',
  choices: [],
  usage: { prompt_tokens: 9, completion_tokens: 20, total_tokens: 29 },
};

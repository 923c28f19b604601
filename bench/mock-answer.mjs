// The mock upstream's fixed JSON answer (bench/mock-upstream.mjs), shared with bench/inproc.ts so both
// measure the same bytes.
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

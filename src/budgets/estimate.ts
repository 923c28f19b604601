// What a call reserves before dispatch (docs/budgets.md "Reservation and the overshoot bound"): the most it
// can cost — its prompt, over-estimated from the body's size, at the input price, plus the output it may
// generate (its stated maximum × `n`, else `budgets.default_max_output_tokens`) at the output price. For a
// routing model, the dearest price among its targets.
import type { Cost, Model } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Amount } from './store.ts';

/** Characters of the request's JSON per reserved prompt token: below English text's ~4, so most prompts over-reserve. */
export const CHARS_PER_PROMPT_TOKEN = 3;

/** The route's `call` (chat, completions, embeddings, messages, responses, or a kind another feature adds). */
export type SpendingCall = string;

/** The output tokens the body allows at most, undefined when it states none. */
export function maxOutputTokens(call: SpendingCall, body: Record<string, unknown>): number | undefined {
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.ceil(v) : undefined);
  switch (call) {
    case 'embeddings':
      return 0;
    case 'responses':
      return num(body.max_output_tokens);
    case 'chat': {
      const max = num(body.max_completion_tokens) ?? num(body.max_tokens);
      const n = num(body.n) ?? 1;
      return max === undefined ? undefined : max * Math.max(1, n);
    }
    default:
      return num(body.max_tokens);
  }
}

/** The prompt tokens reserved for `body`: its JSON length over `CHARS_PER_PROMPT_TOKEN`. */
export function promptTokensOf(body: Record<string, unknown>): number {
  return Math.ceil(JSON.stringify(body).length / CHARS_PER_PROMPT_TOKEN);
}

/** The prices a call to `model` may be charged at: its own, or per unit the dearest of its targets'. */
export function priceOf(snapshot: Snapshot, model: Model): Cost | undefined {
  if (model.kind === 'direct') return model.cost;
  let price: Cost | undefined;
  for (const t of model.routing.targets) {
    const m = snapshot.modelByName(t.model);
    const c = m?.kind === 'direct' ? m.cost : undefined;
    if (!c) continue;
    price = {
      input_per_1k: Math.max(price?.input_per_1k ?? 0, c.input_per_1k),
      output_per_1k: Math.max(price?.output_per_1k ?? 0, c.output_per_1k),
    };
  }
  return price;
}

/** micro-USD of `tokens` at `per1k` USD per 1 000, rounded up (a reservation never rounds down). */
const microUsd = (tokens: number, per1k: number | undefined) => Math.ceil(tokens * (per1k ?? 0) * 1000);

export interface Reservation {
  /** The whole reservation. */
  amount: Amount;
  /** Its prompt part: what a call the caller left before any answer is charged. */
  prompt: Amount;
}

/** The reservation of one call. */
export function reservationOf(
  call: SpendingCall,
  body: Record<string, unknown>,
  price: Cost | undefined,
  defaultMaxOutput: number,
): Reservation {
  const input = promptTokensOf(body);
  const output = maxOutputTokens(call, body) ?? defaultMaxOutput;
  const prompt = { microUsd: microUsd(input, price?.input_per_1k), tokens: input };
  return {
    amount: { microUsd: prompt.microUsd + microUsd(output, price?.output_per_1k), tokens: input + output },
    prompt,
  };
}

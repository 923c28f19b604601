// Guardrails on A2A calls (docs/a2a.md "Guardrails"): the input hook of the chain of the call's scopes (the
// environment, the key, its team; never a model's or an MCP server's) on the text parts of `params.message`,
// before the agent is asked. A block is AISIX's 422 with the -32000 JSON-RPC envelope; a mask is written into
// the parts the agent receives. Answers are not checked: an A2A task streams for hours.
import { AttachmentIndex } from '../guardrails/attachments.ts';
import { type ChainDeps, countRequest, runChain, type Verdict } from '../guardrails/chain.ts';
import { blockMessage } from '../guardrails/messages.ts';
import { type Slot, writeBack } from '../guardrails/slots.ts';
import type { Guardrail } from '../guardrails/types.ts';
import type { ApiKey } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { isRecord, messageParts } from './text.ts';

/** AISIX's A2A guardrail line (WARN). */
export const A2A_GUARD_MSG = { blocked: 'guardrail blocked A2A request' } as const;

/** The text parts of the call's `params.message` (0.3 `{kind: "text", text}`, 1.0 `{text}`), writable in place. */
export function messageSlots(rpc: Record<string, unknown>): Slot[] {
  const out: Slot[] = [];
  for (const p of messageParts(rpc)) {
    if (isRecord(p) && typeof p.text === 'string') out.push({ text: p.text, role: 'user', set: (t) => (p.text = t) });
  }
  return out;
}

export type A2aGuardVerdict =
  /** Nothing to change: the caller's bytes go to the agent as they came. */
  | { kind: 'pass'; verdict: Verdict }
  /** A mask rewrote some part: the body the agent receives is this one. */
  | { kind: 'masked'; verdict: Verdict; body: string }
  /** A guardrail refused: the caller's answer is `message`, the agent is not asked. */
  | { kind: 'blocked'; verdict: Verdict; message: string };

/**
 * The input hook on one call. A call without a message (`tasks/get`, `tasks/cancel`) still runs the chain, on
 * empty text, as AISIX's does: a guardrail deciding about the call itself gets its say.
 */
export async function guardMessage(
  chain: readonly Guardrail[],
  deps: ChainDeps,
  agent: string,
  rpc: Record<string, unknown>,
): Promise<A2aGuardVerdict | undefined> {
  if (!chain.some((g) => g.input)) return undefined;
  const slots = messageSlots(rpc);
  const segments = slots.length > 0 ? slots : [{ text: '', role: 'user' as const }];
  const v = await runChain(chain, 'input', segments, deps);
  countRequest(deps.metrics, v);
  if (v.blocked) {
    const name = v.blocked.guardrail.name;
    deps.log('warn', A2A_GUARD_MSG.blocked, { guardrail_hook: 'input', agent, reason: v.blocked.reason });
    return { kind: 'blocked', verdict: v, message: blockMessage('request', name) };
  }
  if (v.masked && slots.length > 0 && writeBack(slots, v.segments)) {
    return { kind: 'masked', verdict: v, body: JSON.stringify(rpc) };
  }
  return { kind: 'pass', verdict: v };
}

/**
 * The guardrails of each snapshot's A2A calls: its attachment index, built on the snapshot's first call. A
 * snapshot whose guardrails apply nowhere has none, and its calls skip the check entirely.
 */
export class AgentGuards {
  private readonly bySnapshot = new WeakMap<Snapshot, AttachmentIndex | null>();

  constructor(private readonly deps: (snapshot: Snapshot) => ChainDeps) {}

  /** The chain of `key`'s calls under `snapshot` and its dependencies, or undefined when none applies. */
  of(snapshot: Snapshot, key: ApiKey): { chain: readonly Guardrail[]; deps: ChainDeps } | undefined {
    let index = this.bySnapshot.get(snapshot);
    if (index === undefined) {
      const built = snapshot.guardrails.length === 0
        ? undefined
        : new AttachmentIndex(snapshot.guardrails, snapshot.guardrailAttachments);
      index = built && !built.empty ? built : null;
      this.bySnapshot.set(snapshot, index);
    }
    if (index === null) return undefined;
    const chain = index.resolve({ modelId: '', apiKeyId: key.id, teamId: key.team_id });
    return chain.length === 0 ? undefined : { chain, deps: this.deps(snapshot) };
  }
}

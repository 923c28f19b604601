// Guardrails on tool calls (docs/mcp.md "Governance"): the chain of the call's scopes (environment, the MCP
// server, the key, its team; never a model's) runs on the arguments before the upstream is asked and on the
// result before the caller reads it. The arguments are scanned as their compact JSON (keys included), the
// result's text where AISIX reads it; masks are written back; a block answers as a tool result with
// `isError: true`, the upstream not asked (input) or its result withheld (output).
import { type ChainDeps, countRequest, runChain } from '../guardrails/chain.ts';
import { writeBack } from '../guardrails/slots.ts';
import type { Guardrail } from '../guardrails/types.ts';
import type { Slot } from '../guardrails/slots.ts';

/** AISIX's MCP guardrail lines. */
export const MCP_GUARD_MSG = {
  blockedCall: 'guardrail blocked MCP tool call',
  blockedResult: 'guardrail blocked MCP tool result',
  inputSplice: 'mcp input mask splice failed; blocking tool call',
  outputSplice: 'mcp output mask splice failed; blocking tool result',
} as const;

/** The tool result a block answers with (no `resultType`, even for a 2026-07-28 caller). */
export function blockedResult(side: 'call' | 'result', guardrail: string | undefined): Record<string, unknown> {
  const text = `tool ${side} blocked by content policy${guardrail === undefined ? '' : ` (guardrail '${guardrail}')`}`;
  return { content: [{ type: 'text', text }], isError: true };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Every string value under `node` (keys never), as slots that write back in place. */
function stringLeaves(out: Slot[], node: unknown): void {
  if (Array.isArray(node)) {
    node.forEach((v, i) => {
      if (typeof v === 'string') out.push({ text: v, role: 'assistant', set: (t) => (node[i] = t) });
      else stringLeaves(out, v);
    });
  } else if (isRecord(node)) {
    for (const k of Object.keys(node)) {
      const v = node[k];
      if (typeof v === 'string') out.push({ text: v, role: 'assistant', set: (t) => (node[k] = t) });
      else stringLeaves(out, v);
    }
  }
}

/**
 * Where a tool result's text is: each content block's `text`, `description`, `title` and an embedded
 * resource's `text`, and every string of `structuredContent`. `name`, `uri` and base64 data never.
 */
export function resultSlots(result: Record<string, unknown>): Slot[] {
  const out: Slot[] = [];
  const content = Array.isArray(result.content) ? result.content : [];
  for (const c of content) {
    if (!isRecord(c)) continue;
    for (const k of ['text', 'description', 'title']) {
      if (typeof c[k] === 'string') out.push({ text: c[k], role: 'assistant', set: (t) => (c[k] = t) });
    }
    const r = c.resource;
    if (isRecord(r) && typeof r.text === 'string') {
      out.push({ text: r.text, role: 'assistant', set: (t) => (r.text = t) });
    }
  }
  stringLeaves(out, result.structuredContent);
  return out;
}

export type InputVerdict = { args: Record<string, unknown> } | { blocked: Record<string, unknown> };
export type OutputVerdict = { result: Record<string, unknown> } | { blocked: Record<string, unknown> };

/** The input hook on a call's arguments: the (masked) arguments, or the block's tool result. */
export async function guardArguments(
  chain: readonly Guardrail[],
  deps: ChainDeps,
  tool: string,
  args: Record<string, unknown>,
): Promise<InputVerdict> {
  if (!chain.some((g) => g.input)) return { args };
  const v = await runChain(chain, 'input', [{ text: JSON.stringify(args), role: 'user' }], deps);
  countRequest(deps.metrics, v);
  if (v.blocked) {
    const name = v.blocked.guardrail.name;
    deps.log('warn', MCP_GUARD_MSG.blockedCall, {
      guardrail_hook: 'input',
      guardrail: name,
      tool,
      reason: v.blocked.reason,
    });
    return { blocked: blockedResult('call', name) };
  }
  if (!v.masked) return { args };
  // The masked text is the arguments again; one that no longer parses as an object blocks, never fails open.
  try {
    const masked: unknown = JSON.parse(v.segments[0]!.text);
    if (isRecord(masked)) return { args: masked };
  } catch {
    // below
  }
  deps.log('warn', MCP_GUARD_MSG.inputSplice, { tool });
  return { blocked: blockedResult('call', undefined) };
}

/** The output hook on a call's result: the (masked) result, or the block's tool result. */
export async function guardResult(
  chain: readonly Guardrail[],
  deps: ChainDeps,
  tool: string,
  result: Record<string, unknown>,
): Promise<OutputVerdict> {
  if (!chain.some((g) => g.output)) return { result };
  let slots = resultSlots(result);
  // Nothing readable: the serialised result is scanned, and a mask, having nowhere to go, blocks.
  const whole = slots.length === 0;
  if (whole) slots = [{ text: JSON.stringify(result), role: 'assistant', set: () => {} }];
  const v = await runChain(chain, 'output', slots, deps);
  countRequest(deps.metrics, v);
  if (v.blocked) {
    const name = v.blocked.guardrail.name;
    deps.log('warn', MCP_GUARD_MSG.blockedResult, {
      guardrail_hook: 'output',
      guardrail: name,
      tool,
      reason: v.blocked.reason,
    });
    return { blocked: blockedResult('result', name) };
  }
  if (v.masked && whole) {
    deps.log('warn', MCP_GUARD_MSG.outputSplice, { tool });
    return { blocked: blockedResult('result', undefined) };
  }
  if (v.masked) writeBack(slots, v.segments);
  return { result };
}

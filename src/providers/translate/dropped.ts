// What a translation to chat cannot carry from the caller's tools, named so the caller hears of it: hosted
// tools only a vendor runs itself (OpenAI's `web_search`, Codex's `namespace` groups and `custom` tools,
// Anthropic's server tools). The answer carries the list as `x-sluice-dropped` and the access log as `dropped`
// (docs/translation.md "Nothing dropped in silence").
import { isRecord, type Json, str } from './shared.ts';

/** The header on an answer whose request lost tools in translation: `type` or `type:name`, comma-separated. */
export const DROPPED_HEADER = 'x-sluice-dropped';

/** One dropped tool as the header names it: its type, and its name when it has one. */
function label(t: Json): string {
  const type = str(t.type) ?? 'tool';
  const name = str(t.name);
  return name === undefined ? type : `${type}:${name}`;
}

/** The Responses tools chat has no form for: everything but `function` tools. */
export function droppedResponsesTools(body: Json): string[] {
  const tools = Array.isArray(body.tools) ? body.tools.filter(isRecord) : [];
  return tools.filter((t) => t.type !== 'function').map(label);
}

/**
 * Whether an Anthropic tool is one the client runs (a custom tool: no `type`, or `custom`); server tools
 * (`web_search_20250305`, `code_execution_…`, `bash_…`, …) run at Anthropic only.
 */
export function isClientTool(t: Json): boolean {
  return t.type === undefined || t.type === null || t.type === 'custom';
}

/** The Anthropic server tools a chat target cannot run. */
export function droppedMessagesTools(body: Json): string[] {
  const tools = Array.isArray(body.tools) ? body.tools.filter(isRecord) : [];
  return tools.filter((t) => !isClientTool(t)).map(label);
}

/** The header naming `dropped`, none when nothing was. */
export function droppedHeaders(dropped: string[]): Record<string, string> | undefined {
  return dropped.length === 0 ? undefined : { [DROPPED_HEADER]: [...new Set(dropped)].join(', ') };
}

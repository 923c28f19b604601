// The client matrix's rig (test/clients, docs/translation.md "Tested clients"): the scripted upstream and a real
// Sluice process (the Node bundle) over it with four models, a bounded runner for the client programs, and the
// checks every client × target case makes on what the upstream received.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { baseConfig, CALLER_KEY, type GatewayProcess, type LogLine, spawnGateway } from './process.ts';
import {
  FINAL_ANSWER,
  PREAMBLE_TEXT,
  type ScriptedRequest,
  type ScriptedUpstream,
  startScriptedUpstream,
} from './scripted-upstream.ts';

export { CALLER_KEY };
export const ROOT = resolve(import.meta.dirname, '../..');

export interface Target {
  /** The model name callers use. */
  model: string;
  /** The name the upstream sees. */
  upstream: string;
  /** What serves it: OpenAI itself (Responses native), an OpenAI-compatible vendor, or Anthropic. */
  kind: 'openai' | 'compat' | 'anthropic';
}

export const TARGETS: Target[] = [
  { model: 'gpt-5-mock', upstream: 'gpt-5-mock', kind: 'openai' },
  { model: 'gpt-4o-mock', upstream: 'gpt-4o-mock', kind: 'openai' },
  { model: 'compat-mock', upstream: 'compat-model', kind: 'compat' },
  { model: 'claude-mock', upstream: 'claude-sonnet-4-5-mock', kind: 'anthropic' },
];

function resources(openaiBase: string, anthropicBase: string): string {
  return `_format_version: "1"
provider_keys:
  - { display_name: oai, provider: openai, api_key: sk-upstream-oai, api_base: "${openaiBase}" }
  - { display_name: vllm, provider: vllm, adapter: openai, api_key: sk-upstream-vllm, api_base: "${openaiBase}" }
  - { display_name: ant, provider: anthropic, api_key: sk-upstream-ant, api_base: "${anthropicBase}" }
models:
  - { display_name: gpt-5-mock, provider_key: oai, model_name: gpt-5-mock, retries: 0 }
  - { display_name: gpt-4o-mock, provider_key: oai, model_name: gpt-4o-mock, retries: 0 }
  - { display_name: compat-mock, provider_key: vllm, model_name: compat-model, retries: 0 }
  - { display_name: claude-mock, provider_key: ant, model_name: claude-sonnet-4-5-mock, retries: 0 }
api_keys:
  - { display_name: caller, key_env: CALLER_KEY, allowed_models: ["*"] }
`;
}

export interface ClientMatrix {
  upstream: ScriptedUpstream;
  gw: GatewayProcess;
  /** A folder for the file's cases (a file to read, a client's home), removed after. */
  dir: string;
  /** The marker in `dir/note.txt`, which the tool reads: seeing it in the final answer proves the round trip. */
  marker: string;
}

/**
 * Registers the enclosing `before` and `after`: the scripted upstream, a Sluice process over it (ready), and a
 * temp folder holding `note.txt` with a marker the script's tool calls read; all stopped and removed after.
 */
export function clientMatrix(): ClientMatrix {
  // Filled in by `before`, which runs ahead of every test that reads it.
  const rig = {} as ClientMatrix;
  before(async () => {
    if (!existsSync(join(ROOT, 'dist/node.mjs'))) {
      throw new Error('dist/node.mjs is missing: run `node build.mjs` (npm run test:clients does)');
    }
    rig.upstream = await startScriptedUpstream();
    rig.gw = await spawnGateway({
      config: baseConfig(),
      env: { CALLER_KEY },
      files: { 'resources.yaml': resources(rig.upstream.base, rig.upstream.url) },
    });
    await rig.gw.waitReady();
    rig.dir = mkdtempSync(join(tmpdir(), 'sluice-clients-'));
    rig.marker = `MARKER-${Math.random().toString(36).slice(2, 10)}`;
    rig.upstream.file = join(rig.dir, 'note.txt');
    writeFileSync(rig.upstream.file, `The secret word is ${rig.marker}.\n`);
  });
  after(async () => {
    await rig.gw?.stop();
    await rig.upstream?.close();
    if (rig.dir) rmSync(rig.dir, { recursive: true, force: true });
  });
  return rig;
}

/** The path of an installed client's executable, or an error saying how to install it. */
export function tool(relative: string, pkg: string): string {
  const path = join(ROOT, 'node_modules', relative);
  if (!existsSync(path)) {
    throw new Error(`${path} is missing: run \`npm ci\` (${pkg} is a pinned devDependency; its postinstall must run)`);
  }
  return path;
}

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a client program to its end, killed (its process only) after `timeoutMs`, which fails naming the
 * command and the end of its output.
 */
export function runClient(
  cmd: string,
  args: string[],
  o: { env?: Record<string, string>; cwd?: string; timeoutMs?: number; input?: string } = {},
): Promise<Run> {
  const timeoutMs = o.timeoutMs ?? 120_000;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: o.cwd,
      env: { ...inherited(), NO_COLOR: '1', ...o.env },
      stdio: [o.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    if (o.input !== undefined) child.stdin!.end(o.input);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `${cmd} ${args.join(' ')} did not finish within ${timeoutMs} ms\nstdout: ${stdout.slice(-2000)}\n` +
            `stderr: ${stderr.slice(-2000)}`,
        ),
      );
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** This process's environment less any client's own settings (keys, base URLs, config homes) it could pick up. */
function inherited(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !/^(ANTHROPIC|CLAUDE|OPENAI|CODEX|LANGCHAIN|LANGSMITH)/i.test(k)) out[k] = v;
  }
  return out;
}

/** Resolves with `p`'s value, or fails after `ms` naming `what` (an in-process client's whole run). */
export async function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The requests the upstream got for `target` since `from` (an index into `upstream.requests`). */
export function received(rig: ClientMatrix, target: Target, from: number): ScriptedRequest[] {
  return rig.upstream.requests.slice(from).filter((r) => r.json?.model === target.upstream);
}

const describe = (r: ScriptedRequest) =>
  `${r.api} ${r.status}${r.refusal ? ` (${r.refusal})` : ''} ${JSON.stringify(r.json).slice(0, 600)}`;

/**
 * The checks of one client × target round trip on what the upstream received since `from`: nothing the real
 * API refuses; a turn that asked for the tool and a later one that answered from the tool's result, paired
 * with its call and after the assistant's text; the token limit a reasoning model takes (`limited`: the client
 * set a limit, which a translated chat request must carry in the target's field); no effort knob to a model
 * that takes none. Returns the target's requests.
 */
export function assertRoundTrip(
  rig: ClientMatrix,
  target: Target,
  from: number,
  o: { limited?: boolean } = {},
): ScriptedRequest[] {
  const reqs = received(rig, target, from).filter((r) => r.api !== 'count_tokens');
  const all = () => reqs.map(describe).join('\n');
  assert.ok(reqs.length >= 2, `expected two or more requests to ${target.upstream}, got:\n${all()}`);
  const refused = reqs.filter((r) => r.status !== 200);
  assert.deepEqual(refused.map(describe), [], 'the upstream refused what the gateway sent');
  const asked = reqs.findIndex((r) => r.action && 'tool' in r.action);
  assert.ok(asked >= 0, `no turn asked for a tool:\n${all()}`);
  const answered = reqs.findIndex((r, i) =>
    i > asked && r.action && 'text' in r.action &&
    r.action.text.startsWith(FINAL_ANSWER) && r.action.text.includes(rig.marker)
  );
  assert.ok(answered > asked, `no turn after the tool call carried the tool's result with ${rig.marker}:\n${all()}`);
  assertPaired(reqs[answered]!);
  assert.ok(
    assistantText(reqs[answered]!).some((t) => t.includes(PREAMBLE_TEXT)),
    `the assistant's text before its tool call ("${PREAMBLE_TEXT}") did not reach the upstream on the next turn; ` +
      `it got: ${describe(reqs[answered]!)}`,
  );
  for (const r of reqs) {
    if (target.upstream.startsWith('gpt-5') && r.api === 'chat') {
      assert.equal(r.json!.max_tokens, undefined, `max_tokens sent to ${target.upstream}: ${describe(r)}`);
    }
    // A Messages caller always states `max_tokens`; translated to chat it must arrive in the target's own field.
    if (o.limited && r.api === 'chat') {
      const field = target.upstream.startsWith('gpt-5') ? 'max_completion_tokens' : 'max_tokens';
      assert.equal(typeof r.json![field], 'number', `no ${field} sent to ${target.upstream}: ${describe(r)}`);
    }
    if (target.upstream.startsWith('gpt-4')) {
      assert.equal(r.json!.reasoning_effort, undefined, `reasoning_effort sent to ${target.upstream}: ${describe(r)}`);
      const reasoning = r.json!.reasoning as { effort?: unknown } | undefined;
      assert.equal(reasoning?.effort, undefined, `reasoning.effort sent to ${target.upstream}: ${describe(r)}`);
    }
  }
  return reqs;
}

type Json = Record<string, unknown>;
const list = (v: unknown): Json[] => (Array.isArray(v) ? v.filter((x) => typeof x === 'object' && x !== null) : []);

/** The text of every assistant turn in the request (Responses: in the conversation it stands for). */
function assistantText(r: ScriptedRequest): string[] {
  const text = (v: unknown) => (typeof v === 'string' ? [v] : list(v).map((p) => String(p.text ?? '')));
  if (r.api === 'responses') {
    return (r.conversation ?? []).filter((i) => i.role === 'assistant').flatMap((i) => text(i.content));
  }
  return list(r.json!.messages).filter((m) => m.role === 'assistant').flatMap((m) => text(m.content));
}

/** The request's last tool result names a call that comes before it in the same request (or its stored chain). */
function assertPaired(r: ScriptedRequest): void {
  const body = r.json!;
  if (r.api === 'chat') {
    const msgs = list(body.messages);
    const i = msgs.findLastIndex((m) => m.role === 'tool');
    const calls = msgs.slice(0, i).flatMap((m) => list(m.tool_calls).map((c) => c.id));
    assert.ok(calls.includes(msgs[i]!.tool_call_id), `tool message without its call: ${JSON.stringify(msgs)}`);
  } else if (r.api === 'messages') {
    const msgs = list(body.messages);
    const i = msgs.findLastIndex((m) => list(m.content).some((b) => b.type === 'tool_result'));
    const ids = list(msgs[i]!.content).filter((b) => b.type === 'tool_result').map((b) => b.tool_use_id);
    const uses = list(msgs[i - 1]?.content).filter((b) => b.type === 'tool_use').map((b) => b.id);
    assert.ok(msgs[i - 1]?.role === 'assistant', `tool_result not after an assistant turn: ${JSON.stringify(msgs)}`);
    for (const id of ids) assert.ok(uses.includes(id), `tool_result ${String(id)} without its tool_use`);
  } else if (r.api === 'responses') {
    // The mock resolved the chain and references and refused an unpaired output; answering is the proof.
    assert.equal(r.status, 200);
  }
}

/** The gateway's access-log lines since `from` (an index into `gw.logs`). */
export function accessLines(rig: ClientMatrix, from: number): LogLine[] {
  return rig.gw.logs.slice(from).filter((l) => l.msg === 'proxy request completed');
}

/**
 * A caller's reasoning effort (`high`) reached a translated target as its own knob on every turn: Claude's
 * `thinking` budget for that level (docs/translation.md "Reasoning"), with the turn that carries the tool result
 * led by the thinking block Claude signed (the upstream checks the signature); a chat vendor's
 * `reasoning_effort`.
 */
export function assertHighEffort(rig: ClientMatrix, target: Target, from: number): void {
  const reqs = received(rig, target, from).filter((r) => r.api !== 'count_tokens');
  assert.ok(reqs.length >= 2, `expected two or more requests to ${target.upstream}`);
  for (const r of reqs) {
    if (target.kind === 'anthropic') {
      assert.deepEqual(r.json!.thinking, { type: 'enabled', budget_tokens: 4096 }, describe(r));
    } else {
      assert.equal(r.json!.reasoning_effort, 'high', describe(r));
    }
  }
  if (target.kind === 'anthropic') {
    const msgs = list(reqs.at(-1)!.json!.messages);
    const turn = msgs.findLast((m) => m.role === 'assistant');
    assert.equal(list(turn?.content)[0]?.type, 'thinking', `the tool turn sent back: ${JSON.stringify(turn)}`);
  }
}

// Claude Code (`@anthropic-ai/claude-code`, `claude -p`) through a real Sluice process to each target: a Read
// tool round trip on /v1/messages, pass-through to Anthropic and translated to the OpenAI-style targets
// (docs/translation.md "Tested clients").
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  accessLines,
  assertRoundTrip,
  CALLER_KEY,
  clientMatrix,
  received,
  type Run,
  runClient,
  type Target,
  TARGETS,
  tool,
} from '../support/client-matrix.ts';
import { FINAL_ANSWER } from '../support/scripted-upstream.ts';

const rig = clientMatrix();

interface StreamLine {
  type: string;
  subtype?: string;
  result?: string;
  is_error?: boolean;
  message?: { content?: { type: string; text?: string; thinking?: string }[]; usage?: { input_tokens?: number } };
}

/** `claude -p` on `target` with only the Read tool allowed, its stream-json lines parsed. */
async function claude(target: Target, prompt: string): Promise<{ run: Run; lines: StreamLine[] }> {
  const bin = tool('.bin/claude', '@anthropic-ai/claude-code');
  const home = join(rig.dir, `home-claude-${target.model}`);
  mkdirSync(home, { recursive: true });
  const run = await runClient(
    bin,
    ['-p', prompt, '--model', target.model, '--allowedTools', 'Read', '--output-format', 'stream-json', '--verbose'],
    {
      cwd: rig.dir,
      timeoutMs: 120_000,
      env: {
        HOME: home,
        CLAUDE_CONFIG_DIR: home,
        ANTHROPIC_BASE_URL: rig.gw.url(''),
        ANTHROPIC_API_KEY: CALLER_KEY,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_AUTOUPDATER: '1',
      },
    },
  );
  const lines = run.stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as StreamLine);
  return { run, lines };
}

const prompt = (file = rig.upstream.file) => `Read the file ${file} and tell me the secret word.`;

/**
 * A file Claude Code reads only in part: over its 25,000-token cap for one view (about 115,000 tokens of
 * one-letter words, 224 KB) and under its 256 KB size limit, the marker on its first line. Claude Code asks
 * `count_tokens` for the size of such a read.
 */
function bigFile(): string {
  const path = `${rig.upstream.file}.big`;
  const lines = [`The secret word is ${rig.marker}.`];
  for (let i = 0; i < 4000; i++) lines.push(`${i} a b c d e f g h i j k l m n o p q r s t u v w x y z`);
  writeFileSync(path, lines.join('\n'));
  return path;
}

describe('Claude Code 2.1.197 (claude -p, stream-json, --allowedTools Read)', () => {
  for (const target of TARGETS) {
    test(`Read round trip on ${target.model}`, async () => {
      const from = rig.upstream.requests.length;
      const { run, lines } = await claude(target, prompt());
      const result = lines.find((l) => l.type === 'result');
      assert.ok(result, `no result line (exit ${run.code}):\n${run.stdout.slice(-3000)}\n${run.stderr.slice(-2000)}`);
      assert.equal(result.is_error, false, `Claude Code failed: ${result.result}\n${run.stderr.slice(-2000)}`);
      assert.ok(result.result?.includes(FINAL_ANSWER), `final answer: ${result.result}`);
      assert.ok(result.result?.includes(rig.marker), `final answer lacks the file's marker: ${result.result}`);
      assert.equal(run.code, 0);
      // Claude Code reads each message's input tokens from message_start (a translated stream's is an estimate).
      const usage = lines.filter((l) => l.type === 'assistant').map((l) => l.message?.usage?.input_tokens ?? 0);
      assert.ok(usage.length > 0 && usage.every((n) => n > 0), `input_tokens per assistant message: ${usage}`);
      assertRoundTrip(rig, target, from, { limited: true });
    });
  }

  // Off Anthropic the count is the gateway's own estimate (a chat upstream has no count_tokens); a refusal would
  // leave Claude Code on its own guess without a word.
  for (const target of TARGETS) {
    test(`count_tokens for a long Read on ${target.model}`, async () => {
      const file = bigFile();
      const from = rig.upstream.requests.length;
      const logFrom = rig.gw.logs.length;
      const original = rig.upstream.file;
      rig.upstream.file = file;
      let result: StreamLine | undefined;
      try {
        const { run, lines } = await claude(target, prompt(file));
        result = lines.find((l) => l.type === 'result');
        assert.ok(result, `no result line (exit ${run.code}):\n${run.stdout.slice(-3000)}\n${run.stderr.slice(-2000)}`);
      } finally {
        rig.upstream.file = original;
      }
      assert.equal(result.is_error, false, `Claude Code failed: ${result.result}`);
      assert.ok(result.result?.includes(rig.marker), `final answer lacks the file's marker: ${result.result}`);
      const counts = accessLines(rig, logFrom).filter((l) =>
        l.path === '/v1/messages/count_tokens' && l.model === target.model
      );
      assert.ok(counts.length > 0, 'Claude Code asked no count_tokens');
      assert.deepEqual(counts.map((l) => l.status), counts.map(() => 200), JSON.stringify(counts));
      const upstreamCounts = received(rig, target, from).filter((r) => r.api === 'count_tokens');
      if (target.kind === 'anthropic') assert.ok(upstreamCounts.length > 0, 'Anthropic was not asked to count');
      else assert.equal(upstreamCounts.length, 0, 'a chat upstream was asked to count');
    });
  }

  // The compat vendor streams `reasoning_content`; Claude Code shows reasoning as `thinking` blocks.
  test('reasoning_content from compat-mock reaches Claude Code as thinking', async () => {
    const target = TARGETS.find((t) => t.kind === 'compat')!;
    const { run, lines } = await claude(target, prompt());
    const blocks = lines.filter((l) => l.type === 'assistant').flatMap((l) => l.message?.content ?? []);
    assert.ok(
      blocks.some((b) => b.type === 'thinking' && (b.thinking ?? '').length > 0),
      `no thinking block reached Claude Code; blocks: ${blocks.map((b) => b.type).join(', ')}\n${
        run.stderr.slice(-1000)
      }`,
    );
  });
});

// Codex (`@openai/codex`, `codex exec`) through a real Sluice process to each target: a custom provider on
// Sluice's /v1 with `wire_api = "responses"` (the only wire 0.171 takes) and `env_key`, a shell tool round trip
// that reads a file; native Responses on the OpenAI targets, translated through chat on the others
// (docs/translation.md "Tested clients").
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  accessLines,
  assertHighEffort,
  assertRoundTrip,
  CALLER_KEY,
  clientMatrix,
  runClient,
  type Target,
  TARGETS,
  tool,
} from '../support/client-matrix.ts';
import { FINAL_ANSWER, REASONING_TEXT } from '../support/scripted-upstream.ts';

const rig = clientMatrix();

/**
 * `codex exec` on `target` in a fresh CODEX_HOME whose config.toml names Sluice as a custom provider (`effort`:
 * its `model_reasoning_effort`).
 */
async function codex(target: Target, effort?: string) {
  const bin = tool('.bin/codex', '@openai/codex');
  const home = join(rig.dir, `codex-home-${target.model}-${effort ?? 'default'}`);
  mkdirSync(home, { recursive: true });
  writeFileSync(
    join(home, 'config.toml'),
    `model = "${target.model}"
model_provider = "sluice"
${effort ? `model_reasoning_effort = "${effort}"\n` : ''}
[model_providers.sluice]
name = "Sluice"
base_url = "${rig.gw.url('/v1')}"
env_key = "SLUICE_API_KEY"
wire_api = "responses"
`,
  );
  const last = join(home, 'last-message.txt');
  const run = await runClient(
    bin,
    [
      'exec',
      '--skip-git-repo-check',
      '--ephemeral',
      '--sandbox',
      'read-only',
      '--color',
      'never',
      '-C',
      rig.dir,
      '-o',
      last,
      `Print the file ${rig.upstream.file} with cat and tell me the secret word.`,
    ],
    { cwd: rig.dir, timeoutMs: 120_000, env: { HOME: home, CODEX_HOME: home, SLUICE_API_KEY: CALLER_KEY } },
  );
  let message = '';
  try {
    message = readFileSync(last, 'utf8');
  } catch {
    // no last message: the run failed, which the caller reports with its output
  }
  return { run, message };
}

/** The run reached its end with the file's marker in Codex's last message. */
function assertAnswered({ run, message }: Awaited<ReturnType<typeof codex>>): void {
  const out = `exit ${run.code}\nstdout: ${run.stdout.slice(-2000)}\nstderr: ${run.stderr.slice(-3000)}`;
  assert.ok(message.includes(FINAL_ANSWER), `Codex's last message: ${message}\n${out}`);
  assert.ok(message.includes(rig.marker), `Codex's last message lacks the file's marker: ${message}\n${out}`);
  assert.equal(run.code, 0, out);
}

describe('Codex 0.171.0 (codex exec, custom provider, wire_api = "responses")', () => {
  for (const target of TARGETS) {
    test(`shell round trip on ${target.model}`, async () => {
      const from = rig.upstream.requests.length;
      const logFrom = rig.gw.logs.length;
      assertAnswered(await codex(target));
      assertRoundTrip(rig, target, from);
      // Codex offers the hosted web_search and its multi_agent_v1 namespace: a translated target cannot run
      // them, so each answer names them (the access log's `dropped`, as `x-sluice-dropped`); OpenAI runs them.
      const lines = accessLines(rig, logFrom).filter((l) => l.path === '/v1/responses' && l.model === target.model);
      assert.ok(lines.length >= 2, `access-log lines: ${JSON.stringify(lines)}`);
      for (const l of lines) {
        if (target.kind === 'openai') assert.equal(l.dropped, undefined, JSON.stringify(l));
        else assert.match(String(l.dropped), /\bweb_search\b/, JSON.stringify(l));
      }
    });
  }

  // `model_reasoning_effort` is Responses' `reasoning.effort`: on a translated target it becomes the target's own
  // knob, and Claude's signed thinking goes back on the tool turn (Codex sends reasoning items whole). Codex
  // asks for reasoning summaries and shows only those by default: what the model reasoned is shown.
  for (const target of TARGETS.filter((t) => t.kind !== 'openai')) {
    test(`model_reasoning_effort = "high" on ${target.model}`, async () => {
      const from = rig.upstream.requests.length;
      const ran = await codex(target, 'high');
      assertAnswered(ran);
      assertRoundTrip(rig, target, from);
      assertHighEffort(rig, target, from);
      assert.ok(ran.run.stderr.includes(REASONING_TEXT), `no reasoning shown:\n${ran.run.stderr.slice(-2000)}`);
    });
  }
});

// The request pipeline's own contract (src/proxy/pipeline.ts, docs/architecture.md "A request"): the steps run
// in the documented order, a feature that is not configured is not in the list at all, the first refusal ends
// the run, and a feature built from the resources is built once per snapshot.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Context } from 'hono';
import { errors } from '../../src/http/errors.ts';
import type { ProxyEnv } from '../../src/proxy/env.ts';
import {
  type AnswerStep,
  buildPipeline,
  type CoreSteps,
  ModelCall,
  runModelCall,
  SnapshotPipelines,
  type Step,
  type StepName,
  type StepResult,
} from '../../src/proxy/pipeline.ts';
import { RequestRecord } from '../../src/proxy/record.ts';
import { routeOf, ROUTES, wireOf } from '../../src/proxy/routes.ts';
import type { ApiKey } from '../../src/resources/schema.ts';
import type { Snapshot } from '../../src/resources/snapshot.ts';

/** A step that appends its name to `ran` and answers `result` (synchronously unless `async`). */
function step(name: StepName, ran: string[], result?: () => StepResult, async = false): Step {
  return {
    name,
    run: () => {
      ran.push(name);
      const r = result?.();
      return async ? Promise.resolve(r) : r;
    },
  };
}

const ANSWER = new Response('answered');

/** The core steps, each noting its name in `ran`; dispatch answers `aborted`, respond `ANSWER`. */
function core(ran: string[]): CoreSteps {
  return {
    identify: step('identify', ran, undefined, true),
    readBody: step('read body', ran, undefined, true),
    admit: step('admit', ran),
    reserve: step('reserve', ran, undefined, true),
    answer: {
      dispatch: () => {
        ran.push('dispatch');
        return Promise.resolve({ kind: 'aborted' });
      },
      respond: () => {
        ran.push('respond');
        return ANSWER;
      },
      refuse: (_call, e) => {
        ran.push(`refuse ${e.status}`);
        return new Response('refused', { status: e.status });
      },
    },
  };
}

function answerStep(name: AnswerStep['name'], ran: string[]): AnswerStep {
  return {
    name,
    run: (_call, r) => {
      ran.push(name);
      return r;
    },
  };
}

const chat = routeOf('/v1/chat/completions')!;

function call(): ModelCall {
  if (chat.kind !== 'model-call') throw new Error('chat completions is a model call');
  const rec = new RequestRecord(0, 'POST', chat.path, 'req-1', undefined, undefined);
  // The steps under test never read the Hono context: an empty one is enough here.
  return new ModelCall({} as Context<ProxyEnv>, rec, chat);
}

describe('buildPipeline', () => {
  test('only the core steps after identify when no feature is configured: read body → admit → reserve', () => {
    const p = buildPipeline(core([]));
    assert.deepEqual(p.steps.map((s) => s.name), ['read body', 'admit', 'reserve']);
    assert.deepEqual(p.answerSteps, []);
  });

  test('every feature in its place', () => {
    const ran: string[] = [];
    // Handed over in no particular order: each is placed by its name.
    const p = buildPipeline(core(ran), [
      answerStep('responses store', ran),
      step('cache lookup', ran),
      answerStep('cache store', ran),
      step('policies', ran),
      step('input checks', ran),
      answerStep('output checks', ran),
      step('responses state', ran),
    ]);
    assert.deepEqual(p.steps.map((s) => s.name), [
      'read body',
      'admit',
      'responses state',
      'policies',
      'reserve',
      'input checks',
      'cache lookup',
    ]);
    assert.deepEqual(p.answerSteps.map((s) => s.name), ['output checks', 'cache store', 'responses store']);
  });

  test('an absent feature is not in the list', () => {
    const p = buildPipeline(core([]), [step('input checks', [])]);
    assert.deepEqual(p.steps.map((s) => s.name), ['read body', 'admit', 'reserve', 'input checks']);
    assert.equal(p.steps.some((s) => s.name === 'policies' || s.name === 'cache lookup'), false);
  });
});

describe('runModelCall', () => {
  test('every step in order, synchronous and asynchronous alike, then dispatch and the answer', async () => {
    const ran: string[] = [];
    const p = buildPipeline(core(ran), [step('policies', ran, undefined, true)]);
    assert.equal(await runModelCall(p, call()), ANSWER);
    assert.deepEqual(ran, ['read body', 'admit', 'policies', 'reserve', 'dispatch', 'respond']);
  });

  test('the first refusal ends the run, answered by `refuse`; later steps and dispatch do not run', async () => {
    const ran: string[] = [];
    const c = core(ran);
    c.admit = step('admit', ran, () => errors.unknownModel('nope'));
    const res = await runModelCall(buildPipeline(c), call());
    assert.equal(res.status, 404);
    assert.deepEqual(ran, ['read body', 'admit', 'refuse 404']);
  });

  test('a refusal or a throw of the input checks ends the permit the reservation took, before the answer', async () => {
    for (const outcome of ['refuse', 'throw'] as const) {
      const ran: string[] = [];
      const c = core(ran);
      c.reserve = {
        name: 'reserve',
        run: (call) => {
          ran.push('reserve');
          call.permit = { chargesTokens: false, end: () => Promise.resolve(void ran.push('permit end')) };
          return undefined;
        },
      };
      const inputChecks = step('input checks', ran, () => {
        if (outcome === 'throw') throw new Error('a scanner broke');
        return errors.modelNotAllowed('m');
      }, true);
      const p = buildPipeline(c, [inputChecks]);
      if (outcome === 'throw') await assert.rejects(runModelCall(p, call()), /a scanner broke/);
      else assert.equal((await runModelCall(p, call())).status, 403);
      const tail = outcome === 'throw' ? ['permit end'] : ['permit end', 'refuse 403'];
      assert.deepEqual(ran, ['read body', 'admit', 'reserve', 'input checks', ...tail], outcome);
    }
  });

  test('a step may answer itself (a cached answer): that response, no dispatch', async () => {
    const ran: string[] = [];
    const cached = new Response('{"cached":true}');
    const p = buildPipeline(core(ran), [step('cache lookup', ran, () => cached, true)]);
    assert.equal(await runModelCall(p, call()), cached);
    assert.deepEqual(ran, ['read body', 'admit', 'reserve', 'cache lookup']);
  });

  test('answer steps run in order on the dispatch result, before the answer', async () => {
    const ran: string[] = [];
    const p = buildPipeline(core(ran), [answerStep('cache store', ran), answerStep('output checks', ran)]);
    await runModelCall(p, call());
    assert.deepEqual(ran.slice(-4), ['dispatch', 'output checks', 'cache store', 'respond']);
  });
});

describe('SnapshotPipelines', () => {
  test("each snapshot's pipeline has the steps of the features it configures, built once, after identify", async () => {
    const withRules = {} as Snapshot; // opaque to the pipelines: only its identity matters
    const without = {} as Snapshot;
    const built: Snapshot[] = [];
    const ran: string[] = [];
    let serving = withRules;
    const c = core(ran);
    // identify serves the caller from the snapshot of the moment, as authenticateCaller does.
    c.identify = {
      name: 'identify',
      run: (call) => {
        ran.push('identify');
        call.caller = { key: { id: 'k' } as ApiKey, snapshot: serving };
        return undefined;
      },
    };
    const guard = (snapshot: Snapshot) => {
      built.push(snapshot);
      return snapshot === withRules ? [step('input checks', ran), answerStep('output checks', ran)] : undefined;
    };
    const cache = (snapshot: Snapshot) =>
      snapshot === withRules ? [step('cache lookup', ran, undefined, true)] : undefined;
    const p = new SnapshotPipelines(c, [guard, cache]);
    assert.equal(await p.run(call()), ANSWER);
    assert.deepEqual(ran, [
      'identify',
      'read body',
      'admit',
      'reserve',
      'input checks',
      'cache lookup',
      'dispatch',
      'output checks',
      'respond',
    ]);
    await p.run(call());
    assert.deepEqual(built, [withRules], 'built on the first request of the snapshot only');
    ran.length = 0;
    serving = without;
    await p.run(call());
    assert.deepEqual(ran, ['identify', 'read body', 'admit', 'reserve', 'dispatch', 'respond']);
    assert.equal(p.of(without).steps.length, 3, 'no feature step at all, not one that does nothing');
    serving = withRules;
    await p.run(call());
    assert.deepEqual(built, [withRules, without], 'an earlier snapshot keeps its pipeline');
  });

  test('a refusal by identify is answered by refuse; no pipeline is chosen', async () => {
    const ran: string[] = [];
    const c = core(ran);
    c.identify = step('identify', ran, () => errors.badRequest('no key'));
    let asked = 0;
    const p = new SnapshotPipelines(c, [() => {
      asked++;
      return undefined;
    }]);
    const res = await p.run(call());
    assert.equal(res.status, 400);
    assert.deepEqual(ran, ['identify', 'refuse 400']);
    assert.equal(asked, 0);
  });
});

describe('the route table', () => {
  test('one wire per path: Anthropic on /v1/messages, OpenAI elsewhere, unknown paths included', () => {
    assert.equal(wireOf('/v1/messages'), 'anthropic');
    assert.equal(wireOf('/v1/chat/completions'), 'openai');
    assert.equal(wireOf('/v1/nope'), 'openai');
    assert.equal(wireOf('/v1/responses'), 'openai');
    assert.equal(wireOf('/v1/messages/count_tokens'), 'anthropic');
    assert.deepEqual(ROUTES.filter((r) => r.inference).map((r) => r.path), [
      '/v1/chat/completions',
      '/v1/completions',
      '/v1/embeddings',
      '/v1/responses',
      '/v1/messages',
      '/v1/audio/speech',
      '/v1/audio/transcriptions',
      '/v1/audio/translations',
      '/v1/images/generations',
      '/v1/images/edits',
      '/v1/rerank',
      '/v1/videos',
      '/v1/videos/:id',
      '/v1/videos/:id/content',
      '/v1/realtime',
    ]);
  });

  test('each route names its kind of call, which chooses its handler', () => {
    assert.deepEqual(Object.fromEntries(ROUTES.map((r) => [r.path, r.kind])), {
      '/v1/chat/completions': 'model-call',
      '/v1/completions': 'model-call',
      '/v1/embeddings': 'model-call',
      '/v1/responses': 'model-call',
      '/v1/messages': 'model-call',
      '/v1/messages/count_tokens': 'model-call',
      '/v1/models': 'models-list',
      '/a2a/:agent': 'a2a-call',
      '/a2a/:agent/.well-known/agent-card.json': 'a2a-card',
      '/v1/audio/speech': 'model-call',
      '/v1/audio/transcriptions': 'model-call',
      '/v1/audio/translations': 'model-call',
      '/v1/images/generations': 'model-call',
      '/v1/images/edits': 'model-call',
      '/v1/rerank': 'model-call',
      '/mcp': 'mcp',
      '/mcp/': 'mcp',
      '/mcp/:server': 'mcp',
      '/v1/files': 'jobs',
      '/v1/files/:id': 'jobs',
      '/v1/files/:id/content': 'jobs',
      '/v1/batches': 'jobs',
      '/v1/batches/:id': 'jobs',
      '/v1/batches/:id/cancel': 'jobs',
      '/v1/fine_tuning/jobs': 'jobs',
      '/v1/fine_tuning/jobs/:id': 'jobs',
      '/v1/fine_tuning/jobs/:id/cancel': 'jobs',
      '/v1/videos': 'videos',
      '/v1/videos/:id': 'videos',
      '/v1/videos/:id/content': 'videos',
      '/v1/realtime': 'realtime',
    });
    assert.deepEqual(ROUTES.filter((r) => r.streams).map((r) => r.call), [
      'chat',
      'completions',
      'responses',
      'messages',
    ]);
  });

  test('the record labels a request by its route', () => {
    const a = new RequestRecord(0, 'POST', '/v1/messages', 'r', undefined, undefined);
    assert.equal(a.endpoint, '/v1/messages');
    assert.equal(a.protocol, 'anthropic');
    const b = new RequestRecord(0, 'GET', '/v1/unknown', 'r', undefined, undefined);
    assert.equal(b.endpoint, 'other');
    assert.equal(b.protocol, 'openai');
    // A path with parameters is labelled by its family, AISIX's `/a2a`, with its own inbound protocol.
    const c = new RequestRecord(0, 'POST', '/a2a/some-agent', 'r', undefined, undefined);
    assert.equal(c.endpoint, '/a2a');
    assert.equal(c.inbound, 'a2a');
    assert.equal(c.protocol, 'openai');
    assert.equal(c.traceOutcome(200).operation, 'invoke_agent', 'an A2A call is traced as an agent invocation');
    assert.equal(new RequestRecord(0, 'POST', '/a2a/x/y', 'r', undefined, undefined).endpoint, 'other');
  });
});

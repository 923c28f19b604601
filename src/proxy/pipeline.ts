// The request pipeline: the ordered steps every model call passes (docs/architecture.md "A request").
//
//   [tracking: in-flight slot, request id, the record]                    track.ts
//   identify → read body → admit → (responses state) → (policies) → reserve → (input checks) → (cache lookup)
//   → dispatch with its attempts → (output checks) → (cache store) → (responses store) → answer
//   → when the last byte is out: usage commit → [telemetry: metrics, access log]   answer.ts, track.ts
//
// Steps in parentheses are features: each is in the list only when it is configured, so an absent one costs
// nothing per request. The order is data, in one place (`STEP_ORDER`). A feature whose rules come from the
// resources (guardrails, cache policies) is a `SnapshotFeature`: its steps are built once per snapshot, and a
// snapshot without its rules gets a pipeline without them (`SnapshotPipelines`). Every write to the request's
// record goes through `RequestRecord` (record.ts), a feature's own fields through its facet (record-facet.ts).
import type { Context } from 'hono';
import { ProxyError } from '../http/errors.ts';
import type { FormPart } from '../providers/form.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { Permit } from '../routing/rate-limit.ts';
import type { DispatchResult } from '../routing/dispatch.ts';
import type { CallState } from './call-state.ts';
import type { ProxyEnv } from './env.ts';
import type { RequestRecord } from './record.ts';
import { ProxyRequest } from './request.ts';
import type { ModelCallRoute } from './routes.ts';

export type ResolvedModel = NonNullable<ReturnType<Snapshot['resolveModel']>>;

/**
 * One model call as it passes the steps: a request (request.ts: the context, the record, the slots, the caller)
 * and what the model call's own steps set. Each field is set by the step its comment names, before any later
 * step reads it (the order is `STEP_ORDER`'s).
 */
export class ModelCall extends ProxyRequest {
  /** read body; a multipart route's text fields (`form` has every part) */
  body!: Record<string, unknown>;
  /** read body: a multipart route's parts (media.ts `mediaBodyStep`) */
  form: readonly FormPart[] | undefined = undefined;
  /** admit */
  resolved!: ResolvedModel;
  /** admit: the caller's address under `proxy.real_ip` (for `allowed_cidrs` and `hash_on: client_ip`). */
  clientIp: string | undefined = undefined;
  /** reserve */
  permit!: Permit;
  /** reserve: the caller-facing `x-ratelimit-*` headers of the limits that apply. */
  limitHeaders: Record<string, string> | undefined = undefined;

  constructor(c: Context<ProxyEnv>, rec: RequestRecord, readonly route: ModelCallRoute, state?: CallState) {
    super(c, rec, state);
  }
}

/** What a step before dispatch decides: go on (undefined), refuse (the caller's error), or answer here. */
export type StepResult = ProxyError | Response | undefined;

/**
 * The steps before dispatch, in their order: the one place the order is written. A feature adds its entry here
 * (its step's name then type-checks) and hands its step to the pipeline; a step not configured is left out.
 */
export const STEP_ORDER = [
  { name: 'identify' },
  { name: 'read body' },
  { name: 'admit' },
  // `/v1/responses`: the stored state a request refers to put in its body (responses-state.ts).
  { name: 'responses state' },
  // Admission policies beyond the built-in checks: rate-limit policies (policies.ts).
  { name: 'policies' },
  // The reservation before the input checks (AISIX reserves after them): a caller over its limit is refused
  // before it costs a remote guardrail call or a scan (docs/security.md "Limits before paid work").
  { name: 'reserve' },
  // Spend budgets (budgets.ts; docs/budgets.md): the call's most expensive outcome reserved, charged at its end.
  { name: 'budget', endsPermitOnRefusal: true },
  // Checks of the request before it is sent: guardrails (guardrails.ts).
  { name: 'input checks', endsPermitOnRefusal: true },
  // An answer from the response cache instead of a dispatch (cache-steps.ts). After the reservation (AISIX): a
  // cached answer has taken its request slots.
  { name: 'cache lookup' },
] as const satisfies readonly StepEntry[];

/**
 * The steps on the dispatch result, in their order: the answer's guardrail checks, keeping it in the response
 * cache, keeping a translated `/v1/responses` answer for later requests to refer to.
 */
export const ANSWER_STEP_ORDER = ['output checks', 'cache store', 'responses store'] as const;

interface StepEntry {
  readonly name: string;
  /** A step after the reservation whose refusal or throw ends the permit first (`releasingOnRefusal`). */
  readonly endsPermitOnRefusal?: boolean;
}

export type StepName = (typeof STEP_ORDER)[number]['name'];
export type AnswerStepName = (typeof ANSWER_STEP_ORDER)[number];

/** A step before dispatch. A synchronous step returns its result directly (no promise turn). */
export interface Step {
  readonly name: StepName;
  run(call: ModelCall): StepResult | Promise<StepResult>;
}

/** A step that needs only the request, not a model call (`identify`): any kind of route can run it. */
export interface RequestStep extends Step {
  run(req: ProxyRequest): StepResult | Promise<StepResult>;
}

/** A step on the dispatch result (a whole answer or a stream): it may pass it on or return another. */
export interface AnswerStep {
  readonly name: AnswerStepName;
  run(call: ModelCall, result: DispatchResult): DispatchResult | Promise<DispatchResult>;
}

/** Dispatch and the caller's answer: answer.ts's `Answerer`. */
export interface Answering {
  /** Dispatch with its attempts. */
  dispatch(call: ModelCall): Promise<DispatchResult>;
  /** The answer in the caller's wire; the usage commit when its last byte is out. */
  respond(call: ModelCall, result: DispatchResult): Response | Promise<Response>;
  /** A step's refusal, recorded and answered in the caller's wire. */
  refuse(call: ModelCall, e: ProxyError): Response;
}

/** The steps every model call has. */
export interface CoreSteps {
  identify: RequestStep;
  readBody: Step;
  admit: Step;
  reserve: Step;
  answer: Answering;
}

/**
 * A feature's steps, each placed by its name (`STEP_ORDER`, `ANSWER_STEP_ORDER`); on a clash of names the
 * later step wins.
 */
export type FeatureSteps = readonly (Step | AnswerStep)[];

/** The pipeline of one snapshot: what runs after `identify`, which chose it (`SnapshotPipelines`). */
export interface Pipeline {
  /** Before dispatch, after `identify`, in order. */
  readonly steps: readonly Step[];
  /** On the dispatch result, in order. */
  readonly answerSteps: readonly AnswerStep[];
  readonly answer: Answering;
}

/**
 * The pipeline after `identify` in the order of `STEP_ORDER`, without the steps not configured (`identify`
 * ran before: it chose the snapshot, and so the pipeline).
 */
export function buildPipeline(core: CoreSteps, features: FeatureSteps = []): Pipeline {
  const byName = new Map<string, Step | AnswerStep>();
  for (const s of [core.readBody, core.admit, core.reserve, ...features]) byName.set(s.name, s);
  const steps: Step[] = [];
  for (const entry of STEP_ORDER as readonly StepEntry[]) {
    const s = byName.get(entry.name) as Step | undefined;
    if (s) steps.push(entry.endsPermitOnRefusal ? releasingOnRefusal(s) : s);
  }
  const answerSteps: AnswerStep[] = [];
  for (const name of ANSWER_STEP_ORDER) {
    const s = byName.get(name) as AnswerStep | undefined;
    if (s) answerSteps.push(s);
  }
  return { steps, answerSteps, answer: core.answer };
}

/**
 * A step after the reservation whose refusal (or throw) ends the call: the permit is ended first, so the
 * concurrency slots are free and no tokens are charged; the request counts stay taken.
 */
function releasingOnRefusal(step: Step): Step {
  const refused = (call: ModelCall, r: StepResult): StepResult | Promise<StepResult> =>
    r instanceof ProxyError ? call.permit.end().then(() => r) : r;
  const threw = (call: ModelCall, e: unknown): never => {
    void call.permit.end();
    throw e;
  };
  return {
    name: step.name,
    run(call) {
      let r: StepResult | Promise<StepResult>;
      try {
        r = step.run(call);
      } catch (e) {
        return threw(call, e);
      }
      return r instanceof Promise ? r.then((v) => refused(call, v), (e) => threw(call, e)) : refused(call, r);
    },
  };
}

/**
 * One identified model call through its pipeline: the steps before dispatch in order until one refuses or
 * answers, then dispatch, the answer steps, and the answer.
 */
export async function runModelCall(p: Pipeline, call: ModelCall): Promise<Response> {
  const steps = p.steps;
  const answer = p.answer;
  for (let i = 0; i < steps.length; i++) {
    let r = steps[i]!.run(call);
    if (r instanceof Promise) r = await r;
    if (r !== undefined) return r instanceof ProxyError ? answer.refuse(call, r) : r;
  }
  let result = await answer.dispatch(call);
  for (let i = 0; i < p.answerSteps.length; i++) {
    const r = p.answerSteps[i]!.run(call, result);
    result = r instanceof Promise ? await r : r;
  }
  return answer.respond(call, result);
}

/**
 * A feature whose rules come from the resources (guardrails bound to models, cache policies): its steps for
 * one snapshot, or undefined when the snapshot has none of its rules. Called once per snapshot.
 */
export type SnapshotFeature = (snapshot: Snapshot) => FeatureSteps | undefined;

/**
 * The pipelines of a proxy app, one per snapshot: the core steps and the steps of each feature the snapshot
 * configures, so a snapshot without guardrails or cache policies runs none of their code. The pipeline is
 * chosen by the snapshot `identify` served the caller from; built on that snapshot's first request.
 */
export class SnapshotPipelines {
  private readonly built = new WeakMap<Snapshot, Pipeline>();
  /** The last snapshot seen and its pipeline: on all but a snapshot's first requests, one comparison. */
  private last: { snapshot: Snapshot; pipeline: Pipeline } | undefined = undefined;

  constructor(private readonly core: CoreSteps, private readonly features: readonly SnapshotFeature[]) {}

  /** The pipeline of `snapshot`; each feature's steps are its own (a later feature's win on a clash). */
  of(snapshot: Snapshot): Pipeline {
    const last = this.last;
    if (last !== undefined && last.snapshot === snapshot) return last.pipeline;
    let pipeline = this.built.get(snapshot);
    if (!pipeline) {
      pipeline = buildPipeline(this.core, this.features.flatMap((f) => f(snapshot) ?? []));
      this.built.set(snapshot, pipeline);
    }
    this.last = { snapshot, pipeline };
    return pipeline;
  }

  /**
   * One model call: `identify`, then the rest of its snapshot's pipeline. Not an async function: when `identify`
   * decides at once, the pipeline's own promise is the call's, without a frame and a turn wrapped around it.
   */
  run(call: ModelCall): Promise<Response> {
    try {
      const r = this.core.identify.run(call);
      return r instanceof Promise ? r.then((v) => this.identified(call, v)) : this.identified(call, r);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  private identified(call: ModelCall, r: StepResult): Promise<Response> {
    if (r !== undefined) return Promise.resolve(r instanceof ProxyError ? this.core.answer.refuse(call, r) : r);
    return runModelCall(this.of(call.caller.snapshot), call);
  }
}

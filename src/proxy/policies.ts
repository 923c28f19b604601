// The pipeline's `policies` step (pipeline.ts; docs/rate-limit-policies.md): the buckets of the policies the
// call meets at the request gate, for `reserve` to take with the key's and the model's. Built per snapshot: a
// snapshot without policies gives the step nothing to run.
import { requestGateSubjects } from '../policies/reserve.ts';
import type { Clock } from '../util/clock.ts';
import { perSnapshot, type Step } from './pipeline.ts';

export function policiesStep(clock: Clock): Step {
  const gate: Step = {
    name: 'policies',
    run(call) {
      const subjects = requestGateSubjects(call.caller.snapshot, call.caller.key, call.resolved.model, clock());
      if (subjects.length > 0) call.policySubjects = subjects;
      return undefined;
    },
  };
  const none: readonly Step[] = [];
  return perSnapshot('policies', (snapshot) => (snapshot.policies.length > 0 ? [gate] : none));
}

// The pipeline's `policies` step (src/proxy/pipeline.ts; docs/rate-limit-policies.md): the buckets of the
// policies the call meets at the request gate, for `reserve` to take with the key's and the model's. Only in
// the pipeline of a snapshot that has policies.
import type { Step } from '../proxy/pipeline.ts';
import type { Clock } from '../util/clock.ts';
import { requestGateSubjects } from './reserve.ts';

export function policiesStep(clock: Clock): Step {
  return {
    name: 'policies',
    run(call) {
      const subjects = requestGateSubjects(call.caller.snapshot, call.caller.key, call.resolved.model, clock());
      if (subjects.length > 0) call.policySubjects = subjects;
      return undefined;
    },
  };
}

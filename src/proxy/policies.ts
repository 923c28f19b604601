// The pipeline's `policies` step (pipeline.ts; docs/rate-limit-policies.md): the buckets of the policies the
// call meets at the request gate, for `reserve` to take with the key's and the model's. A snapshot feature: a
// snapshot without policies has no such step in its pipeline.
import { requestGateSubjects } from '../policies/reserve.ts';
import type { Clock } from '../util/clock.ts';
import { EXTRA_SUBJECTS } from './admission.ts';
import type { SnapshotFeature, Step } from './pipeline.ts';

export function policiesStep(clock: Clock): SnapshotFeature {
  const gate: Step = {
    name: 'policies',
    run(call) {
      const subjects = requestGateSubjects(call.caller.snapshot, call.caller.key, call.resolved.model, clock());
      if (subjects.length > 0) call.state.set(EXTRA_SUBJECTS, subjects);
      return undefined;
    },
  };
  return (snapshot) => (snapshot.policies.length > 0 ? [gate] : undefined);
}

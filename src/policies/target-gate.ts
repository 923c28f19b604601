// A routing model's targets' own limits for one request (docs/routing.md "Members' own limits"): reserved
// before each attempt on a target; a refused target is skipped without a call; only the target that answers
// keeps its reservation into the usage commit, charged with the answer's tokens. A failed attempt's
// reservation keeps its request count and gets no tokens.
import type { ApiKey, DirectModel, RoutingModel } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { TargetReservation } from '../routing/dispatch-types.ts';
import type { Permit, RateLimitDecision, RateLimiter, RejectionKind } from '../routing/rate-limit.ts';
import type { Clock } from '../util/clock.ts';
import { targetGateSubjects } from './reserve.ts';

const OK: TargetReservation = { ok: true };

/** AISIX's limiter wording (aisix-ratelimit `error.rs`). */
export function limiterMessage(kind: RejectionKind): string {
  if (kind === 'concurrency') return 'concurrency limit exceeded';
  return kind === 'tokens' ? 'token limit exceeded (tokens)' : 'request limit exceeded (requests)';
}

export class TargetLimits {
  private held: Permit | undefined;

  constructor(
    private readonly limiter: Pick<RateLimiter, 'acquire'>,
    private readonly snapshot: Snapshot,
    private readonly key: ApiKey,
    private readonly group: RoutingModel,
    private readonly clock: Clock,
  ) {}

  /** Reserve `target`'s own limits for the next attempt; the previous attempt (a failure) lets its go. */
  readonly reserve = async (target: DirectModel): Promise<TargetReservation> => {
    if (this.held) void this.held.end();
    this.held = undefined;
    const subjects = targetGateSubjects(this.snapshot, this.key, target, this.group, this.clock());
    if (subjects.length === 0) return OK;
    const d = await this.limiter.acquire(subjects);
    if (!d.allowed) return refusal(target, d);
    this.held = d.permit;
    return OK;
  };

  /** `base` (the request's permit) together with the answering target's. */
  with(base: Permit): Permit {
    return new JoinedPermit(base, this);
  }

  /** The answering target's permit, taken: the joined permit's `end` ends it once. */
  takeHeld(): Permit | undefined {
    const h = this.held;
    this.held = undefined;
    return h;
  }

  /** Whether the answering target's permit wants the answer's tokens. */
  get heldChargesTokens(): boolean {
    return this.held?.chargesTokens ?? false;
  }
}

/**
 * The request's permit and its answering target's, ended together. A class: an object literal with a getter is
 * made in dictionary mode, and what its getter reached (the whole call) outlived every young collection until a
 * full one (docs/performance.md "Budgets on the request path").
 */
class JoinedPermit implements Permit {
  constructor(private readonly base: Permit, private readonly limits: TargetLimits) {}

  get chargesTokens(): boolean {
    return this.base.chargesTokens || this.limits.heldChargesTokens;
  }

  async end(tokens?: number): Promise<void> {
    await Promise.all([this.base.end(tokens), this.limits.takeHeld()?.end(tokens)]);
  }
}

function refusal(target: DirectModel, d: Extract<RateLimitDecision, { allowed: false }>): TargetReservation {
  const words = limiterMessage(d.kind);
  const byPolicy = d.scope === 'policy';
  return {
    ok: false,
    retryAfterSecs: d.retryAfterSecs,
    byPolicy,
    message: byPolicy
      ? `${words} (policy '${d.name ?? d.id}')`
      : `routing target "${target.display_name}" is over its model rate limit: ${words}`,
  };
}

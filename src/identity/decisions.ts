// `aisix_auth_decisions_total{method,result,reason}` (docs/identity.md "Metrics and logs"): one sample per
// credential judgement, on the api-key path and the JWT path alike. A series exists once its decision happened.
import { Counter, type Registry } from '../observability/metrics.ts';
import type { BoundCounter } from '../observability/metrics.ts';

export type AuthMethod = 'api_key' | 'jwt' | 'none';

export class AuthDecisions {
  private readonly family: Counter;
  /** `method` + reason → its bound series, so a judgement after the first finds it without a lookup by labels. */
  private readonly bound = new Map<string, BoundCounter>();

  constructor(registry: Registry) {
    this.family = registry.register(
      new Counter(
        'aisix_auth_decisions_total',
        'Caller credential judgements, by method (api_key, jwt, none), result (allowed, denied) and reason.',
        ['method', 'result', 'reason'],
      ),
    );
  }

  allowed(method: AuthMethod): void {
    this.series(method, 'none').inc();
  }

  denied(method: AuthMethod, reason: string): void {
    this.series(method, reason).inc();
  }

  private series(method: AuthMethod, reason: string): BoundCounter {
    const k = `${method} ${reason}`;
    let s = this.bound.get(k);
    if (!s) {
      s = this.family.bind([method, reason === 'none' ? 'allowed' : 'denied', reason]);
      this.bound.set(k, s);
    }
    return s;
  }
}

const byRegistry = new WeakMap<Registry, AuthDecisions>();

/** The registry's auth-decision family, registered on first use. */
export function authDecisionsFor(registry: Registry): AuthDecisions {
  let d = byRegistry.get(registry);
  if (!d) {
    d = new AuthDecisions(registry);
    byRegistry.set(registry, d);
  }
  return d;
}

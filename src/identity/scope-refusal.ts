// A JWT refused for lacking its provider's `required_scopes` (docs/identity.md "Errors"): on the wire the same
// 403 `jwt_claims_rejected` as a bound-claim refusal, but it names the scopes, so `/mcp` can answer with AISIX's
// `insufficient_scope` challenge (docs/mcp.md "Inbound authentication").
import { errors, ProxyError } from '../http/errors.ts';

export class ScopeRefusal extends ProxyError {
  constructor(
    /** The provider's `required_scopes`, in its order. */
    readonly requiredScopes: readonly string[],
  ) {
    const e = errors.jwtClaimsRejected();
    super(e.status, e.type, e.message, e.code);
  }
}

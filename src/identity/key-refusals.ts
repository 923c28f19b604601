// The log lines of a refused credential on the api-key path (docs/identity.md "Metrics and logs"), AISIX's:
// a missing credential and an unknown key are what any scanner produces, so DEBUG; a disabled or expired key
// is a real caller the operator configured, so WARN with its id. Never the token.
import type { Logger } from '../observability/logger.ts';
import type { RequestContext } from './authenticate.ts';

export type KeyRefusal = 'missing_credentials' | 'unknown_key' | 'key_disabled' | 'key_expired';

/** The line of one refusal; `apiKeyId` names the refused key where there is one. */
export function logKeyRefusal(log: Logger, reason: KeyRefusal, ctx: RequestContext, apiKeyId?: string): void {
  const fields = {
    method: reason === 'missing_credentials' ? 'none' : 'api_key',
    reason,
    http_method: ctx.method,
    path: ctx.path,
    request_id: ctx.requestId,
    source_ip: ctx.sourceIp?.(),
  };
  if (reason === 'missing_credentials') log.debug('rejected inbound request without a credential', fields);
  else if (reason === 'unknown_key' || apiKeyId === undefined) log.debug('rejected inbound credential', fields);
  else log.warn('rejected inbound credential', { ...fields, api_key_id: apiKeyId });
}

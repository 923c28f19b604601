// Where a Realtime session goes and with which credential (docs/realtime.md "Upstream"): the provider key's,
// never the caller's; nothing else of the caller's request (no subprotocols, query or headers) is sent.
import { errors, type ProxyError } from '../http/errors.ts';
import { directBase, directUrl } from '../providers/direct-url.ts';
import type { DirectModel, ProviderKey } from '../resources/schema.ts';
import { defaultAdapter } from '../resources/schema.ts';

/** AISIX's Azure Realtime API version. */
export const AZURE_REALTIME_API_VERSION = '2024-10-01-preview';

export interface RealtimeTarget {
  url: string;
  headers: Record<string, string>;
}

/**
 * OpenAI: `<direct base>/realtime?model=<model_name>` on ws(s), `Authorization: Bearer`. No `OpenAI-Beta`
 * header: OpenAI closes a session opened with `realtime=v1` since the beta interface was retired (AISIX
 * still sends it). Azure: AISIX's deployment URL with `api-key`.
 */
export function upstreamTarget(key: ProviderKey, model: DirectModel): RealtimeTarget | ProxyError {
  const adapter = key.adapter ?? defaultAdapter(key.provider ?? '');
  const secret = key.api_key ?? '';
  if (adapter === 'openai') {
    const base = directBase(key.provider ?? '', key.api_base ?? undefined);
    if (!base) {
      return errors.badRequest(
        `request payload is invalid: provider_key "${key.display_name}" has no api_base configured`,
      );
    }
    const url = wsUrl(directUrl(base, '/realtime'));
    if (!url) return noScheme(base);
    return {
      url: `${url}?model=${encodeURIComponent(model.model_name)}`,
      headers: { authorization: `Bearer ${secret}` },
    };
  }
  if (adapter === 'azure-openai') {
    const base = (key.api_base ?? '').trim().replace(/\/+$/, '');
    const url = wsUrl(base);
    if (!url) return noScheme(base);
    const q = `api-version=${AZURE_REALTIME_API_VERSION}&deployment=${encodeURIComponent(model.model_name)}`;
    return { url: `${url}/openai/realtime?${q}`, headers: { 'api-key': secret } };
  }
  return errors.badRequest(
    `request payload is invalid: model "${model.display_name}" uses provider "${
      key.provider || adapter
    }" which does not speak the OpenAI Realtime protocol; /v1/realtime supports OpenAI-compatible and Azure OpenAI providers`,
  );
}

function wsUrl(http: string): string | undefined {
  if (http.startsWith('https://')) return `wss://${http.slice(8)}`;
  if (http.startsWith('http://')) return `ws://${http.slice(7)}`;
  return undefined;
}

function noScheme(base: string): ProxyError {
  return errors.badRequest(`request payload is invalid: api_base "${base}" has no http(s) scheme`);
}

// Where a Realtime session goes and with which credential (docs/realtime.md "Upstream"): the provider key's,
// never the caller's; nothing else of the caller's request (no subprotocols, query or headers) is sent but its own
// opt-in to the beta event shape.
import { errors, type ProxyError } from '../http/errors.ts';
import { directBase, directUrl } from '../providers/direct-url.ts';
import { segmentProblem } from '../providers/url-segment.ts';
import type { DirectModel, ProviderKey } from '../resources/schema.ts';
import { defaultAdapter } from '../resources/schema.ts';

/** AISIX's Azure Realtime API version. */
export const AZURE_REALTIME_API_VERSION = '2024-10-01-preview';

export interface RealtimeTarget {
  url: string;
  headers: Record<string, string>;
}

/** The header by which a caller opts into the retired beta event shape, and its subprotocol spelling. */
export const BETA_HEADER = 'openai-beta';
const BETA_PROTOCOL = 'openai-beta.realtime-v1';

/**
 * Whether the caller asked for the beta Realtime shape (`OpenAI-Beta: realtime=v1`, or the browser's subprotocol
 * `openai-beta.realtime-v1`): the beta and GA event vocabularies differ, so the opt-in is the caller's to make.
 */
export function callerWantsBeta(headers: Headers, offered: readonly string[]): boolean {
  if ((headers.get(BETA_HEADER) ?? '').toLowerCase().includes('realtime=v1')) return true;
  return offered.some((p) => p.toLowerCase() === BETA_PROTOCOL);
}

/** Any id without white space: the checks that matter are `segmentProblem`'s (`\`, `..`, escapes). */
const UPSTREAM_ID = /^\S+$/;

/**
 * OpenAI: `<direct base>/realtime?model=<upstream model>` on ws(s), `Authorization: Bearer`, and
 * `OpenAI-Beta: realtime=v1` only when the caller asked for the beta shape (`beta`). Azure: AISIX's deployment
 * URL with `api-key`. The upstream model (`model_name`, or the caller's name through a wildcard alias) travels
 * encoded in the query, yet one that a server decoding it into a path would read as a step (`\`, `..`, an
 * escaped `.`, `/` or `\`) is refused before anything is sent.
 */
export function upstreamTarget(
  key: ProviderKey,
  model: DirectModel,
  upstreamModel: string,
  beta = false,
): RealtimeTarget | ProxyError {
  const problem = segmentProblem(upstreamModel, UPSTREAM_ID);
  if (problem) {
    return errors.badRequest(
      `request payload is invalid: \`model\` query parameter names the upstream model ${
        JSON.stringify(upstreamModel)
      }, which ${problem}`,
    );
  }
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
      url: `${url}?model=${encodeURIComponent(upstreamModel)}`,
      // Only the caller's own opt-in (AISIX's now): OpenAI's GA endpoint closes a beta session with 4000.
      headers: beta
        ? { authorization: `Bearer ${secret}`, [BETA_HEADER]: 'realtime=v1' }
        : { authorization: `Bearer ${secret}` },
    };
  }
  if (adapter === 'azure-openai') {
    const base = (key.api_base ?? '').trim().replace(/\/+$/, '');
    const url = wsUrl(base);
    if (!url) return noScheme(base);
    const q = `api-version=${AZURE_REALTIME_API_VERSION}&deployment=${encodeURIComponent(upstreamModel)}`;
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

// Which model row and provider key a files, batches or fine-tuning call goes through
// (docs/batch-files-endpoints.md "Model selection"): the model a routed id names, else the one the call names,
// else the first model the caller may use whose key speaks OpenAI's or Azure OpenAI's files API.
import { errors, ProxyError } from '../http/errors.ts';
import type { DirectModel, ProviderKey } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { ipAllowed } from '../util/cidr.ts';

export interface JobTarget {
  readonly model: DirectModel;
  readonly key: ProviderKey;
  readonly adapter: 'openai' | 'azure-openai';
  readonly secret: string;
}

function supported(key: ProviderKey | undefined): 'openai' | 'azure-openai' | undefined {
  return key?.adapter === 'openai' || key?.adapter === 'azure-openai' ? key.adapter : undefined;
}

/** The routing hint a call names outside its body: `?model=`, then the `x-aisix-model` header. */
export function explicitModel(url: URL, headers: Headers): string | undefined {
  const q = url.searchParams.get('model')?.trim();
  if (q) return q;
  const h = headers.get('x-aisix-model')?.trim();
  return h ? h : undefined;
}

/**
 * The target of a call naming `wanted` (or none). Permission comes before existence, as on every Sluice route:
 * a key learns no model name it may not use.
 */
export function resolveJobTarget(
  snapshot: Snapshot,
  /** Whether the caller's key may use a model name (`allowed_models`). */
  may: (name: string) => boolean,
  wanted: string | undefined,
  clientIp: string | undefined,
): JobTarget | ProxyError {
  let model: DirectModel;
  if (wanted !== undefined) {
    if (!may(wanted)) return errors.modelNotAllowed(wanted);
    const found = snapshot.resolveModel(wanted)?.model;
    if (!found) return errors.unknownModel(wanted);
    if (found.kind !== 'direct') {
      return errors.badRequest(
        `request payload is invalid: model "${wanted}" is a virtual router; files/batches/fine-tuning requests must route to a direct model`,
      );
    }
    model = found;
  } else {
    const first = snapshot.listableModels().find((m): m is DirectModel =>
      m.kind === 'direct' && !m.display_name.includes('*') && may(m.display_name) &&
      supported(snapshot.providerKeys.get(m.provider_key_id)) !== undefined
    );
    if (!first) {
      return errors.badRequest(
        'request payload is invalid: no model specified and no accessible OpenAI-compatible model found; pass `model` (query/header/form field) to select the routing model',
      );
    }
    model = first;
  }
  if (!ipAllowed(model.allowed_cidrs, clientIp)) return errors.ipRestricted();
  const key = snapshot.providerKeys.get(model.provider_key_id);
  const adapter = supported(key);
  if (!key || !adapter) {
    return errors.badRequest(
      `request payload is invalid: model "${model.display_name}" uses provider "${
        key?.provider ?? ''
      }" which is not supported on the files/batches/fine-tuning surface yet (supported: OpenAI-compatible, Azure OpenAI)`,
    );
  }
  if (key.api_key === undefined) {
    return new ProxyError(503, 'provider_unavailable', `provider_key "${key.display_name}" has no api_key`);
  }
  return { model, key, adapter, secret: key.api_key };
}

// The background model check itself (docs/routing.md "Model health"): one small real chat request through
// the model's own adapter, so it exercises the key, base URL and wire caller traffic uses. Checks are not
// caller traffic and feed no request metrics.
import type { UpstreamFetch } from '../platform.ts';
import { callProvider } from '../providers/call.ts';
import { adapterFor } from '../providers/index.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import type { ModelCheck, Timers } from './background.ts';

export function modelCheck(deps: { snapshot: () => Snapshot | undefined; upstream: UpstreamFetch }): ModelCheck {
  return async (model, signal) => {
    const key = deps.snapshot()?.providerKeys.get(model.provider_key_id);
    const adapter = key ? adapterFor(key.adapter) : undefined;
    if (!key || !adapter) return { error: 'the model has no usable provider key' };
    const check = model.background_model_check!;
    const r = await callProvider(adapter, {
      endpoint: 'chat',
      body: {
        model: model.model_name,
        messages: [{ role: 'user', content: check.prompt }],
        max_tokens: check.max_tokens,
      },
      stream: false,
      key,
      model,
      upstream: deps.upstream,
      signal,
    });
    if (r.kind === 'stream') {
      await r.cancel();
      return { status: 200 };
    }
    return { status: r.kind === 'refused' ? 400 : r.status };
  };
}

/**
 * Global timers that do not keep a process alive on their own where the runtime can say so (`unref`):
 * the listeners do that, and a stopped gateway must be able to exit.
 */
export const backgroundTimers: Timers = {
  setTimeout: (fn, ms) => {
    const handle = setTimeout(fn, ms);
    (handle as { unref?: () => void }).unref?.();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

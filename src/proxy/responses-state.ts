// The Responses state's two pipeline steps (pipeline.ts; docs/routing.md "Responses state"): "responses state"
// puts what the caller key's store holds for `previous_response_id` and `item_reference` into the body, after
// admission and before the policies, limits, checks and dispatch read it; "responses store" keeps a translated
// answer (`store` not false) once its last byte is out, off the caller's path. A request that refers to no
// state and asks `store: false` touches no store.
import { ProxyError } from '../http/errors.ts';
import { adapterFor } from '../providers/index.ts';
import { servesResponsesNatively } from '../providers/translate/via-chat.ts';
import { contextItems, refersToState, resolveState, TerminalEventReader } from '../responses/state.ts';
import type { Item, ResponsesStore } from '../responses/store.ts';
import type { DirectModel, ProviderKey } from '../resources/schema.ts';
import type { ServedBy } from '../routing/dispatch-types.ts';
import type { AnswerStep, FeatureSteps, ModelCall, Step } from './pipeline.ts';

export function responsesStateSteps(store: ResponsesStore): FeatureSteps {
  const responsesState: Step = {
    name: 'responses state',
    run(call) {
      if (call.route.call !== 'responses' || !refersToState(call.body)) return undefined;
      const owner = store.owner(call.caller.key.id);
      return resolveState(call.body, {
        response: (id) => store.response(owner, id),
        item: (id) => store.item(owner, id),
      }).then((body) => {
        call.body = body;
        // A miss while the store fails is no "unknown id": on a model whose every target translates, say so.
        if (store.failing && refersToState(body) && translated(call, undefined)) return storeDown();
        return undefined;
      });
    },
  };
  const responsesStore: AnswerStep = {
    name: 'responses store',
    run(call, result) {
      if (call.route.call !== 'responses' || call.body.store === false) return result;
      if (result.kind === 'response' && result.status < 300 && translated(call, result.served)) {
        const body = result.body;
        void Promise.resolve().then(() => keep(store, call, parseObject(body)));
      } else if (result.kind === 'stream' && translated(call, result.served)) {
        return { ...result, chunks: watched(result.chunks, (response) => keep(store, call, response)) };
      }
      return result;
    },
  };
  return [responsesState, responsesStore];
}

/**
 * Whether the answer is one Sluice made (and so minted its ids): its target translates Responses. A stream
 * committed before any target answered names none: then every target the model may use must translate.
 */
function translated(call: ModelCall, served: ServedBy | undefined): boolean {
  if (served) return translates(served.model, served.key);
  const m = call.resolved.model;
  const snapshot = call.caller.snapshot;
  const targets = m.kind === 'direct' ? [m] : m.routing.targets.map((t) => snapshot.modelByName(t.model));
  return targets.every((t) => {
    const key = t?.kind === 'direct' ? snapshot.providerKeys.get(t.provider_key_id) : undefined;
    return t?.kind === 'direct' && key !== undefined && translates(t, key);
  });
}

function translates(model: DirectModel, key: ProviderKey): boolean {
  return !servesResponsesNatively(adapterFor(key.adapter), { provider: model.provider ?? key.provider, key });
}

function storeDown(): ProxyError {
  return new ProxyError(
    503,
    'service_unavailable',
    'the responses store is unreachable, so `previous_response_id` and `item_reference` cannot be resolved now; ' +
      'retry, or send the whole conversation in `input`',
    undefined,
    { 'retry-after': '1' },
  );
}

/** Keeps `response` (a translated answer) with the whole input it answered. Never fails the caller. */
function keep(store: ResponsesStore, call: ModelCall, response: Record<string, unknown> | undefined): void {
  if (!response || typeof response.id !== 'string' || !Array.isArray(response.output)) return;
  const output = response.output.filter((i): i is Item => typeof i === 'object' && i !== null);
  const entry = { input: contextItems(call.body.input), output };
  void store.put(store.owner(call.caller.key.id), response.id, entry).catch(() => {});
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const j: unknown = JSON.parse(text);
    return typeof j === 'object' && j !== null && !Array.isArray(j) ? j as Record<string, unknown> : undefined;
  } catch {
    return undefined;
  }
}

/** The chunks as they are; once they end whole, `onEnd` gets the terminal event's response. */
function watched(
  chunks: AsyncIterable<Uint8Array>,
  onEnd: (response: Record<string, unknown> | undefined) => void,
): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      const it = chunks[Symbol.asyncIterator]();
      const reader = new TerminalEventReader();
      return {
        async next() {
          const r = await it.next();
          if (r.done) onEnd(reader.response);
          else reader.push(r.value);
          return r;
        },
        return: () => it.return?.() ?? Promise.resolve({ done: true, value: undefined }),
      };
    },
  };
}

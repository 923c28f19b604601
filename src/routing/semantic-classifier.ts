// A semantic router's classifier mode (docs/routing.md "Semantic routing"): one call to a hosted decision
// model — the System One API of a `typesafe` provider key — asks which configured route, by its
// `description`, should take the prompt. The question's wording is AISIX's, so a classifier answers Sluice
// as it answers AISIX. Every failure is an Error whose message goes to the WARN line; the router then applies
// `classifier.on_failure`.
import type { UpstreamFetch } from '../platform.ts';
import type { SemanticClassifier, SemanticRoute } from '../resources/semantic-schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';
import { Cancel } from '../util/cancel.ts';

/** The `provider` of the key a classifier calls. */
export const CLASSIFIER_PROVIDER = 'typesafe';
/** Where a `typesafe` key without `api_base` sends its calls. */
export const CLASSIFIER_DEFAULT_API_BASE = 'https://api.typesafe.ai';
export const CLASSIFIER_PATH = '/v1/systemone';
/** The one question of every call, and its wording (AISIX's). */
export const CLASSIFIER_QUESTION = 'route';
export const CLASSIFIER_INSTRUCTIONS = 'Which route should handle this user request to an AI assistant?';
/** A decision answer is a few hundred bytes; more is not one. */
const MAX_ANSWER_BYTES = 65_536;

export interface ClassifierPick {
  /** Index into the router's `routes`. */
  route: number;
  confidence: number;
}

/** The body of the call: the prompt as `state`, and the routes (in configured order) as the choice's criteria. */
export function classifierRequest(
  routes: readonly SemanticRoute[],
  classifier: Pick<SemanticClassifier, 'model'>,
  prompt: string,
): unknown {
  const criteria: Record<string, string> = {};
  for (const r of routes) criteria[r.name] = r.description ?? '';
  return {
    state: prompt,
    model: classifier.model,
    questions: { [CLASSIFIER_QUESTION]: { type: 'choice', instructions: CLASSIFIER_INSTRUCTIONS, criteria } },
  };
}

/** Asks the classifier which route fits `prompt`. Rejects, with a reason for the log, on any failure. */
export async function classifyRoute(
  upstream: UpstreamFetch,
  snapshot: Snapshot,
  routes: readonly SemanticRoute[],
  classifier: SemanticClassifier,
  prompt: string,
): Promise<ClassifierPick> {
  const key = snapshot.providerKeys.get(classifier.provider_key_id);
  if (!key) {
    throw new Error(`classifier provider_key_id ${JSON.stringify(classifier.provider_key_id)} matches no provider key`);
  }
  if (key.provider !== CLASSIFIER_PROVIDER) {
    throw new Error(
      `classifier provider key ${JSON.stringify(key.display_name)} has provider ${JSON.stringify(key.provider)}, not ${
        JSON.stringify(CLASSIFIER_PROVIDER)
      }`,
    );
  }
  const base = (key.api_base?.trim() || CLASSIFIER_DEFAULT_API_BASE).replace(/\/+$/, '');
  const cancel = new Cancel();
  const timer = setTimeout(
    () => cancel.abort(new Error(`classifier timed out after ${classifier.timeout_ms} ms`)),
    classifier.timeout_ms,
  );
  let text: string;
  try {
    const res = await upstream({
      url: `${base}${CLASSIFIER_PATH}`,
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json',
        ...(key.api_key ? { authorization: `Bearer ${key.api_key}` } : {}),
      },
      body: JSON.stringify(classifierRequest(routes, classifier, prompt)),
      signal: cancel,
      ...(key.tls ? { tls: key.tls } : {}),
    });
    if (res.status < 200 || res.status >= 300) {
      await res.discard().catch(() => {});
      throw new Error(`classifier returned HTTP ${res.status}`);
    }
    text = await res.text();
  } catch (err) {
    throw cancel.aborted ? cancel.reason as Error : err;
  } finally {
    clearTimeout(timer);
  }
  if (text.length > MAX_ANSWER_BYTES) throw new Error(`classifier answer is over ${MAX_ANSWER_BYTES} bytes`);
  return pickOf(routes, text);
}

/** The route and confidence an answer names. */
export function pickOf(routes: readonly SemanticRoute[], text: string): ClassifierPick {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error('classifier response is not the expected shape: not JSON');
  }
  const answers = (parsed as { answers?: unknown } | null)?.answers;
  if (answers !== undefined && (answers === null || typeof answers !== 'object' || Array.isArray(answers))) {
    throw new Error('classifier response is not the expected shape: `answers` is not an object');
  }
  const answer = (answers as Record<string, unknown> | undefined)?.[CLASSIFIER_QUESTION];
  if (answer === undefined) throw new Error('classifier response carries no answer to the routing question');
  const { choice, confidence } = (answer ?? {}) as { choice?: unknown; confidence?: unknown };
  if (typeof choice !== 'string' || typeof confidence !== 'number' || !Number.isFinite(confidence)) {
    throw new Error(
      'classifier response is not the expected shape: the answer needs a string `choice` and a number `confidence`',
    );
  }
  const route = routes.findIndex((r) => r.name === choice);
  if (route < 0) throw new Error(`classifier picked ${JSON.stringify(choice)}, which is not one of the offered routes`);
  return { route, confidence };
}

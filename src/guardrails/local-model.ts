// AISIX's local guardrail model (docs/guardrails.md "semantic"): the ONNX embedding model its `semantic` kind
// consults for spans the rules cannot decide, read from `GUARDRAIL_LOCAL_MODEL_DIR`. Sluice loads no model on
// any runtime and never downloads one, so a deployment that names a model directory is refused at boot
// rather than served without the model it asked for.
export const LOCAL_MODEL_ENV = 'GUARDRAIL_LOCAL_MODEL_DIR';

/** The boot refusal when the environment names a local guardrail model, else undefined. */
export function refuseLocalModel(env: Readonly<Record<string, string | undefined>>): string | undefined {
  const dir = env[LOCAL_MODEL_ENV];
  if (dir === undefined || dir === '') return undefined;
  return `${LOCAL_MODEL_ENV} is set (${dir}), but Sluice cannot load a local guardrail model: it has no ONNX ` +
    'runtime on any of its runtimes (Node, Bun, Deno, Cloudflare Workers) and never downloads model weights. ' +
    'kind: semantic runs its rule layer without a model (docs/guardrails.md "semantic"); unset ' +
    `${LOCAL_MODEL_ENV} to start.`;
}

import { loadResourcesFile } from '/work/main/src/resources/pipeline.ts';
const t = async (s: string, env: Record<string,string> = {}) => { const r = await loadResourcesFile('/t/r.yaml', s, env); console.log(r.ok ? `OK ${r.resourceCount}` : r.report.format()); return r; };
await t(`_format_version: "1"
provider_keys:
  - display_name: pk
    provider: openai
    api_key: \${OPENAI_KEY}
    api_base: http://127.0.0.1:1/v1
models:
  - display_name: a
    provider_key: pk
    model_name: gpt-4o
    timeout: "abc"
  - display_name: a
    provider_key: nope
    model_name: gpt-4o
    weird: 1
  - display_name: r
    routing: { targets: [{ model: zz }, {model: r2}] }
    timeout: 5
  - display_name: r2
    routing: { targets: [{ model: a }] }
api_keys:
  - display_name: k
    key_env: CALLER
    allowed_models: [a, "gpt-*", missing]
extra: 1
`, { OPENAI_KEY: 'sk-secret-xyz' });
await t(`provider_keys: []`);
await t(``);
await t(`_format_version: "1"
models: [ {display_name: x
`);
await t(`_format_version: "1"
provider_keys:
  - display_name: pk
    provider: openai
    api_key: "\${UNSET_VAR}"
  - display_name: pk2
    provider: openai
    api_key: "\${EMPTY_VAR}"
  - display_name: pk3
    provider: openai
    secret: "a$$b"
`, { EMPTY_VAR: '' });

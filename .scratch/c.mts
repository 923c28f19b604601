import { loadResourcesFile } from '../src/resources/pipeline.ts';
const t = async (s: string, env: Record<string,string> = {}) => { const r = await loadResourcesFile('/t/r.yaml', s, env); console.log(r.ok ? `OK ${r.resourceCount}` : r.report.format()); return r; };
await t(`_format_version: "1"
provider_keys:
  - display_name: pk
    provider: openai
    api_key: sk
models:
  - display_name: a
    provider_key: pk
    model_name: gpt-4o
    timeout: "abc"
  - display_name: r2
    routing: { targets: [{ model: a }] }
  - display_name: r3
    routing: { targets: [{ model: r2 }, {model: zz}] }
  - display_name: b
    provider_key: pk
    model_name: gpt-4o
  - display_name: b
    provider_key: pk
    model_name: gpt-4o
`);

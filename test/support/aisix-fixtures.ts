// Shared AISIX-contract fixtures for the resources-file tests (docs/aisix-compatibility.md "Command line").

/**
 * The malformed file of AISIX's staged file checks (docs/aisix-compatibility.md "Command line"): an unknown top-level key, a duplicate api key, a model naming an unknown
 * provider key (and missing `model_name`) and an api key allowing an unknown model. AISIX reports exactly
 * 4 errors: the missing `model_name` is never checked (the entry failed desugar), and the hex-less key
 * hashes are fine (any non-empty string).
 */
export const MALFORMED = `_format_version: "1"
provider_keys:
  - display_name: openai
    provider: openai
    api_key: sk-test
models:
  - display_name: gpt-4o
    provider_key: ghost
api_keys:
  - display_name: team
    key_hash: aa
    allowed_models: [gpt-4o, nope]
  - display_name: team
    key_hash: bb
    allowed_models: ["*"]
plugins: []
`;

export const MALFORMED_REPORT = (file: string): string =>
  [
    `resources file ${file}: 4 error(s):`,
    '  - (file): unknown top-level key `plugins` (expected _format_version and resource collections: provider_keys, models, api_keys, guardrails, mcp_servers, a2a_agents, cache_policies, observability_exporters, rate_limit_policies, oidc_providers, claim_mappings, passthrough_routes, mcp_auth_settings)',
    '  - api_keys[1] ("team"): duplicate api_keys entry: display_name "team" is already defined at api_keys[0] — identities must be unique within a kind',
    '  - models[0] ("gpt-4o"): `provider_key` references unknown provider key "ghost" (defined provider_keys: openai)',
    '  - api_keys[0] ("team"): allowed_models entry references unknown model "nope" (defined models: gpt-4o)',
  ].join('\n');

/** A good file: 1 provider key, 2 models, 2 api keys (one without a hex key hash). */
export const GOOD = `_format_version: "1"
provider_keys:
  - display_name: openai
    provider: openai
    secret: sk-test
models:
  - display_name: gpt-4o
    provider_key: openai
    model_name: gpt-4o
  - display_name: smart
    routing: { targets: [{ model: gpt-4o }] }
api_keys:
  - display_name: team
    key_hash: aa
    allowed_models: [gpt-4o, smart]
  - display_name: ci
    key_hash: bb
    allowed_models: ["*"]
`;

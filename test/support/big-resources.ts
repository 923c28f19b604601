// A large resources file for reload tests and bench/reload-latency.ts: the usual `gpt-test` model and
// `caller` key (test/support/process.ts `resourcesFor`) plus `rows` models and `rows` api keys named
// `m-<salt>-<i>` / `k-<salt>-<i>`.
import { createHash } from 'node:crypto';

export function bigResources(base: string, rows: number, salt: string): string {
  const out = [
    `_format_version: "1"`,
    'provider_keys:',
    '  - display_name: mock',
    '    provider: openai',
    '    api_key: sk-upstream-SECRET-value',
    `    api_base: ${base}`,
    'models:',
    '  - display_name: gpt-test',
    '    model_name: gpt-upstream',
    '    provider_key: mock',
  ];
  for (let i = 0; i < rows; i++) {
    out.push(`  - display_name: m-${salt}-${i}`, '    model_name: gpt-upstream', '    provider_key: mock');
  }
  out.push('api_keys:', '  - display_name: caller', '    key_env: CALLER_KEY', '    allowed_models: ["*"]');
  for (let i = 0; i < rows; i++) {
    out.push(
      `  - display_name: k-${salt}-${i}`,
      `    key_hash: ${createHash('sha256').update(`sk-bench-${salt}-${i}`).digest('hex')}`,
      '    allowed_models: [gpt-test]',
    );
  }
  return out.join('\n') + '\n';
}

/** The plaintext of api key `k-<salt>-<i>`. */
export const bigResourcesKey = (salt: string, i: number): string => `sk-bench-${salt}-${i}`;

/**
 * `text` behind a document marker: outside the fast path's YAML subset (src/util/plain-yaml.ts), so its YAML
 * stage is the `yaml` package's, on a worker thread when the file is large. For tests of that stage.
 */
export const withYamlStage = (text: string): string => `---\n${text}`;

// Where a files, batches or fine-tuning call goes (docs/batch-files-endpoints.md "Upstream"): OpenAI's URL rule,
// or Azure OpenAI's resource-scoped `/openai/...` with its data-plane version.
import { errors, ProxyError } from '../http/errors.ts';
import type { JobTarget } from './jobs-target.ts';
import { directUrl } from '../providers/direct-url.ts';
import { openAiBase } from './upstream.ts';

/** Azure's data-plane version for the resource-scoped jobs routes; the caller's `api-version` wins. */
const AZURE_JOBS_API_VERSION = '2024-10-21';

/** The upstream URL: OpenAI's rule, or Azure's resource-scoped `/openai/...?api-version=`. */
export function urlOf(target: JobTarget, op: { path: string }, query: string): string | ProxyError {
  if (target.adapter === 'openai') {
    const base = openAiBase(target.key);
    if (base instanceof ProxyError) return base;
    const url = directUrl(base, op.path);
    return query === '' ? url : `${url}?${query}`;
  }
  const base = (target.key.api_base ?? '').trim().replace(/\/+$/, '');
  if (!/^https?:\/\//i.test(base)) {
    return errors.badRequest(
      `request payload is invalid: azure provider_key "${target.key.display_name}" has no api_base`,
    );
  }
  const url = `${base}/openai${op.path}`;
  const hasVersion = query.split('&').some((p) => p.split('=')[0] === 'api-version');
  if (query === '') return `${url}?api-version=${AZURE_JOBS_API_VERSION}`;
  return hasVersion ? `${url}?${query}` : `${url}?${query}&api-version=${AZURE_JOBS_API_VERSION}`;
}

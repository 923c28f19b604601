// Routes whose content no guardrail step can check (files, batches, fine-tuning, videos): a call that carries
// content a guardrail applies to is refused, never relayed unchecked (docs/security.md "Where Sluice fails open").
import { AttachmentIndex } from '../guardrails/attachments.ts';
import { errors, type ProxyError } from '../http/errors.ts';
import type { ApiKey, Model } from '../resources/schema.ts';
import type { Snapshot } from '../resources/snapshot.ts';

/** The refusal when a guardrail applies to `model` for `key`; undefined when none does. */
export function unscannedRefusal(snapshot: Snapshot, model: Model, key: ApiKey, path: string): ProxyError | undefined {
  if (snapshot.guardrails.length === 0) return undefined;
  const index = new AttachmentIndex(snapshot.guardrails, snapshot.guardrailAttachments);
  if (index.resolve({ modelId: model.id, apiKeyId: key.id, teamId: key.team_id }).length === 0) return undefined;
  return errors.badRequest(
    `guardrails apply to model "${model.display_name}" and cannot check ${path}: the call is refused rather than ` +
      'relayed unchecked (docs/batch-files-endpoints.md)',
  );
}

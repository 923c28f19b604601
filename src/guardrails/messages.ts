// The guardrail log lines and caller-facing messages of the spec (docs/guardrails.md), in one place: a grep for
// one lands here and at its caller.
export const GUARDRAIL_MSG = {
  blockedRequest: 'guardrail blocked request',
  blockedResponse: 'guardrail blocked response',
  blockedCached: 'guardrail blocked cached response',
  blockedStream: 'guardrail blocked streaming response',
  blockedStreamWindow: 'guardrail blocked streaming response (window)',
  blockedEmbeddings: 'guardrail blocked /v1/embeddings request',
  bufferExceeded: 'streaming response exceeded max_buffer_bytes; failing closed',
  monitorBlock: 'guardrail in monitor mode observed a violation; not blocking (enforcement_mode=monitor)',
  monitorMask: 'guardrail in monitor mode observed maskable spans; not redacting (enforcement_mode=monitor)',
  mandatoryBlock: 'mandatory guardrail could not evaluate; blocking (mandatory=true overrides fail_open)',
  unknownEnforcementMode: "unknown enforcement_mode; treating as 'block'",
  implicitEnv:
    'guardrail has no attachment rows; applying as implicit env-scope at priority 0 (backward-compat rolling-upgrade window)',
  unknownGuardrail: 'attachment references unknown guardrail; skipping',
} as const;

/** Per service: the WARN of a failed call and the ERROR of a 4xx answer. */
export const SERVICE_MSG: Record<string, { failed: string; configError?: string }> = {
  openai_moderation: {
    failed: 'openai moderation call failed',
    configError: 'openai moderation returned 4xx — check endpoint, api_key, and model configuration',
  },
  presidio: {
    failed: 'presidio call failed',
    configError: 'presidio returned 4xx — check analyzer_url/anonymizer_url, language, and entities configuration',
  },
  lakera: {
    failed: 'lakera guard call failed',
    configError: 'lakera guard returned 4xx — check endpoint, api_key, and project_id configuration',
  },
  aliyun: {
    failed: 'aliyun text moderation call failed',
    configError: 'aliyun TextModerationPlus returned 4xx — check region/access keys configuration',
  },
  aliyun_ai_guardrail: {
    failed: 'aliyun AI guardrail call failed',
    configError: 'aliyun MultiModalGuard returned 4xx — check region/access keys configuration',
  },
  // AISIX logs no separate 4xx line for Bedrock: its errors are `bedrock_5xx` failures.
  bedrock: { failed: 'bedrock ApplyGuardrail call failed' },
  azure_cs: {
    failed: 'azure content safety call failed',
    configError: 'azure content safety returned 4xx — check endpoint and api_key configuration',
  },
};

/** Aliyun's own lines: a block names Aliyun's request id, so an operator finds the call in its console. */
export const ALIYUN_MSG = {
  textBlocked: 'aliyun text moderation blocked content',
  textConfigError: 'aliyun TextModerationPlus returned 4xx — check region/access keys configuration',
  aiBlocked: 'aliyun AI guardrail blocked content',
  aiMasking: 'aliyun AI guardrail masking content',
  aiConfigError: 'aliyun MultiModalGuard returned 4xx — check region/access keys configuration',
  aiNotActivated:
    'aliyun AI guardrail service not activated — activate AI Guardrails (lvwang_guardrail_public_cn) for the service_level in use',
} as const;

/** The caller's words when a guardrail refuses (the guardrail's own reason never leaves the logs). */
export function blockMessage(side: 'request' | 'response', name: string | undefined): string {
  return name === undefined
    ? `${side} blocked by content policy`
    : `${side} blocked by content policy (guardrail '${name}')`;
}

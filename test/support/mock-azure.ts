// An Azure OpenAI resource and its Entra ID token endpoint on one loopback server, checking what the real
// services check: the deployment path and `api-version`, `api-key` or an AAD bearer it minted (never
// both), the client-credentials form. Answers carry Azure's content-filter annotations; errors Azure's shapes.
import type * as http from 'node:http';
import { type CloudRequest, type CloudServer, sendJson, startCloudServer } from './mock-cloud.ts';

export const AZURE_KEY = 'azure-resource-key-SECRET-0a1b2c';
export const AAD = { tenant_id: 'tenant-1234', client_id: 'client-5678', client_secret: 'aad-client-SECRET-9z8y' };

export interface MockAzure extends CloudServer {
  /** Tokens the token endpoint issued, in order. */
  minted: string[];
  /** The deployments that exist. */
  deployments: Set<string>;
}

const FILTERS = {
  hate: { filtered: false, severity: 'safe' },
  self_harm: { filtered: false, severity: 'safe' },
  sexual: { filtered: false, severity: 'safe' },
  violence: { filtered: false, severity: 'safe' },
};

export function azureChat(model: string, content = 'hi from azure'): Record<string, unknown> {
  return {
    id: 'chatcmpl-az',
    object: 'chat.completion',
    created: 1,
    model,
    prompt_filter_results: [{ prompt_index: 0, content_filter_results: FILTERS }],
    choices: [{
      index: 0,
      message: { role: 'assistant', content },
      finish_reason: 'stop',
      content_filter_results: FILTERS,
    }],
    usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 },
  };
}

export async function startMockAzure(apiVersion = '2024-10-21'): Promise<MockAzure> {
  const minted: string[] = [];
  const deployments = new Set(['gpt-4o-prod', 'embed-prod']);
  const handler = (req: CloudRequest, res: http.ServerResponse) => {
    const token = /^\/([^/]+)\/oauth2\/v2\.0\/token$/.exec(req.path);
    if (token) return mint(req, res, token[1]!, minted);
    const m = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|embeddings|completions)$/.exec(req.path);
    if (!m) return sendJson(res, 404, { error: { code: '404', message: 'Resource not found' } });
    if (req.query !== `api-version=${apiVersion}`) {
      return sendJson(res, 404, { error: { code: '404', message: 'Resource not found' } });
    }
    const key = req.headers['api-key'];
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const authed = (key === AZURE_KEY && bearer === undefined) ||
      (key === undefined && bearer && minted.includes(bearer));
    if (!authed) {
      return sendJson(res, 401, {
        error: { code: '401', message: 'Access denied due to invalid subscription key for resource acme-SECRETNAME' },
      });
    }
    if (!deployments.has(m[1]!)) {
      return sendJson(res, 404, {
        error: { code: 'DeploymentNotFound', message: `The API deployment ${m[1]} does not exist for acme-SECRETNAME` },
      });
    }
    if (m[2] === 'embeddings') {
      const input = req.json?.input;
      const inputs = Array.isArray(input) ? input : [input];
      return sendJson(res, 200, {
        object: 'list',
        model: 'text-embedding-3-small',
        data: inputs.map((_, i) => ({ object: 'embedding', index: i, embedding: [0.1, 0.2, i] })),
        usage: { prompt_tokens: 4, total_tokens: 4 },
      });
    }
    if (req.json?.stream === true) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        `data: ${
          JSON.stringify({
            id: '',
            object: '',
            created: 0,
            model: '',
            choices: [],
            prompt_filter_results: [{ prompt_index: 0, content_filter_results: FILTERS }],
          })
        }\n\n`,
      );
      for (const piece of ['hello', ' azure']) {
        res.write(
          `data: ${
            JSON.stringify({
              id: 'c1',
              object: 'chat.completion.chunk',
              created: 1,
              model: 'gpt-4o',
              choices: [{ index: 0, delta: { content: piece }, finish_reason: null, content_filter_results: FILTERS }],
            })
          }\n\n`,
        );
      }
      res.end('data: [DONE]\n\n');
      return;
    }
    return sendJson(res, 200, azureChat('gpt-4o-2024-08-06'));
  };
  const server = await startCloudServer(handler);
  return Object.assign(server, { minted, deployments });
}

function mint(req: CloudRequest, res: http.ServerResponse, tenant: string, minted: string[]) {
  const form = new URLSearchParams(req.body);
  const ok = req.method === 'POST' &&
    req.headers['content-type'] === 'application/x-www-form-urlencoded' &&
    tenant === AAD.tenant_id &&
    form.get('grant_type') === 'client_credentials' &&
    form.get('client_id') === AAD.client_id &&
    form.get('client_secret') === AAD.client_secret &&
    form.get('scope') === 'https://cognitiveservices.azure.com/.default';
  if (!ok) {
    return sendJson(res, 401, {
      error: 'invalid_client',
      error_description: `AADSTS7000215: Invalid client secret provided for app ${AAD.client_id}`,
    });
  }
  const token = `aad-token-${minted.length + 1}-SECRET`;
  minted.push(token);
  return sendJson(res, 200, { token_type: 'Bearer', expires_in: 3599, ext_expires_in: 3599, access_token: token });
}

/** An Azure content-policy refusal, as the service answers it. */
export function contentPolicyRefusal(_req: CloudRequest, res: http.ServerResponse): void {
  sendJson(res, 400, {
    error: {
      message:
        'The response was filtered due to the prompt triggering Azure OpenAI content management policy. acme-SECRETNAME',
      type: null,
      param: 'prompt',
      code: 'content_filter',
      status: 400,
      innererror: { code: 'ResponsibleAIPolicyViolation', content_filter_result: { hate: { filtered: true } } },
    },
  });
}

export function throttled(_req: CloudRequest, res: http.ServerResponse): void {
  sendJson(res, 429, {
    error: {
      code: '429',
      message: 'Requests to the ChatCompletions_Create Operation under acme-SECRETNAME have exceeded',
    },
  }, { 'retry-after': '7' });
}

// An OpenAPI-backed server (`type: openapi`) as an upstream (docs/mcp.md "OpenAPI-backed servers"): its tools come
// from the row's own OpenAPI 3 document (built once per snapshot row), and a call is one HTTP request to the API's
// base URL through the platform's upstream client (no redirect followed), carrying only the gateway-held
// credential. A 2xx answer is the tool's text; any other status a tool error, as AISIX answers.
import type { UpstreamFetch } from '../platform.ts';
import type { McpServer } from '../resources/mcp-schema.ts';
import { UpstreamRedirected } from '../upstream-fetch.ts';
import type { CancelSignal } from '../util/cancel.ts';
import { UpstreamFailure } from './failures.ts';
import { credentialHeaders, type OAuthTokens } from './oauth.ts';
import { buildUrl, coerceBody, generateTools, type OpenApiTool } from './openapi.ts';

const DEFAULT_API_KEY_HEADER = 'x-api-key';

export class OpenApiServers {
  /** The tools of each row's document: a new snapshot brings new row objects, so a changed spec is rebuilt. */
  private readonly built = new WeakMap<McpServer, OpenApiTool[]>();

  constructor(
    private readonly fetch: UpstreamFetch,
    private readonly tokens: OAuthTokens,
    private readonly maxAnswerBytes: number,
  ) {}

  /** The server's tools, or an `UpstreamFailure` when its document cannot give any. */
  tools(server: McpServer): OpenApiTool[] {
    let tools = this.built.get(server);
    if (tools === undefined) {
      if (server.spec === undefined) throw new UpstreamFailure('openapi server has no spec configured');
      try {
        tools = generateTools(server.spec).tools;
      } catch (e) {
        throw new UpstreamFailure(e instanceof Error ? e.message : String(e));
      }
      this.built.set(server, tools);
    }
    return tools;
  }

  /** One call: the HTTP request the operation describes, its answer as a text tool result. */
  async call(
    server: McpServer,
    name: string,
    args: Record<string, unknown>,
    signal: CancelSignal,
  ): Promise<Record<string, unknown>> {
    const tool = this.tools(server).find((t) => t.name === name);
    if (!tool) throw new UpstreamFailure(`unknown tool '${name}'`);
    // A bad argument is the agent's to correct: a tool error, as a non-2xx answer is.
    const target = buildUrl(server.url, tool, args);
    if ('error' in target) return toolResult(target.error, true);
    const headers: Record<string, string> = {
      accept: '*/*',
      ...await credentialHeaders(server, this.tokens, signal, server.api_key_header || DEFAULT_API_KEY_HEADER),
    };
    const req: Parameters<UpstreamFetch>[0] = { url: target.url, method: tool.method.toUpperCase(), headers, signal };
    const body = tool.hasBody ? coerceBody(args.body) : undefined;
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      req.body = JSON.stringify(body);
    }
    let status: number;
    let text: string;
    try {
      const res = await this.fetch(req);
      status = res.status;
      text = await this.read(res.body);
    } catch (e) {
      if (e instanceof UpstreamFailure) throw e;
      // The platform's client refuses a redirect and drops its body; to the agent it is a non-2xx answer.
      if (e instanceof UpstreamRedirected) return toolResult(`HTTP ${e.status === 0 ? '3xx' : e.status}: `, true);
      throw new UpstreamFailure(`HTTP request failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    // A minted token refused before it expired: the next call mints a new one.
    if (status === 401 && server.auth_type === 'oauth2') this.tokens.drop(server);
    return status >= 200 && status < 300 ? toolResult(text, false) : toolResult(`HTTP ${status}: ${text}`, true);
  }

  private async read(body: AsyncIterable<Uint8Array>): Promise<string> {
    const decoder = new TextDecoder();
    let out = '';
    let size = 0;
    for await (const chunk of body) {
      size += chunk.byteLength;
      if (size > this.maxAnswerBytes) throw new UpstreamFailure(`answer over ${this.maxAnswerBytes} bytes`);
      out += decoder.decode(chunk, { stream: true });
    }
    return out + decoder.decode();
  }
}

function toolResult(text: string, isError: boolean): Record<string, unknown> {
  return { content: [{ type: 'text', text }], isError };
}

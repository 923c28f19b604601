// Tools from an OpenAPI 3 document, as AISIX's OpenAPI bridge builds them (docs/mcp.md "OpenAPI-backed servers"):
// one tool per `paths.<path>.<method>` (get, post, put, delete, patch), named from `operationId` or
// `<method>_<path>` sanitized, an input schema of the path and query parameters plus a JSON `body`, local `$ref`s
// inlined under bounds; and how a call's arguments become the URL, the query and the JSON body. Pure: the HTTP
// side is openapi-call.ts.
import { segmentProblem } from '../providers/url-segment.ts';

/** One operation, resolved into a callable tool. */
export interface OpenApiTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  /** Lower case. */
  method: string;
  /** The path template as the document writes it, e.g. `/items/{id}`. */
  path: string;
  pathParams: string[];
  queryParams: string[];
  hasBody: boolean;
}

/** What walking a document gives: the tools, and the anomalies a strict check would report. */
export interface Generation {
  tools: OpenApiTool[];
  /** Base names that collided after sanitizing, each once. */
  duplicates: string[];
  /** `<METHOD> <path>` of operations skipped for a request body without a JSON variant. */
  skipped: string[];
}

type Json = Record<string, unknown>;

const METHODS = ['get', 'post', 'put', 'delete', 'patch'] as const;
/** The strictest tool-name cap among the model providers agents hand these names to. */
const TOOL_NAME_MAX = 128;
const MAX_REF_DEPTH = 16;
const MAX_REF_EXPANSIONS = 256;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An `operationId` (or the fallback) as a name every provider accepts: `[a-z0-9_-]`, at most 128 characters. */
export function sanitizeToolName(raw: string): string {
  return [...raw].slice(0, TOOL_NAME_MAX).map((c) => /^[A-Za-z0-9_-]$/.test(c) ? c.toLowerCase() : '_').join('');
}

/** The tools of `spec`; an Error when it has no `paths` object. */
export function generateTools(spec: Json): Generation {
  const paths = spec.paths;
  if (!isObject(paths)) throw new Error('openapi spec has no `paths` object');
  const components = isObject(spec.components) ? spec.components : {};
  const used = new Set<string>();
  const out: Generation = { tools: [], duplicates: [], skipped: [] };
  // AISIX walks the paths as a sorted map.
  for (const path of Object.keys(paths).sort()) {
    const item = paths[path];
    if (!isObject(item)) continue;
    for (const method of METHODS) {
      const op = item[method];
      if (!isObject(op)) continue;
      const resolver = new RefResolver(spec);
      const params = mergedParameters(item, op, components, resolver);
      const requestBody = op.requestBody === undefined ? undefined : resolver.resolve(op.requestBody, 0);
      const body = requestBody === undefined ? { kind: 'none' as const } : jsonBodySchema(requestBody, resolver);
      if (body.kind === 'unsupported') {
        out.skipped.push(`${method.toUpperCase()} ${path}`);
        continue;
      }
      const raw = typeof op.operationId === 'string' && op.operationId !== '' ? op.operationId : `${method}_${path}`;
      const base = sanitizeToolName(raw);
      let name = base;
      for (let n = 2; used.has(name); n++) {
        if (n === 2 && !out.duplicates.includes(base)) out.duplicates.push(base);
        const suffix = `_${n}`;
        name = [...base].slice(0, TOOL_NAME_MAX - suffix.length).join('') + suffix;
      }
      used.add(name);
      const summary = op.summary !== undefined ? op.summary : op.description;
      const description = typeof summary === 'string' && summary !== '' ? summary : `${method.toUpperCase()} ${path}`;
      const properties: Json = {};
      const required: string[] = [];
      const pathParams: string[] = [];
      const queryParams: string[] = [];
      for (const p of params) {
        const pname = p.name as string;
        // Header and cookie parameters are the gateway's to set, never the caller's.
        if (p.in === 'path') pathParams.push(pname);
        else if (p.in === 'query') queryParams.push(pname);
        else continue;
        const resolved = p.schema === undefined ? null : resolver.resolve(p.schema, 0);
        let schema: Json = isObject(resolved) && Object.keys(resolved).length > 0 ? resolved : { type: 'string' };
        if (typeof p.description === 'string') schema = { ...schema, description: p.description };
        properties[pname] = schema;
        if (p.required === true) required.push(pname);
      }
      if (body.kind === 'schema') {
        let schema: Json = isObject(body.schema) && Object.keys(body.schema).length > 0
          ? body.schema
          : { type: 'object' };
        const rb = requestBody as Json;
        if (typeof rb.description === 'string') schema = { ...schema, description: rb.description };
        properties.body = schema;
        if (rb.required === true) required.push('body');
      }
      out.tools.push({
        name,
        description,
        inputSchema: { type: 'object', properties, required },
        method,
        path,
        pathParams,
        queryParams,
        hasBody: body.kind === 'schema',
      });
    }
  }
  return out;
}

type BodyOutcome = { kind: 'schema'; schema: unknown } | { kind: 'none' } | { kind: 'unsupported' };

function jsonBodySchema(requestBody: unknown, resolver: RefResolver): BodyOutcome {
  const content = isObject(requestBody) ? requestBody.content : undefined;
  if (!isObject(content) || Object.keys(content).length === 0) return { kind: 'none' };
  const entry = Object.entries(content).find(([mime]) => {
    const m = (mime.split(';')[0] ?? '').trim();
    return m.toLowerCase() === 'application/json' || (m.startsWith('application/') && m.endsWith('+json'));
  });
  if (!entry) return { kind: 'unsupported' };
  const media = entry[1];
  const schema = isObject(media) && media.schema !== undefined ? resolver.resolve(media.schema, 0) : { type: 'object' };
  return { kind: 'schema', schema };
}

/** Path-level then operation-level parameters; the operation's wins on the same (`name`, `in`). */
function mergedParameters(item: Json, op: Json, components: Json, resolver: RefResolver): Json[] {
  const list = (raw: unknown): Json[] =>
    (Array.isArray(raw) ? raw : [])
      .map((p) => resolveParameter(p, components, resolver))
      .filter((p): p is Json => isObject(p) && typeof p.name === 'string');
  const key = (p: Json) => `${String(p.name)}\u0000${typeof p.in === 'string' ? p.in : ''}`;
  const opLevel = list(op.parameters);
  const opKeys = new Set(opLevel.map(key));
  return [...list(item.parameters).filter((p) => !opKeys.has(key(p))), ...opLevel];
}

/** A parameter, its `#/components/parameters/<name>` reference followed; undefined when it cannot be. */
function resolveParameter(param: unknown, components: Json, resolver: RefResolver): unknown {
  if (!isObject(param) || typeof param.$ref !== 'string') return param;
  const prefix = '#/components/parameters/';
  if (!param.$ref.startsWith(prefix)) return undefined;
  const all = components.parameters;
  if (!isObject(all)) return undefined;
  const target = all[param.$ref.slice(prefix.length)];
  return target === undefined ? undefined : resolver.resolve(target, 0);
}

/**
 * Inlines local `$ref`s (sibling keys overlay the target); an external, missing, too deep or one-too-many
 * reference becomes `{}`, so a cyclic document degrades instead of recursing forever.
 */
class RefResolver {
  private expansions = 0;
  constructor(private readonly root: Json) {}

  resolve(node: unknown, depth: number): unknown {
    if (Array.isArray(node)) return node.map((v) => this.resolve(v, depth));
    if (!isObject(node)) return node;
    if (typeof node.$ref === 'string') {
      const target = this.resolveRef(node.$ref, depth);
      if (Object.keys(node).length === 1) return target;
      const base: Json = isObject(target) ? { ...target } : {};
      for (const [k, v] of Object.entries(node)) if (k !== '$ref') base[k] = this.resolve(v, depth);
      return base;
    }
    const out: Json = {};
    for (const [k, v] of Object.entries(node)) out[k] = this.resolve(v, depth);
    return out;
  }

  private resolveRef(ref: string, depth: number): unknown {
    if (depth >= MAX_REF_DEPTH || this.expansions >= MAX_REF_EXPANSIONS) return {};
    if (!ref.startsWith('#')) return {};
    this.expansions++;
    const target = pointer(this.root, ref.slice(1));
    return target === undefined ? {} : this.resolve(target, depth + 1);
  }
}

/** RFC 6901: the value at `ptr` ('' is the root). */
function pointer(root: unknown, ptr: string): unknown {
  if (ptr === '') return root;
  if (!ptr.startsWith('/')) return undefined;
  let cur: unknown = root;
  for (const raw of ptr.slice(1).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(cur)) {
      if (!/^(0|[1-9][0-9]*)$/.test(key)) return undefined;
      cur = cur[Number(key)];
    } else if (isObject(cur)) {
      if (!Object.hasOwn(cur, key)) return undefined;
      cur = cur[key];
    } else return undefined;
  }
  return cur;
}

/** Everything but RFC 3986's unreserved characters, percent-encoded (UTF-8). */
function encodeSegment(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** An OpenAPI path argument has no grammar of its own: only `segmentProblem`'s checks apply. */
const ANY_TEXT = /^[\s\S]*$/;

/**
 * The request URL: the base without its trailing `/`, then the path with each `{p}` replaced by its argument as
 * one encoded segment. A string is a message for the agent (a tool error): a missing value, a separator, a dot
 * segment, an escape of one at any depth, or a structured value would change the request's target.
 */
export function buildUrl(base: string, tool: OpenApiTool, args: Json): { url: string } | { error: string } {
  let path = tool.path;
  for (const p of tool.pathParams) {
    const v = args[p];
    let raw: string;
    if (typeof v === 'string') raw = v;
    else if (typeof v === 'number' || typeof v === 'boolean') raw = String(v);
    else if (v === undefined || v === null) return { error: `missing required path parameter '${p}'` };
    else return { error: `path parameter '${p}' must be a string, number, or boolean` };
    if (raw === '') return { error: `missing required path parameter '${p}'` };
    if (raw.includes('/') || raw.includes('\\')) {
      return { error: `path parameter '${p}' must not contain path separators` };
    }
    if (raw === '.' || raw === '..') return { error: `path parameter '${p}' cannot be '.' or '..'` };
    // The shared segment rule: an API, or a proxy before it, that decodes once more would read a step in an escape.
    const problem = segmentProblem(raw, ANY_TEXT);
    if (problem) return { error: `path parameter '${p}' ${problem}` };
    path = path.split(`{${p}}`).join(encodeSegment(raw));
  }
  const query = queryString(tool, args);
  return {
    url: `${base.replace(/\/+$/, '')}${path}${query === '' ? '' : `${path.includes('?') ? '&' : '?'}${query}`}`,
  };
}

/** The declared query parameters present: scalars as text, arrays repeat the key, objects as JSON, null skipped. */
function queryString(tool: OpenApiTool, args: Json): string {
  const q = new URLSearchParams();
  const text = (v: unknown) => typeof v === 'string' ? v : JSON.stringify(v);
  for (const p of tool.queryParams) {
    const v = args[p];
    if (v === undefined || v === null) continue;
    if (Array.isArray(v)) { for (const item of v) q.append(p, text(item)); }
    else q.append(p, text(v));
  }
  return q.toString();
}

/**
 * The JSON body to send, as LiteLLM and AISIX coerce it: an object or array as is, a string parsed when it is
 * JSON and wrapped as `{"data": …}` otherwise, another scalar wrapped; absent or null: no body.
 */
export function coerceBody(v: unknown): unknown {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'object') return v;
  if (typeof v === 'string') {
    try {
      return JSON.parse(v);
    } catch {
      return { data: v };
    }
  }
  return { data: v };
}

// The tool generation of OpenAPI-backed servers (docs/mcp.md "OpenAPI-backed servers"), AISIX's rules exactly:
// names sanitized, cut and disambiguated, descriptions' fallback, `$ref` inlining and its bounds, parameters
// merged, and how arguments become the URL and the body.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildUrl, coerceBody, generateTools, sanitizeToolName } from '../../src/mcp/openapi.ts';

describe('generateTools', () => {
  test('names: operationId or <method>_<path>, sanitized, cut to 128, collisions suffixed', () => {
    const long = 'A'.repeat(200);
    const g = generateTools({
      paths: {
        '/a': { get: { operationId: 'foo/list' }, post: { operationId: 'foo.list' }, put: { operationId: long } },
        '/b': { put: { operationId: long }, delete: {}, head: { operationId: 'ignored' } },
      },
    });
    assert.deepEqual(g.tools.map((t) => t.name), [
      'foo_list',
      'foo_list_2',
      'a'.repeat(128),
      `${'a'.repeat(126)}_2`,
      'delete__b',
    ]);
    assert.deepEqual(g.duplicates, ['foo_list', 'a'.repeat(128)]);
    assert.equal(sanitizeToolName('GET /items/{id}'), 'get__items__id_');
  });

  test('description: summary, else description, else <METHOD> <path>; an empty summary falls back', () => {
    const g = generateTools({
      paths: { '/x': { get: { summary: '', description: 'unused' }, post: { description: 'd' }, put: {} } },
    });
    assert.deepEqual(g.tools.map((t) => t.description), ['GET /x', 'd', 'PUT /x']);
  });

  test('$ref: siblings overlay the target; a cycle and an external reference degrade to {}', () => {
    const g = generateTools({
      paths: {
        '/n': {
          post: {
            requestBody: {
              content: {
                'application/vnd.api+json': { schema: { $ref: '#/components/schemas/Node', description: 'over' } },
              },
            },
            parameters: [
              { name: 'ext', in: 'query', schema: { $ref: 'other.yaml#/X' } },
              { $ref: '#/components/parameters/Missing' },
            ],
          },
        },
      },
      components: {
        schemas: { Node: { type: 'object', properties: { next: { $ref: '#/components/schemas/Node' } } } },
      },
    });
    const schema = g.tools[0]!.inputSchema as {
      properties: { body: Record<string, unknown>; ext: unknown; Missing?: unknown };
    };
    assert.equal(schema.properties.body.description, 'over');
    assert.equal(schema.properties.body.type, 'object');
    assert.deepEqual(schema.properties.ext, { type: 'string' });
    assert.deepEqual(Object.keys(schema.properties), ['ext', 'body']);
    // Sixteen levels deep, the cycle ends in {}.
    let node = schema.properties.body as { properties?: { next: unknown } };
    let depth = 0;
    while (node.properties) {
      node = node.properties.next as typeof node;
      depth++;
    }
    assert.deepEqual(node, {});
    assert.equal(depth, 16);
  });

  test('an operation with a body but no JSON variant is skipped; no paths is an error', () => {
    const g = generateTools({
      paths: { '/u': { post: { requestBody: { content: { 'text/plain': {} } } }, get: {} } },
    });
    assert.deepEqual(g.tools.map((t) => t.name), ['get__u']);
    assert.deepEqual(g.skipped, ['POST /u']);
    assert.throws(() => generateTools({ openapi: '3.1.0' }), /openapi spec has no `paths` object/);
  });
});

describe('arguments', () => {
  const [tool] = generateTools({
    paths: {
      '/i/{id}/{n}': {
        get: {
          parameters: [
            { name: 'id', in: 'path', required: true },
            { name: 'n', in: 'path', required: true },
            { name: 'f', in: 'query' },
            { name: 'o', in: 'query' },
          ],
        },
      },
    },
  }).tools;

  test('path values encoded as one segment each; query scalars, objects as JSON, null skipped', () => {
    assert.deepEqual(buildUrl('http://h/base//', tool!, { id: "a!'*~._-", n: 1.5, f: false, o: { k: 1 } }), {
      url: 'http://h/base/i/a%21%27%2A~._-/1.5?f=false&o=%7B%22k%22%3A1%7D',
    });
    assert.deepEqual(buildUrl('http://h', tool!, { id: 'x', n: true, f: null }), { url: 'http://h/i/x/true' });
    assert.deepEqual(buildUrl('http://h', tool!, { id: 'x', n: 'a\\b' }), {
      error: "path parameter 'n' must not contain path separators",
    });
    // Not the literal `%252e%252e` a decoding API would read as `..`: refused, naming the argument.
    assert.deepEqual(buildUrl('http://h', tool!, { id: '%2e%2e', n: 1 }), {
      error: `path parameter 'id' holds a percent-escape of ".", "/" or "\\"`,
    });
    // An escape of anything else is sent as the literal text it is.
    assert.deepEqual(buildUrl('http://h', tool!, { id: 'a%20b', n: 1 }), { url: 'http://h/i/a%2520b/1' });
  });

  test('body coercion', () => {
    assert.deepEqual(coerceBody([1]), [1]);
    assert.deepEqual(coerceBody('{"a":1}'), { a: 1 });
    assert.deepEqual(coerceBody('7'), 7);
    assert.deepEqual(coerceBody(3), { data: 3 });
    assert.equal(coerceBody(null), undefined);
  });
});

// The tool ACL (src/mcp/acl.ts, docs/mcp.md "Access control"): AISIX's single-`*` glob, its three intersecting
// allow layers, deny always winning, default deny, and the anonymous ceiling.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { globMatch, resolveAcl } from '../../src/mcp/acl.ts';
import type { McpPolicy } from '../../src/resources/mcp-schema.ts';

function policy(id: string, p: Partial<McpPolicy> & Pick<McpPolicy, 'scope' | 'allow'>): McpPolicy {
  return { id, deny: [], enabled: true, ...p };
}

describe('the glob', () => {
  test('no `*` is exact; one `*` anchors prefix and suffix; two or more match nothing', () => {
    assert.equal(globMatch('gh__search', 'gh__search'), true);
    assert.equal(globMatch('gh__search', 'gh__search2'), false);
    assert.equal(globMatch('github__*', 'github__x'), true);
    assert.equal(globMatch('*__search', 'gh__search'), true);
    assert.equal(globMatch('gh__get_*_v2', 'gh__get_issue_v2'), true);
    assert.equal(globMatch('gh__get_*_v2', 'gh__get_v2'), false, 'prefix and suffix may not overlap');
    assert.equal(globMatch('*__*', 'gh__x'), false);
    assert.equal(globMatch('*', 'anything'), true);
    assert.equal(globMatch('GH__*', 'gh__x'), false, 'case-sensitive');
  });
});

describe('the layers', () => {
  test('default deny: no env policy, no team policy, no mcp_access grants nothing', () => {
    assert.equal(resolveAcl([], {}).permits('gh__x'), false);
  });

  test('an env policy alone grants to every key; with mcp_access both must allow', () => {
    const env = [policy('p1', { scope: 'env', allow: ['gh__*'] })];
    assert.equal(resolveAcl(env, {}).permits('gh__x'), true);
    assert.equal(resolveAcl(env, {}).permits('jira__x'), false);
    const both = resolveAcl(env, { mcp_access: { allow: ['*__x'] } });
    assert.equal(both.permits('gh__x'), true);
    assert.equal(both.permits('gh__y'), false, 'the key layer refuses');
    assert.equal(resolveAcl(env, { mcp_access: { allow: [] } }).permits('gh__x'), false, '[] admits nothing');
  });

  test("the team layer applies to the key's team only; a disabled row contributes nothing", () => {
    const rows = [
      policy('p1', { scope: 'env', allow: ['*'] }),
      policy('p2', { scope: 'team', scope_ref: 't1', allow: ['gh__*'] }),
      policy('p3', { scope: 'team', scope_ref: 't2', allow: [], enabled: false }),
    ];
    assert.equal(resolveAcl(rows, { team_id: 't1' }).permits('jira__x'), false);
    assert.equal(resolveAcl(rows, { team_id: 't1' }).permits('gh__x'), true);
    assert.equal(resolveAcl(rows, { team_id: 't2' }).permits('jira__x'), true, 'a disabled team row is no layer');
    assert.equal(resolveAcl(rows, {}).permits('jira__x'), true);
  });

  test('deny wins, unioned over every applicable row and the key; per scope the lowest id allows', () => {
    const rows = [
      policy('b', { scope: 'env', allow: ['*'], deny: ['gh__delete_*'] }),
      policy('a', { scope: 'env', allow: ['gh__*'], deny: ['gh__admin'] }),
    ];
    const acl = resolveAcl(rows, { mcp_access: { allow: ['*'], deny: ['gh__secret'] } });
    assert.equal(acl.permits('gh__read'), true);
    assert.equal(acl.permits('jira__x'), false, "row a's allow (lowest id) is the env layer");
    for (const n of ['gh__delete_repo', 'gh__admin', 'gh__secret']) assert.equal(acl.permits(n), false, n);
    assert.equal(resolveAcl([], { mcp_access: { allow: ['*'], deny: ['*'] } }).permits('gh__x'), false);
  });

  test('an anonymous caller is narrowed to its entry servers', () => {
    const acl = resolveAcl([], { mcp_access: { allow: ['*'] }, anonymousServers: ['gh'] });
    assert.equal(acl.permits('gh__x'), true);
    assert.equal(acl.permits('jira__x'), false);
  });
});

// docs/mcp.md's resources example is a file `sluice validate --resources` accepts, and it loads what the page says.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { loadResourcesFile } from '../../src/resources/pipeline.ts';
import { validateResources } from '../../src/tools/validate.ts';
import { testPlatform } from '../support/platform.ts';

const ENV = { GITHUB_MCP_TOKEN: 'gh-token', JIRA_CLIENT_SECRET: 'jira-secret', AGENTS_KEY: 'sk-agents' };

function example(): string {
  const doc = readFileSync(new URL('../../docs/mcp.md', import.meta.url), 'utf8');
  const at = doc.indexOf('A resources file that `sluice validate --resources` accepts');
  const m = /```yaml\n([\s\S]*?)```/.exec(doc.slice(at));
  assert.ok(at >= 0 && m, 'the example is on the page');
  return m[1]!;
}

test("docs/mcp.md's resources example: sluice validate accepts it", async () => {
  const p = testPlatform(ENV);
  p.fileMap.set('/etc/sluice/resources.yaml', example());
  let stdout = '';
  p.writeOut = (t) => void (stdout += t);
  assert.equal(await validateResources(p, '/etc/sluice/resources.yaml'), 0, JSON.stringify(p.logs));
  assert.equal(stdout, 'OK: /etc/sluice/resources.yaml loaded 6 resource(s)\n');
});

test('the anonymous entry names the derived id of the key the example defines', async () => {
  const r = await loadResourcesFile('/r.yaml', example(), ENV);
  assert.ok(r.ok);
  const anon = r.snapshot.of('mcp_auth_settings')[0]!.anonymous!;
  assert.equal(r.snapshot.apiKeys.get(anon.api_key_id)?.display_name, 'anonymous-tools');
  assert.deepEqual(r.snapshot.of('mcp_servers').map((s) => s.name), ['github', 'jira', 'search']);
});

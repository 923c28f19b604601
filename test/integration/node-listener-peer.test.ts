// The node:http listener's `ConnInfo.peer` (runtimes/node-listener.ts): each request carries its own connection's
// address and port, made once per connection, so keep-alive requests share one and a new connection has its own.
import assert from 'node:assert/strict';
import * as http from 'node:http';
import { test } from 'node:test';
import { nodeListen } from '../../runtimes/node-listener.ts';
import type { FetchHandler } from '../../src/platform.ts';

/** GET `/` over `agent`; the peer the listener handed the handler, and the client's own local port. */
function peerSeen(port: number, agent: http.Agent): Promise<{ peer: string; localPort: number }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ peer: body, localPort: req.socket!.localPort! }));
    });
    req.on('error', reject);
  });
}

test('keep-alive requests carry their connection peer; a new connection carries its own', async () => {
  const fetch: FetchHandler = (_req, conn) => new Response(conn.peer ?? 'none');
  const listener = await nodeListen({ name: 'proxy', host: '127.0.0.1', port: 0 }, fetch);
  const kept = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const other = new http.Agent({ keepAlive: false });
  try {
    const first = await peerSeen(listener.port, kept);
    const second = await peerSeen(listener.port, kept);
    assert.equal(first.peer, `127.0.0.1:${first.localPort}`);
    assert.equal(second.localPort, first.localPort, 'the agent reused its connection');
    assert.equal(second.peer, first.peer);
    const fresh = await peerSeen(listener.port, other);
    assert.notEqual(fresh.localPort, first.localPort);
    assert.equal(fresh.peer, `127.0.0.1:${fresh.localPort}`);
  } finally {
    kept.destroy();
    other.destroy();
    await listener.close();
  }
});

// One chat completion request as the bench's own clients send it (instructions.ts, young-gen.ts).
import * as http from 'node:http';

/**
 * POST `body` to `/v1/chat/completions` on 127.0.0.1:`port` through `agent`; resolves once the answer is read
 * to its end, rejects unless it is a 200.
 */
export function postChat(
  agent: http.Agent,
  port: number,
  body: string,
  headers: Record<string, string>,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/v1/chat/completions', method: 'POST', agent, headers },
      (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`answer ${res.statusCode}`))));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

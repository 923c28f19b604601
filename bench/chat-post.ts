// One chat completion request as the bench's own clients send it (instructions.ts, young-gen.ts, alloc-profile.ts),
// and a run of them over keep-alive connections.
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

/** The bench configuration's JSON chat request (bench/config), with its caller key. */
export const BENCH_CHAT = '{"model":"bench-route","messages":[{"role":"user","content":"hi"}]}';
const BENCH_HEADERS = { authorization: 'Bearer sk-sluice-bench', 'content-type': 'application/json' };

/** `n` requests of `body`, `inFlight` at a time over keep-alive connections; every answer must be a 200. */
export async function sendChats(port: number, n: number, inFlight: number, body = BENCH_CHAT): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: inFlight });
  let left = n;
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (left-- > 0) await postChat(agent, port, body, BENCH_HEADERS);
  }));
  agent.destroy();
}

// An upstream that answers every request with a redirect to a second recording server: for tests that must
// prove no transport follows one (docs/security.md "Upstream URLs and credentials"). The target answers
// 200 with a body that would pass for a model's answer, so a followed redirect would look like a success.
import { type CloudServer, sendJson, startCloudServer } from './mock-cloud.ts';

export interface RedirectPair {
  /** Answers 308 when the request's JSON `model` holds `308`, else 307, with `Location: <target>/steal<path>`. */
  redirector: CloudServer;
  /** Records what reaches it: nothing may. */
  target: CloudServer;
  close(): Promise<void>;
}

export async function startRedirectPair(): Promise<RedirectPair> {
  const target = await startCloudServer((req, res) =>
    sendJson(res, 200, {
      id: 'chatcmpl-stolen',
      object: 'chat.completion',
      created: 1,
      model: String(req.json?.model ?? 'stolen'),
      choices: [{ index: 0, message: { role: 'assistant', content: 'stolen' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      access_token: 'stolen-token',
      expires_in: 3600,
    })
  );
  const redirector = await startCloudServer((req, res) => {
    const status = String(req.json?.model ?? '').includes('308') ? 308 : 307;
    const query = req.query ? `?${req.query}` : '';
    res.writeHead(status, { location: `${target.url}/steal${req.path}${query}`, 'content-type': 'text/plain' });
    res.end('moved');
  });
  return {
    redirector,
    target,
    close: async () => {
      await redirector.close();
      await target.close();
    },
  };
}

// An OpenAI-compatible embeddings upstream with deterministic vectors, on a real loopback socket: each
// input text maps to the vector of a table; an unknown text answers 500, the text `hang` never answers.
// Counts its requests.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface MockEmbeddings {
  /** `${url}/v1`, what a provider key's api_base points at. */
  base: string;
  /** The inputs asked for, in order. */
  inputs: string[];
  close(): Promise<void>;
}

export async function startMockEmbeddings(vectors: Record<string, number[]>): Promise<MockEmbeddings> {
  const inputs: string[] = [];
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer(async (req, res) => {
    let body = '';
    for await (const p of req) body += String(p);
    const input = String((JSON.parse(body) as { input?: unknown }).input ?? '');
    inputs.push(input);
    if (input.includes('hang')) {
      hanging.add(res);
      return;
    }
    const v = vectors[input];
    if (!v) {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'no vector for this input', type: 'mock_error' } }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({
      object: 'list',
      model: 'mock-embedding',
      data: [{ object: 'embedding', index: 0, embedding: v }],
      usage: { prompt_tokens: 1, total_tokens: 1 },
    }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    base: `${url}/v1`,
    inputs,
    close: () => {
      for (const r of hanging) r.destroy();
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

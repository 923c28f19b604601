// The first step of every route that is no model call (docs/architecture.md "Where to add"): the request made a
// `ProxyRequest` and `identify` run on it, as a model call's pipeline runs it.
import type { Context } from 'hono';
import { ProxyError } from '../http/errors.ts';
import { fail } from './answer.ts';
import type { ProxyEnv } from './env.ts';
import type { RequestStep } from './pipeline.ts';
import { ProxyRequest } from './request.ts';

/** The request with its caller, or the refusal the caller gets. */
export async function identified(c: Context<ProxyEnv>, identify: RequestStep): Promise<ProxyRequest | Response> {
  const req = new ProxyRequest(c, c.get('rec'), c.get('state'));
  const refused = await identify.run(req);
  if (refused instanceof ProxyError) return fail(c, refused);
  return refused ?? req;
}

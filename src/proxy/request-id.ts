// The gateway's id for a request: a caller-supplied one from an accepted header when it is at most 256
// visible ASCII characters, else a fresh UUID.
import { randomUuid } from '../util/uuid.ts';

const VISIBLE_ASCII = /^[\x21-\x7e]{1,256}$/;

export function requestIdFrom(headers: Headers, acceptHeaders: readonly string[]): string {
  for (const h of acceptHeaders) {
    const v = headers.get(h);
    if (v !== null && VISIBLE_ASCII.test(v)) return v;
  }
  return randomUuid();
}

// The product name a caller sees (docs/configuration.md `proxy.identity`): Sluice's own, or AISIX's for an
// operator whose clients match AISIX's strings (docs/aisix-compatibility.md "Endpoints").
import type { Config } from '../config/schema.ts';
import { VERSION } from '../version.ts';
import { SERVER } from './record.ts';

export type Identity = Config['proxy']['identity'];

/** Every proxy response's `Server` header: `sluice/<version>`, or AISIX's `AISIX/<version>`. */
export function serverHeader(identity: Identity): string {
  return identity === 'aisix' ? `AISIX/${VERSION}` : SERVER;
}

// What the admin listener mounts beside AISIX's read-only routes (docs/admin.md): the write API and the spend
// report. Each claims its own requests before AISIX's routing answers 404 or 405 for them.
import type { ConnInfo } from '../platform.ts';

export interface AdminExtension {
  /** Whether this request is the extension's (its path, and for a path AISIX also serves, its method). */
  handles(method: string, path: string): boolean;
  fetch(req: Request, conn: ConnInfo): Response | Promise<Response>;
}

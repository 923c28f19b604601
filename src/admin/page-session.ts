// The admin page's sign-in sessions (docs/admin.md "The admin page"): an opaque random id in an HttpOnly,
// SameSite=Strict cookie (Secure when the admin listener is TLS), the admin key and the CSRF token held here in
// memory only, each session ending after a fixed lifetime or at sign-out. A restart signs everyone out.
import { timingSafeEqual } from '../http/auth.ts';
import { base64Encode } from '../util/bytes.ts';

export const SESSION_COOKIE = 'sluice_admin_session';
/** A session ends this long after sign-in, used or not. */
export const SESSION_TTL_SECS = 8 * 3600;
/** Sessions held at once; the oldest is ended first, so sign-ins cannot grow memory without bound. */
const MAX_SESSIONS = 1000;

export interface PageSession {
  readonly id: string;
  /** The admin key signed in with: the page calls the admin API with it, so scopes are the API's own. */
  readonly key: string;
  readonly scope: 'read' | 'write';
  /** Bound to this session; every form POST carries it. */
  readonly csrf: string;
  readonly expiresAt: number;
}

/** 32 random bytes, base64url. */
export function randomToken(): string {
  const b = base64Encode(crypto.getRandomValues(new Uint8Array(32)));
  return b.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export class PageSessions {
  private readonly byId = new Map<string, PageSession>();
  constructor(private readonly now: () => number) {}

  open(key: string, scope: 'read' | 'write'): PageSession {
    this.sweep();
    if (this.byId.size >= MAX_SESSIONS) this.byId.delete(this.byId.keys().next().value!);
    const s = { id: randomToken(), key, scope, csrf: randomToken(), expiresAt: this.now() + SESSION_TTL_SECS * 1000 };
    this.byId.set(s.id, s);
    return s;
  }

  /** The live session of `id`; an expired one is ended here. */
  get(id: string | undefined): PageSession | undefined {
    if (id === undefined) return undefined;
    const s = this.byId.get(id);
    if (s && s.expiresAt <= this.now()) {
      this.byId.delete(id);
      return undefined;
    }
    return s;
  }

  close(id: string): void {
    this.byId.delete(id);
  }

  get size(): number {
    return this.byId.size;
  }

  private sweep(): void {
    const now = this.now();
    for (const [id, s] of this.byId) if (s.expiresAt <= now) this.byId.delete(id);
  }
}

/** Whether `given` is the session's CSRF token, compared in time independent of where it differs. */
export function csrfMatches(s: PageSession, given: unknown): Promise<boolean> {
  return typeof given === 'string' && given !== '' ? timingSafeEqual(s.csrf, given) : Promise.resolve(false);
}

/** The `Set-Cookie` value opening (or, with `maxAge` 0, ending) a session. */
export function sessionCookie(id: string, maxAge: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${id}; Path=/admin/page; Max-Age=${maxAge}; HttpOnly; SameSite=Strict${
    secure ? '; Secure' : ''
  }`;
}

/** The session id in a `Cookie` header, if any. */
export function sessionIdOf(cookieHeader: string | null): string | undefined {
  for (const part of (cookieHeader ?? '').split(';')) {
    const [k, v] = part.trim().split('=', 2);
    if (k === SESSION_COOKIE && v) return v;
  }
  return undefined;
}

// Where a provider's signing keys come from (docs/identity.md "Signing keys"): its `jwks_uri`, or the one its
// issuer's discovery document names; fetched through the gateway's upstream client (so `upstream.tls`
// applies), cached for 10 minutes, refetched at most once a second per URL (an unknown `kid` asks for one
// refetch), and a stale set kept serving when a refetch fails. Per gateway, for the life of the process.
import type { UpstreamFetch } from '../platform.ts';
import { type OidcProvider, urlHasCredentials } from '../resources/identity-schema.ts';
import type { Logger } from '../observability/logger.ts';
import { Cancel } from '../util/cancel.ts';
import type { Clock } from '../util/clock.ts';

/** How long a fetched key set, and a discovered JWKS URL, stay fresh. */
export const JWKS_TTL_MS = 600_000;
/** The least time between two fetches of one URL (or two discoveries of one issuer), counted from the last try. */
export const REFETCH_FLOOR_MS = 1_000;
const FETCH_TIMEOUT_MS = 5_000;
/** A real key set is a few KB: a bigger answer is a misconfigured URL, refused while it streams. */
export const MAX_BODY_BYTES = 512 * 1024;

/** One JWK as published; only the members key choice reads are typed. */
export interface Jwk {
  kty?: unknown;
  kid?: unknown;
  use?: unknown;
  alg?: unknown;
  [member: string]: unknown;
}

interface Fetched<T> {
  /** The last good value and when it landed. */
  value?: { v: T; at: number };
  /** When the last fetch ended, good or not: the refetch floor's clock. */
  lastAttempt?: number;
  /** The fetch in flight: concurrent callers share it. */
  inFlight?: Promise<T>;
}

export class KeySource {
  private readonly jwks = new Map<string, Fetched<readonly Jwk[]>>();
  private readonly discovered = new Map<string, Fetched<string>>();

  constructor(
    private readonly upstream: UpstreamFetch,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** The provider's JWKS URL: `jwks_uri` verbatim, or discovery's (cached, with the floor). Throws why not. */
  async jwksUrl(p: OidcProvider): Promise<string> {
    if (p.jwks_uri !== undefined) {
      if (urlHasCredentials(p.jwks_uri)) throw new Error('jwks_uri must not embed credentials');
      return p.jwks_uri;
    }
    const issuer = p.issuer;
    // The schema requires an issuer of every key-set provider; an etcd row that lost it still fails closed.
    if (issuer === undefined) throw new Error('a provider with no jwks_uri must declare an issuer to discover from');
    const e = entry(this.discovered, issuer);
    const now = this.clock();
    if (e.value && now - e.value.at < JWKS_TTL_MS) return e.value.v;
    if (e.inFlight) return e.value ? e.value.v : e.inFlight;
    if (e.lastAttempt !== undefined && now - e.lastAttempt < REFETCH_FLOOR_MS) {
      if (e.value) return e.value.v;
      throw new Error('OIDC discovery suppressed by the refresh interval');
    }
    try {
      return await this.settle(e, () => this.discover(issuer));
    } catch (err) {
      if (!e.value) throw new Error(`OIDC discovery failed: ${message(err)}`);
      this.log.warn('OIDC discovery re-fetch failed; keeping the previously resolved JWKS URL', {
        issuer: clip(issuer),
        error: message(err),
      });
      return e.value.v;
    }
  }

  /** The key set at `url`: the cached one while fresh, else fetched (a failed refetch keeps the stale set). */
  keys(url: string): Promise<readonly Jwk[]> {
    const e = entry(this.jwks, url);
    if (e.value && this.clock() - e.value.at < JWKS_TTL_MS) return Promise.resolve(e.value.v);
    // A known key never waits behind a slow refetch.
    if (e.inFlight && e.value) return Promise.resolve(e.value.v);
    return this.refetch(url);
  }

  /**
   * One refetch for a `kid` the cached set lacks, unless one ended less than a second ago (then the set in
   * hand). Rejects only when there is no set at all.
   */
  refetch(url: string): Promise<readonly Jwk[]> {
    const e = entry(this.jwks, url);
    if (e.inFlight) return e.inFlight;
    if (e.lastAttempt !== undefined && this.clock() - e.lastAttempt < REFETCH_FLOOR_MS) {
      return e.value
        ? Promise.resolve(e.value.v)
        : Promise.reject(new Error('JWKS fetch suppressed by the refresh interval'));
    }
    return this.settle(e, () => this.fetchKeys(url)).catch((err) => {
      if (!e.value) throw err;
      this.log.warn('JWKS re-fetch failed; keeping the previously fetched key set', { error: message(err) });
      return e.value.v;
    });
  }

  /** Runs one fetch for `e`, shared by whoever asks meanwhile; records its end and, when good, its value. */
  private settle<T>(e: Fetched<T>, fetchIt: () => Promise<T>): Promise<T> {
    const p = fetchIt().then(
      (v) => {
        const at = this.clock();
        e.value = { v, at };
        e.lastAttempt = at;
        e.inFlight = undefined;
        return v;
      },
      (err: unknown) => {
        e.lastAttempt = this.clock();
        e.inFlight = undefined;
        throw err;
      },
    );
    e.inFlight = p;
    return p;
  }

  private async discover(issuer: string): Promise<string> {
    const doc = await this.fetchJson(`${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`);
    if (!isObject(doc) || doc.issuer !== issuer) {
      throw new Error('discovery document issuer does not match the configured issuer');
    }
    if (typeof doc.jwks_uri !== 'string') throw new Error('discovery document carries no jwks_uri');
    if (!sameOrigin(issuer, doc.jwks_uri)) throw new Error("discovery jwks_uri is not on the issuer's origin");
    if (urlHasCredentials(doc.jwks_uri)) throw new Error('discovery jwks_uri must not embed credentials');
    return doc.jwks_uri;
  }

  private async fetchKeys(url: string): Promise<readonly Jwk[]> {
    const doc = await this.fetchJson(url);
    if (!isObject(doc) || !Array.isArray(doc.keys) || !doc.keys.every(isObject)) {
      throw new Error('not a JWKS document: `keys` must be an array of objects');
    }
    return doc.keys as Jwk[];
  }

  /** GET, no redirect followed (the client refuses them), 5 s, 2xx only, at most 512 KiB, JSON. */
  private async fetchJson(url: string): Promise<unknown> {
    const cancel = new Cancel();
    const timer = setTimeout(
      () => cancel.abort(new Error(`no answer within ${FETCH_TIMEOUT_MS} ms`)),
      FETCH_TIMEOUT_MS,
    );
    try {
      const res = await this.upstream({ url, method: 'GET', headers: { accept: 'application/json' }, signal: cancel });
      if (res.status < 200 || res.status > 299) {
        await res.discard().catch(() => {});
        throw new Error(`endpoint returned status ${res.status}`);
      }
      const declared = Number(res.header('content-length') ?? NaN);
      if (declared > MAX_BODY_BYTES) {
        await res.discard().catch(() => {});
        throw new Error(`response exceeds ${MAX_BODY_BYTES} bytes`);
      }
      const chunks: Uint8Array[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        size += chunk.byteLength;
        if (size > MAX_BODY_BYTES) {
          cancel.abort(new Error('too big'));
          throw new Error(`response exceeds ${MAX_BODY_BYTES} bytes`);
        }
        chunks.push(chunk);
      }
      const bytes = new Uint8Array(size);
      let at = 0;
      for (const c of chunks) {
        bytes.set(c, at);
        at += c.byteLength;
      }
      try {
        return JSON.parse(new TextDecoder().decode(bytes));
      } catch (err) {
        throw new Error(`response is not JSON: ${message(err)}`);
      }
    } finally {
      clearTimeout(timer);
    }
  }
}

function entry<T>(m: Map<string, Fetched<T>>, k: string): Fetched<T> {
  let e = m.get(k);
  if (!e) {
    e = {};
    m.set(k, e);
  }
  return e;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Same scheme, host and port (the scheme's default port when none is written). */
function sameOrigin(base: string, candidate: string): boolean {
  try {
    const [b, c] = [new URL(base), new URL(candidate)];
    return b.protocol === c.protocol && b.hostname === c.hostname && b.port === c.port;
  } catch {
    return false;
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Token and issuer text in a log line is attacker-chosen: at most 128 characters of it. */
export function clip(s: string): string {
  return s.length > 128 ? s.slice(0, 128) : s;
}

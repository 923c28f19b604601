// The request families' series of one request's label set, bound once (docs/performance.md "Decisions on the
// hot path"): every family's labels are a part of the fifteen `REQUEST_LABELS` values, so one lookup of those
// values finds every series the request updates. A series is bound (and so created) on its first use, as the
// family's own `inc`/`observe` would create it: the exposition's series and their order stay the same.
import { type BoundCounter, type BoundObserver, LabelIndex, statusClass } from './metrics.ts';

// Positions in the `REQUEST_LABELS` values.
const ENDPOINT = 0;
const PROVIDER = 2;
const MODEL = 3;
const IDENT_END = 11; // endpoint … user_name: the token families' labels
const STREAM = 11;
const STATUS = 13;
const OUTCOME = 14;

type Counts = { bind(values: readonly string[]): BoundCounter };
type Observes = { bind(values: readonly string[]): BoundObserver };

/** The families a request's series belong to (`GatewayMetrics` has them). */
export interface RequestFamilies {
  readonly legacyRequests: Counts;
  readonly legacyDuration: Observes;
  readonly proxyRequests: Counts;
  readonly proxyFailedRequests: Counts;
  readonly proxyDuration: Observes;
  readonly llmRequests: Counts;
  readonly llmDuration: Observes;
  readonly requestE2e: Observes;
  readonly requestTtft: Observes;
  readonly llmTtft: Observes;
  readonly llmInputTokens: Counts;
  readonly llmOutputTokens: Counts;
  readonly llmTotalTokens: Counts;
  readonly tokensConsumed: Counts;
  readonly llmSpend: Counts;
}

/** Every series of one label set; each bound on first use. */
export class BoundRequest {
  #legacyRequests?: BoundCounter;
  #legacyDuration?: BoundObserver;
  #proxyRequests?: BoundCounter;
  #proxyFailed?: BoundCounter;
  #proxyDuration?: BoundObserver;
  #llmRequests?: BoundCounter;
  #llmDuration?: BoundObserver;
  #e2e?: BoundObserver;
  #ttft?: BoundObserver;
  #llmTtft?: BoundObserver;
  #input?: BoundCounter;
  #output?: BoundCounter;
  #total?: BoundCounter;
  #consumed?: BoundCounter;
  #spend?: BoundCounter;

  constructor(private readonly m: RequestFamilies, private readonly l: readonly string[]) {}

  private ident(): string[] {
    return this.l.slice(0, IDENT_END);
  }
  /** The duration families' labels: the request labels without `is_fallback`. */
  private duration(): string[] {
    const l = this.l;
    return this.ident().concat(l[STREAM]!, l[STATUS]!, l[OUTCOME]!);
  }
  /** The SLO histograms' labels: `env_id`, endpoint, model, provider, status class, streaming. */
  private slo(): string[] {
    const l = this.l;
    return ['unknown', l[ENDPOINT]!, l[MODEL]!, l[PROVIDER]!, statusClass(Number(l[STATUS]!)), l[STREAM]!];
  }

  get legacyRequests(): BoundCounter {
    const l = this.l;
    return this.#legacyRequests ??= this.m.legacyRequests.bind([l[PROVIDER]!, l[MODEL]!, l[STATUS]!, l[OUTCOME]!]);
  }
  get legacyDuration(): BoundObserver {
    const l = this.l;
    return this.#legacyDuration ??= this.m.legacyDuration.bind([l[PROVIDER]!, l[MODEL]!, l[STATUS]!]);
  }
  get proxyRequests(): BoundCounter {
    return this.#proxyRequests ??= this.m.proxyRequests.bind(this.l);
  }
  get proxyFailedRequests(): BoundCounter {
    return this.#proxyFailed ??= this.m.proxyFailedRequests.bind(this.l);
  }
  get proxyDuration(): BoundObserver {
    return this.#proxyDuration ??= this.m.proxyDuration.bind(this.duration());
  }
  get llmRequests(): BoundCounter {
    return this.#llmRequests ??= this.m.llmRequests.bind(this.l);
  }
  get llmDuration(): BoundObserver {
    return this.#llmDuration ??= this.m.llmDuration.bind(this.duration());
  }
  get requestE2e(): BoundObserver {
    return this.#e2e ??= this.m.requestE2e.bind(this.slo());
  }
  get requestTtft(): BoundObserver {
    return this.#ttft ??= this.m.requestTtft.bind(this.slo());
  }
  get llmTtft(): BoundObserver {
    return this.#llmTtft ??= this.m.llmTtft.bind(this.ident());
  }
  get llmInputTokens(): BoundCounter {
    return this.#input ??= this.m.llmInputTokens.bind(this.ident());
  }
  get llmOutputTokens(): BoundCounter {
    return this.#output ??= this.m.llmOutputTokens.bind(this.ident());
  }
  get llmTotalTokens(): BoundCounter {
    return this.#total ??= this.m.llmTotalTokens.bind(this.ident());
  }
  get tokensConsumed(): BoundCounter {
    const l = this.l;
    return this.#consumed ??= this.m.tokensConsumed.bind([l[PROVIDER]!, l[MODEL]!]);
  }
  get llmSpend(): BoundCounter {
    return this.#spend ??= this.m.llmSpend.bind(this.ident());
  }
}

/** The bound series of each request label set seen (as many as `aisix_proxy_requests_total` has series). */
export class RequestSeries {
  private readonly index: LabelIndex<BoundRequest>;
  constructor(m: RequestFamilies) {
    this.index = new LabelIndex((values) => new BoundRequest(m, [...values]));
  }
  /** The series of one request's fifteen `REQUEST_LABELS` values. */
  of(labels: readonly string[]): BoundRequest {
    return this.index.get(labels);
  }
}

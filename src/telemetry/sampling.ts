// Which requests an exporter exports (docs/operations.md "Tracing"). A root request is kept by AISIX's rule:
// FNV-1a-64 over a per-process random salt and the request id, bucket mod 10 000 below
// round(sample_rate × 10 000); 1.0 keeps all, 0 none. A caller that continues its own trace decides for the
// trace (parent-based): sampled → kept, not sampled → not kept; `sample_rate: 0` still keeps nothing.

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const BUCKETS = 10_000;

/** A fresh salt per process, so replicas and restarts keep different subsets. */
export function randomSalt(): string {
  const b = new Uint32Array(2);
  crypto.getRandomValues(b);
  return `${b[0]!.toString(16)}${b[1]!.toString(16)}`;
}

function fnv1a64(text: string): bigint {
  let h = FNV_OFFSET;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // UTF-16 code units, low byte then high byte when there is one: ids are ASCII in practice.
    h = BigInt.asUintN(64, (h ^ BigInt(c & 0xff)) * FNV_PRIME);
    if (c > 0xff) h = BigInt.asUintN(64, (h ^ BigInt(c >> 8)) * FNV_PRIME);
  }
  return h;
}

/** Whether a root request (no caller context) is exported at `rate`. */
export function sampledByRate(rate: number, salt: string, requestId: string): boolean {
  if (rate >= 1) return true;
  if (!(rate > 0)) return false;
  const bucket = Number(fnv1a64(salt + requestId) % BigInt(BUCKETS));
  return bucket < Math.round(rate * BUCKETS);
}

/** The decision for one exporter: `parentSampled` is the caller's flag when it sent a valid context. */
export function sampled(rate: number, salt: string, requestId: string, parentSampled: boolean | undefined): boolean {
  if (!(rate > 0)) return false;
  if (parentSampled !== undefined) return parentSampled;
  return sampledByRate(rate, salt, requestId);
}

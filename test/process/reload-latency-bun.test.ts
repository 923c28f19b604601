// The 20k-row reload suite (test/support/reload-latency.ts) on Bun: one file per runtime, so each
// runtime's boots and reloads of the big file get their own share of the runner's per-file budget.
// Run: node build.mjs && node --import tsx --test test/process/reload-latency-bun.test.ts
import { reloadLatencySuite } from '../support/reload-latency.ts';

reloadLatencySuite('bun');

// The flags Sluice runs under on Deno: `deno run -A --v8-flags=--max-semi-space-size=8 runtimes/deno.ts`.
// V8 sizes the young generation's two semi-spaces itself by default, up to 32 MiB each on Deno 2.9 (the new
// space's room once grown; test/process/deno-launch.test.ts), and under 50 connections they grow to it: the gateway's
// peak RSS was 243–251 MB in five benchmark runs. Capped at 8 MiB it was 205–211 MB, with the same median
// CPU per request (132 µs; docs/performance.md "Deno's memory"); smaller caps save little more and cost CPU.
// The README, `deno task start`, the tests and the benchmark all start Sluice this way; an operator can add
// V8 flags of their own (`DENO_V8_FLAGS`).
export const DENO_RUN_FLAGS: readonly string[] = ['-A', '--v8-flags=--max-semi-space-size=8'];

// The flags Sluice runs under on Deno; the README, `deno task start`, the tests and the benchmark use them.
// The semi-space cap keeps V8's young generation from growing under load, which costs peak memory and saves
// no CPU; a smaller cap costs CPU. The growing percent lets the old generation reach twice what survived the
// last full collection before the next, where V8 allows up to four times: the request state that outlives
// scavenges (in flight across two of them) fills the old generation and dies there. Maglev's finished
// compilations are freed on the main thread: left to V8's background threads, which the compilations themselves
// keep busy, their memory piles up while the gateway warms (docs/performance.md "Deno's memory"). V8's memory
// reducer is off: the collections it starts once the gateway idles leave the next requests running cold, at twice
// the CPU; the heap then stays at what the load grew it to, never above its peak under load (docs/performance.md
// "Decisions on the hot path"). Incremental marking runs without its own tasks (on allocation and in V8's
// background threads): while its tasks keep coming, Deno's event loop runs them and its timers without
// reading its sockets, so requests waited hundreds of milliseconds during a large reload (docs/performance.md
// "Configuration at scale").
export const DENO_RUN_FLAGS: readonly string[] = [
  '-A',
  '--v8-flags=--max-semi-space-size=8,--heap-growing-percent=100,--no-maglev-destroy-on-background,--no-memory-reducer,--no-incremental-marking-task',
];

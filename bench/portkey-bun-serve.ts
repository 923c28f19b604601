// Preloaded into Portkey on Bun (`bun --preload bench/portkey-bun-serve.ts …/start-server.js`): its CLI binds
// through `@hono/node-server`; this hands its Hono app to `Bun.serve` instead, as Portkey's own Bun entry
// (an exported `fetch`) is served, so the Portkey-on-Bun row is the faster of the two ways to run it.
// Binds 127.0.0.1 only. Runs on Bun only (type-checked with the declarations below).
declare const Bun: {
  plugin(p: { name: string; setup(b: { module(id: string, f: () => unknown): void }): void }): void;
  serve(o: { fetch: unknown; port: number; hostname: string; idleTimeout: number }): { port: number };
};
const { getRequestListener } = await import('@hono/node-server');
Bun.plugin({
  name: 'portkey-bun-serve',
  setup(b) {
    b.module('@hono/node-server', () => ({
      loader: 'object',
      exports: {
        getRequestListener,
        serve(o: { fetch: unknown; port: number }) {
          const s = Bun.serve({ fetch: o.fetch, port: o.port, hostname: '127.0.0.1', idleTimeout: 0 });
          // @hono/node-ws injects its upgrade handler into the server; there is none to inject into here.
          return { on() {}, address: () => ({ port: s.port }) };
        },
      },
    }));
  },
});
export {};

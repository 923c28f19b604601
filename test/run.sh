#!/bin/sh
# The whole test suite, as CI runs it: formatter and linter (deno fmt/lint, configured in deno.json),
# strict type-checks of every entrypoint (Node's types for src/, runtimes/node.ts, tests and benches; Bun's for
# runtimes/bun.ts; `deno check` for runtimes/deno.ts), the Node bundle, then every test file under Node's
# built-in runner (its closing summary is what CI reads).
set -e
cd "$(dirname "$0")/.."
node_modules/.bin/deno fmt --check
node_modules/.bin/deno lint
npx tsc --noEmit
npx tsc --noEmit -p tsconfig.bun.json
node_modules/.bin/deno check --quiet runtimes/deno.ts
node build.mjs
exec node --import tsx --test --test-concurrency=2 --test-timeout=300000 test/unit/*.test.ts test/conformance/*.test.ts test/process/*.test.ts

#!/bin/sh
# The whole test suite, as CI runs it: formatter and linter (deno fmt/lint, configured in deno.json),
# strict type-check, the Node bundle, then every test file under Node's built-in runner (its closing
# summary is what CI reads).
set -e
cd "$(dirname "$0")/.."
node_modules/.bin/deno fmt --check
node_modules/.bin/deno lint
npx tsc --noEmit
node build.mjs
exec node --import tsx --test --test-concurrency=2 --test-timeout=300000 test/*.test.ts

#!/bin/sh
# The test suite by kind, as CI runs it. `sh test/run.sh` runs every kind in this order; `sh test/run.sh unit
# process` runs only those (`npm run test:<kind>`, `npm run check` for the static checks):
#   static       deno fmt --check and deno lint (deno.json), strict type-checks of every entrypoint (Node's types
#                for src/, runtimes/node.ts, tests and benches; Bun's for runtimes/bun.ts; `deno check` for
#                runtimes/deno.ts)
#   unit         test/unit: in-process, needs nothing beyond `npm ci`; run bundled, several files to a process
#                (test/support/bundle-tests.mjs)
#   conformance  test/conformance: the AISIX contract tables (one file starts etcd)
#   integration  test/integration: in-process against real etcd, Redis, openssl, or the CLI (bin/sluice)
#   process      test/process: real gateway processes of each runtime; the files that measure a victim's latency
#                against its baseline (test/support/victim.ts) run after the others, one at a time, so that no
#                other file's processes share the cores while they measure (`process, alone`)
#   clients      test/clients: the real client programs from npm (Claude Code, Codex, the AI SDK, LangChain, the
#                Agents SDK, the official SDKs) through a gateway process to a scripted upstream (about a minute)
# The last three build the Node bundle first (once), since bin/sluice and the process tests run it.
# A kind prints Node's test report, then `<kind>: N passed, M failed` and each failed test's name, place and error.
# The last lines repeat each kind's result and failures, and end with one line summing them all, `N passed, M
# failed` (a static check counts as one), which CI reads.
# The exit status is non-zero when any check or test failed. TEST_CONCURRENCY sets the files run at once: 6 for
# unit (its files mostly wait on in-process sockets and timers, so six overlap well on two cores), 2 for the rest.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
results=''

tally() { # kind passed failed seconds
  line="$1: $2 passed, $3 failed ($4 s)"
  echo "$line"
  results="$results$line
"
  passed=$((passed + $2))
  failed=$((failed + $3))
}

static() {
  start=$(date +%s) p=0 f=0
  for check in 'node_modules/.bin/deno fmt --check' 'node_modules/.bin/deno lint' 'node_modules/.bin/tsc --noEmit' \
    'node_modules/.bin/tsc --noEmit -p tsconfig.bun.json' 'node_modules/.bin/deno check --quiet runtimes/deno.ts'; do
    if $check; then p=$((p + 1)); else
      f=$((f + 1))
      echo "failed: $check"
    fi
  done
  tally 'static checks' $p $f $(($(date +%s) - start))
}

# Node's runner over the files given; its report goes to the terminal as it would alone (spec on a terminal, TAP
# otherwise), a second TAP copy to a file for the counts. `loader`: the Node flag that reads the files.
tests() { # kind concurrency loader file...
  kind=$1
  concurrency=$2
  loader=$3
  shift 3
  start=$(date +%s)
  if [ -t 1 ]; then shown=spec; else shown=tap; fi
  node $loader --test --test-concurrency="$concurrency" --test-timeout=300000 \
    --test-reporter=$shown --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="$tmp/$kind.tap" "$@"
  rc=$?
  count() { sed -n "s/^# $1 \([0-9]*\)\$/\1/p" "$tmp/$kind.tap" | tail -n 1; }
  p=$(count pass) f=$(count fail) c=$(count cancelled)
  f=$((${f:-0} + ${c:-0}))
  # A runner that exits non-zero with no failed test (it crashed, or a file failed to load) still fails the kind.
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  tally "$kind" "${p:-0}" "$f" $(($(date +%s) - start))
  # The failed tests' names join the closing summary, since a CI log may keep only its tail.
  if [ "$f" -gt 0 ]; then
    failures=$(awk -v root="$PWD/" -f test/support/tap-failures.awk "$tmp/$kind.tap")
    echo "$failures"
    results="$results$failures
"
  fi
}

# The unit files run bundled (test/support/bundle-tests.mjs), UNIT_GROUPS of them to a process (10 by default;
# 0 runs each file in its own process, as the other kinds do): no TypeScript loader starts with each file, and a
# group loads the gateway's modules once.
unit() {
  groups=${UNIT_GROUPS:-10}
  if node test/support/bundle-tests.mjs --groups "$groups" test/unit/*.test.ts; then
    if [ "$groups" -gt 0 ]; then set -- .test-build/*.test.mjs; else set -- .test-build/test/unit/*.test.mjs; fi
    tests unit "${TEST_CONCURRENCY:-6}" --enable-source-maps "$@"
  else
    echo 'the unit files failed to bundle (node test/support/bundle-tests.mjs)'
    tally unit 0 1 0
  fi
}

# The latency-measuring files (those using test/support/victim.ts) apart from the rest, then alone.
process() {
  alone=$(grep -l "support/victim.ts'" test/process/*.test.ts)
  set --
  for f in test/process/*.test.ts; do
    case " $(echo $alone) " in *" $f "*) ;; *) set -- "$@" "$f" ;; esac
  done
  tests process "${TEST_CONCURRENCY:-2}" '--import tsx' "$@"
  # With no file named, Node's runner would look for test files everywhere.
  if [ -n "$alone" ]; then tests 'process, alone' 1 '--import tsx' $alone; fi
}

built=''
bundled() { # kind: builds the Node bundle once; a kind whose bundle failed to build fails
  if [ -z "$built" ]; then
    if node build.mjs; then built=yes; else built=failed; fi
  fi
  if [ "$built" = failed ]; then
    echo "the Node bundle failed to build (node build.mjs); the $1 tests run it"
    tally "$1" 0 1 0
    return 1
  fi
}

for kind in ${@:-static unit conformance integration process clients}; do
  case $kind in
  static) static ;;
  unit) unit ;;
  conformance) tests conformance "${TEST_CONCURRENCY:-2}" '--import tsx' test/conformance/*.test.ts ;;
  integration | clients) if bundled "$kind"; then tests "$kind" "${TEST_CONCURRENCY:-2}" '--import tsx' test/"$kind"/*.test.ts; fi ;;
  process) if bundled "$kind"; then process; fi ;;
  *)
    echo "unknown kind: $kind (static, unit, conformance, integration, process, clients)" >&2
    exit 2
    ;;
  esac
done

echo
printf '%s' "$results"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

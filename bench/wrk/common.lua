-- Shared by the benchmark's wrk scripts: request set-up from environment variables and a machine-readable
-- summary line. wrk runs this file once per thread (and once more for the summary).
--
--   BENCH_HEADERS  extra request headers, "name: value" pairs separated by "|"
--   BENCH_BODY     request body (POST scripts)
--
-- done() prints one line `BENCH_WRK {json}` with requests, duration, errors and latency percentiles in µs.
local M = {}

function M.headers()
  local h = {}
  local raw = os.getenv("BENCH_HEADERS") or ""
  for pair in string.gmatch(raw, "[^|]+") do
    local name, value = string.match(pair, "^%s*([^:]+):%s*(.-)%s*$")
    if name then h[name] = value end
  end
  return h
end

function M.done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_WRK {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"min":%d,"mean":%.1f,"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max))
end

return M

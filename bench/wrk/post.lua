-- POST a fixed JSON body (chat completion, JSON or SSE) with the headers from BENCH_HEADERS.
-- Used for every target: the upstream directly, Sluice, Portkey. See common.lua for the variables.
package.path = (os.getenv("BENCH_WRK_DIR") or "bench/wrk") .. "/?.lua;" .. package.path
local common = require("common")

wrk.method = "POST"
wrk.body = os.getenv("BENCH_BODY") or '{"model":"bench-route","messages":[{"role":"user","content":"hi"}]}'
wrk.headers = common.headers()
wrk.headers["Content-Type"] = "application/json"

done = common.done

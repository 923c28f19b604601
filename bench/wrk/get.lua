-- GET with the headers from BENCH_HEADERS (probe paths). See common.lua.
package.path = (os.getenv("BENCH_WRK_DIR") or "bench/wrk") .. "/?.lua;" .. package.path
local common = require("common")

wrk.method = "GET"
wrk.headers = common.headers()

done = common.done

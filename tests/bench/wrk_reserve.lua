-- wrk script for `make bench-http`: POST /v1/reservations with a unique
-- reservation id per request (run id, thread, counter), one unit of a SKU picked
-- uniformly from SKU-00000.. (as hfbench seed names them), a short TTL so that the
-- holds expire and the stock comes back. Paced: each connection waits delay_ms
-- before each request (wrk is closed-loop; this caps the rate at
-- connections x 1000 / (delay_ms + latency)). Prints, for the bench to parse:
--   status <code> <count>        per HTTP status
--   sample <code> <body>         one answer other than 201 per thread
--   latency_us p50 .. max        over every response
--   requests .. errors ..        wrk's own counters
-- usage: wrk -c C -d S -t T -s wrk_reserve.lua URL -- SKUS DELAY_MS RUN_ID TTL_MS [close]
-- ("close": each request asks "Connection: close", so every request opens a new
-- connection: with https, a full TLS handshake per request)
local threads = {}

function setup(thread)
   table.insert(threads, thread)
   thread:set("tid", #threads)
end

function init(args)
   skus = tonumber(args[1]) or 1000
   delay_ms = tonumber(args[2]) or 0
   run_id = args[3] or "wrk"
   ttl_ms = tonumber(args[4]) or 3000
   close = args[5] == "close"
   counter = 0
   statuses = {}
   math.randomseed(tid * 7919)
end

function delay()
   return delay_ms
end

function request()
   counter = counter + 1
   local rid = string.format("%s-%d-%d", run_id, tid, counter)
   local sku = string.format("SKU-%05d", math.random(0, skus - 1))
   local body = string.format(
      '{"reservation_id":"%s","lines":[{"sku":"%s","qty":1}],"ttl_ms":%d}', rid, sku, ttl_ms)
   local headers = {["Content-Type"] = "application/json", ["Idempotency-Key"] = rid}
   if close then headers["Connection"] = "close" end
   return wrk.format("POST", "/v1/reservations", headers, body)
end

function response(status, headers, body)
   statuses[status] = (statuses[status] or 0) + 1
   if status ~= 201 and not sample then
      sample = string.format("%d %s", status, string.sub(body or "", 1, 200))
   end
end

function done(summary, latency, requests)
   local total = {}
   for _, t in ipairs(threads) do
      local s = t:get("sample")
      if s then io.write("sample " .. s .. "\n") end
      for code, n in pairs(t:get("statuses")) do
         total[code] = (total[code] or 0) + n
      end
   end
   for code, n in pairs(total) do
      io.write(string.format("status %d %d\n", code, n))
   end
   io.write(string.format("latency_us p50 %d p90 %d p99 %d p999 %d max %d\n",
                          latency:percentile(50), latency:percentile(90),
                          latency:percentile(99), latency:percentile(99.9), latency.max))
   io.write(string.format("requests %d duration_us %d errors connect %d read %d write %d timeout %d\n",
                          summary.requests, summary.duration, summary.errors.connect,
                          summary.errors.read, summary.errors.write, summary.errors.timeout))
end

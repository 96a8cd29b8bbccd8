-- records-put.lua: wrk's request for the records benchmarks, a PUT of a
-- fresh key each time. The scripts set run (a prefix unique to the run)
-- by rewriting the "local n = 0" line.
local n = 0
request = function()
  n = n + 1
  return wrk.format("PUT", "/v1/records/" .. run .. "-" .. n, {["Content-Type"] = "application/json"},
    '{"name":"bench","team":"records"}')
end

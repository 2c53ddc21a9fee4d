-- wrk script of bench/scale.py: the request of wrk_echo.lua (a stateless 2026-07-28
-- tools/call of echo), sent at a steady rate: each connection waits
-- MODELCTX_WRK_DELAY_MS milliseconds after an answer before its next request, so the
-- load is connections x 1000 / (delay + latency) requests/s rather than all the box can do.
--   MODELCTX_WRK_DELAY_MS=10 wrk -t2 -c20 -d10s --latency -s bench/wrk_scale.lua http://127.0.0.1:PORT/mcp
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'

local pause = tonumber(os.getenv("MODELCTX_WRK_DELAY_MS") or "0")

function delay()
   return pause
end

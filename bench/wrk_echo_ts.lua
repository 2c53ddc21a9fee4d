-- wrk script for the TypeScript SDK's stateless HTTP server (bench/servers/ts_echo.cjs http PORT):
-- the same tools/call of `echo` as wrk_echo.lua, in the form that SDK speaks (2025-06-18,
-- no _meta envelope; a stateless server answers it without a handshake).
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2025-06-18"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}'

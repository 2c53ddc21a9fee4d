-- wrk script: POST one 2026-07-28 tools/call of `echo` with the Streamable HTTP headers.
--   wrk -t1 -c50 -d5s --latency -s bench/wrk_echo.lua http://127.0.0.1:PORT/mcp
-- The same request (same id) every time: 2026-07-28 requests are stateless, so the
-- server treats each one on its own. Keep in step with harness.echo_call/HTTP_HEADERS.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'

// The official TypeScript SDK's echo server (@modelcontextprotocol/sdk, pinned in
// scripts/test.sh under .tools/ts-sdk), the peer of issue 25:
//
//     node ts_echo.cjs                 stdio, the echo tool
//     node ts_echo.cjs tools N         stdio, N tools (tool_0 .. tool_N-1) beside echo
//     node ts_echo.cjs http PORT       Streamable HTTP on 127.0.0.1:PORT/mcp, stateless, JSON answers
//
// MODELCTX_TS_SDK_DIR names the folder npm installed the SDK into (its package.json).
"use strict";
const path = require("node:path");
const { createRequire } = require("node:module");

const sdkDir = process.env.MODELCTX_TS_SDK_DIR || path.join(__dirname, "..", "..", ".tools", "ts-sdk");
const load = createRequire(path.join(sdkDir, "package.json"));
const { McpServer } = load("@modelcontextprotocol/sdk/server/mcp.js");
const { z } = load("zod");

function build(extra) {
  const server = new McpServer({ name: "bench-echo-ts", version: "1.0" });
  server.registerTool(
    "echo",
    { description: "Echo the text back.", inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: "text", text }] }),
  );
  for (let i = 0; i < extra; i++) {
    server.registerTool(
      `tool_${i}`,
      { description: `Forecast number ${i} for a city.`, inputSchema: { city: z.string(), days: z.number().int().default(3) } },
      async ({ city }) => ({ content: [{ type: "text", text: city }] }),
    );
  }
  return server;
}

async function main() {
  const [mode, value] = process.argv.slice(2);
  if (mode === "http") {
    const http = require("node:http");
    const { StreamableHTTPServerTransport } = load("@modelcontextprotocol/sdk/server/streamableHttp.js");
    const httpServer = http.createServer(async (req, res) => {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      const body = JSON.parse(Buffer.concat(chunks).toString() || "null");
      // Stateless: a server and a transport per request, as the SDK's example does.
      const server = build(0);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on("close", () => { transport.close(); server.close(); });
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
    });
    httpServer.listen(Number(value), "127.0.0.1");
    return;
  }
  const { StdioServerTransport } = load("@modelcontextprotocol/sdk/server/stdio.js");
  await build(mode === "tools" ? Number(value) : 0).connect(new StdioServerTransport());
}

main().catch((err) => { console.error(err); process.exit(1); });

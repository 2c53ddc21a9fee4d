"""Call a tool of an OAuth-protected MCP server (README, "A protected server").

The first request is refused (401); the client then finds the server's authorization
server, registers, and opens the browser to sign in; the browser comes back to a
loopback port, the client exchanges the code for a token and retries. Tokens live in
memory here: pass ``store=FileTokenStore(path)`` to stay signed in across runs.

    python examples/oauth_client.py [URL]     (default http://127.0.0.1:8000/mcp)
"""

import asyncio
import sys

from modelctx import Client
from modelctx.auth import OAuthClientProvider


async def main(url: str) -> None:
    async with Client(url, auth=OAuthClientProvider()) as client:
        result = await client.call_tool("forecast", {"city": "Oslo"})
        print(result.structured_content)


asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/mcp"))

"""A client process the soak run kills mid-call: ``victim_client.py SERVER-ARGV...``.

It starts the stdio server, prints ``calling PID`` (the server's pid) once its tool
runs, and waits for the call; the run kills it with SIGKILL there, and checks that the
server, its pipes now closed, exits on its own.
"""

from __future__ import annotations

import asyncio
import os
import sys

from modelctx import Client
from modelctx.transports.stdio_client import StdioClientTransport


async def main(argv: list[str]) -> None:
    transport = StdioClientTransport(argv, env=dict(os.environ))
    async with Client(transport, mode="2026-07-28", timeout=120) as client:
        call = asyncio.create_task(client.call_tool("work", {"steps": 1000, "delay": 0.05}))
        await asyncio.sleep(0.3)
        print(f"calling {transport.pid}", flush=True)
        await asyncio.wait_for(call, 120)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))

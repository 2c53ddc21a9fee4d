"""Micro-measurements behind issue 25's isolated items; run on its own, never in tests.

    python bench/micro_i25.py auth        # HttpClientTransport._base_headers, per call
    python bench/micro_i25.py schema      # start: a server with one input_schema= tool
    python bench/micro_i25.py bigreply    # peak memory of writing a 10 MB reply on stdio

Each prints one line of figures; run it three times and report the range. tools/list of
1,000 and 10,000 tools is a row of ``bench/run.py --only issue25``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time


def bench_auth() -> None:
    from modelctx.transports.http_client import HttpClientTransport

    class Bearer:
        async def headers(self, method: str, url: str) -> dict[str, str]:
            return {"Authorization": "Bearer t"}

        async def challenged(self, status: int, headers: object, method: str, url: str) -> bool:
            return False

    async def hook() -> dict[str, str]:
        return {"Authorization": "Bearer t"}

    async def main() -> None:
        for name, auth in (("HttpAuth", Bearer()), ("hook", hook), ("none", None)):
            t = HttpClientTransport("http://127.0.0.1:1/mcp", auth=auth)  # type: ignore[arg-type]
            n = 100_000
            for _ in range(1000):
                await t._base_headers()
            start = time.perf_counter()
            for _ in range(n):
                await t._base_headers()
            print(f"{name}: {(time.perf_counter() - start) / n * 1e6:.2f} us per _base_headers")

    asyncio.run(main())


_START = """
import time
t = time.perf_counter()
from modelctx import Server
server = Server("start")
@server.tool(input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
def forecast(**arguments): return "sunny"
print((time.perf_counter() - t) * 1e3)
"""


def bench_schema() -> None:
    """Import + register one input_schema= tool, in a fresh interpreter (median of 7)."""
    subprocess.run([sys.executable, "-c", _START], check=True, capture_output=True)  # warm .pyc
    runs = sorted(
        float(subprocess.run([sys.executable, "-c", _START], check=True, capture_output=True, text=True).stdout)
        for _ in range(7)
    )
    print(f"import + one input_schema tool: median {runs[3]:.1f} ms (min {runs[0]:.1f}, max {runs[-1]:.1f})")


def bench_bigreply() -> None:
    """Peak traced memory while stdio writes a 10 MB reply to a pipe nobody reads yet."""
    import os
    import resource
    import threading
    import tracemalloc

    from modelctx.transports.stdio import _open_stdout

    size = 10 * 1024 * 1024
    message = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "x" * size}]}}
    read_fd, write_fd = os.pipe()

    def drain() -> None:  # the peer reads only after the write has been buffered
        time.sleep(0.3)
        while os.read(read_fd, 1 << 20):
            pass

    async def main() -> None:
        writer = await _open_stdout(os.fdopen(write_fd, "wb", buffering=0))
        threading.Thread(target=drain, daemon=True).start()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        await writer.send(message)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss
        print(f"10 MB reply on stdio, above the message: traced peak {peak / size:.2f}x its size, "
              f"peak RSS growth {grown / size:.2f}x")

    asyncio.run(main())


if __name__ == "__main__":
    {"auth": bench_auth, "schema": bench_schema, "bigreply": bench_bigreply}[sys.argv[1]]()

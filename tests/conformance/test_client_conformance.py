"""The official MCP conformance suite against our Client (tests/fixtures/conformance/client.py).

The suite starts its own mock servers on localhost and runs
``python tests/fixtures/conformance/client.py URL`` once per scenario. A run passes when the
suite's baseline comparison passes (baseline.yml lists the allowed failures with
their reasons: none for the client) and no scenario fails. The extension scenarios of
OAuth client credentials (``auth/client-credentials-*``), workload identity federation
(``auth/wif-jwt-bearer``) and enterprise-managed authorization are not in ``--suite all``
and run one by one.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conformance.test_server_conformance import BASELINE, _env, _suite_command
from tests.support.paths import CONFORMANCE

CLIENT = CONFORMANCE / "client.py"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_client_conformance(version: str) -> None:
    command = [
        *_suite_command(),
        "client",
        "--command",
        f"{sys.executable} {CLIENT}",
        "--suite",
        "all",
        "--spec-version",
        version,
        "--expected-failures",
        str(BASELINE),
    ]
    out = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=540)
    report = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    summary = report[report.rfind("Total:") - 4000 :] if "Total:" in report else report[-4000:]
    sys.stdout.write(f"\n--- client conformance {version} ---\n{summary}\n")
    lines = [line for line in report.splitlines() if line.startswith(("✓", "✗"))]
    failing = [line for line in lines if line.startswith("✗")]
    passing = [line for line in lines if line.startswith("✓")]
    assert passing, f"no scenario passed; the suite said:\n{report[-3000:]}"
    assert any(line[2:].startswith("auth/") for line in passing), f"no auth scenario ran:\n{summary}"
    assert not failing, "client scenarios failing:\n" + "\n".join(failing)
    assert out.returncode == 0, f"the suite's baseline check failed:\n{summary}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "scenario",
    [
        "auth/client-credentials-jwt",
        "auth/client-credentials-basic",
        "auth/wif-jwt-bearer",
        "auth/enterprise-managed-authorization",
        "auth/dpop",
        "auth/dpop-nonce",
    ],
)
@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_auth_extension_scenarios(scenario: str, version: str) -> None:
    # Authorization extensions (client credentials, workload identity, enterprise-managed
    # authorization, DPoP) are not part of a spec version's set: --force runs them under
    # each era's lifecycle.
    command = [
        *_suite_command(),
        "client",
        "--command",
        f"{sys.executable} {CLIENT}",
        "--scenario",
        scenario,
        "--spec-version",
        version,
        "--force",
    ]
    out = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=240)
    report = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    assert "OVERALL: PASSED" in report and out.returncode == 0, report[-3000:]

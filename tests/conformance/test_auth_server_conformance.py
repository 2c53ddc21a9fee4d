"""The conformance suite's authorization-server scenarios against ``modelctx auth-server``.

``conformance authorization`` runs ``authorization-server-metadata-endpoint`` and then
``authorization-code-grant`` (which reads the metadata the first one found, so they run
together). The code grant prints an authorization URL for a person to open in a browser
and waits on a loopback callback; this test is that browser: it opens the URL, and the
server (``--auto-approve``) redirects to the suite's callback with the code.
"""

from __future__ import annotations

import queue
import re
import subprocess
import threading

import httpx
import pytest

from tests.auth.test_dev_server import auth_server
from tests.conformance.test_server_conformance import _env, _suite_command
from tests.support.wire import DEADLINE, free_port


@pytest.mark.timeout(180)
@pytest.mark.parametrize("spec_version", ["2025-11-25", "2026-07-28"])
def test_authorization_server_scenarios_pass(spec_version: str) -> None:
    command = _suite_command()
    callback_port = free_port()
    with auth_server("--auto-approve", "--client", "conformance-client") as issuer:
        suite = subprocess.Popen(
            [
                *command,
                "authorization",
                "--url",
                issuer,
                "--client-id",
                "conformance-client",
                "--port",
                str(callback_port),
                "--resource",
                "http://127.0.0.1:8000/mcp",
                "--spec-version",
                spec_version,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_env(),
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert suite.stdout is not None
            for line in suite.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        output: list[str] = []
        try:
            while True:
                try:
                    line = lines.get(timeout=120)
                except queue.Empty:
                    pytest.fail(f"the suite went quiet:\n{''.join(output)}")
                if line is None:
                    break
                output.append(line)
                if line.startswith(f"{issuer}/authorize?"):
                    _browse(line.strip(), callback_port)
            suite.wait(timeout=DEADLINE)
        finally:
            if suite.poll() is None:
                suite.kill()
                suite.wait(timeout=DEADLINE)
    report = re.sub(r"\x1b\[[0-9;]*m", "", "".join(output))
    summary = report[report.find("=== SUMMARY ===") :]
    assert re.search(r"✓ authorization-server-metadata-endpoint: [1-9]\d* passed, 0 failed", summary), report
    assert "✓ authorization-code-grant: 1 passed, 0 failed" in summary, report  # not skipped: it ran
    assert re.search(r"Total: [1-9]\d* passed, 0 failed", summary), report
    assert suite.returncode == 0, report


def _browse(authorization_url: str, callback_port: int) -> None:
    """Follow the authorization URL as a browser would, to the suite's callback page."""
    deadline = httpx.Timeout(DEADLINE)
    # The suite prints the URL, then starts its callback server: wait until it listens.
    for _ in range(200):
        try:
            httpx.get(f"http://127.0.0.1:{callback_port}/", timeout=deadline)
            break
        except httpx.TransportError:
            threading.Event().wait(0.05)
    answer = httpx.get(authorization_url, timeout=deadline, follow_redirects=False)
    assert answer.status_code == 302, answer.text
    location = answer.headers["location"]
    assert location.startswith(f"http://127.0.0.1:{callback_port}/callback?")
    assert httpx.get(location, timeout=deadline).status_code == 200

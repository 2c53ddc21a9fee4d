"""Auth options of the client commands against a protected server (``modelctx serve
--http --auth-issuer``) and the development authorization server, all real processes.

``--oauth`` signs in the way a person would: ``BROWSER`` names a small program that opens
the authorization URL as a browser does (following the redirects back to the client's
loopback port; the authorization server approves loopback clients at once), and
``HOME`` is the test's, so the token file is written there.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.auth_processes import client_credentials_token, dev_auth_server, protected_notes
from tests.support.cli_run import one_line_error
from tests.support.wire import DEADLINE

BACKEND = ("backend", "backend-secret")
BROWSER_PROGRAM = """\
import sys, httpx
response = httpx.get(sys.argv[1], follow_redirects=True, timeout=30)
sys.exit(0 if response.status_code == 200 else 1)
"""


def modelctx(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modelctx", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=DEADLINE * 3,
        env=env,
        check=False,
    )


def test_bearer_env_sends_the_token_from_the_environment() -> None:
    with dev_auth_server("--client", ":".join(BACKEND)) as issuer, protected_notes("--auth-issuer", issuer) as url:
        token = client_credentials_token(issuer, url, "", BACKEND)
        env = {**os.environ, "NOTES_TOKEN": token}
        with_token = modelctx("call", "whoami", "--url", url, "--bearer-env", "NOTES_TOKEN", env=env)
        without = modelctx("call", "whoami", "--url", url, env=env)

    assert with_token.returncode == 0, with_token.stderr
    assert with_token.stdout == "backend\n"
    one_line_error(without, 3, "HTTP 401", "add --oauth, or --bearer-env VAR")


def test_oauth_signs_in_through_the_browser_and_keeps_the_token(tmp_path: Path) -> None:
    browser = tmp_path / "browser.py"
    browser.write_text(BROWSER_PROGRAM)
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "BROWSER": f"{shlex.quote(sys.executable)} {shlex.quote(str(browser))} %s",
    }
    with dev_auth_server("--auto-approve") as issuer, protected_notes("--auth-issuer", issuer) as url:
        first = modelctx("call", "whoami", "--url", url, "--oauth", "--json", env=env)
        again = modelctx("call", "whoami", "--url", url, "--oauth", "--json", env={**env, "BROWSER": "false"})

    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["content"][0]["text"] == "dev-user"
    assert (tmp_path / ".config" / "modelctx" / "tokens.json").exists()
    assert again.returncode == 0, again.stderr  # the kept token: no browser this time


def test_oauth_is_for_a_url() -> None:
    one_line_error(modelctx("tools", "--stdio", "x", "--oauth", env=dict(os.environ)), 2, "--oauth is for an HTTP server")

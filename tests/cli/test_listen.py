"""``modelctx listen``: change events printed as they come, until --count or --timeout.

The counting server runs on Streamable HTTP, so a second ``modelctx call grow`` (another
client) changes the tool list that the listening process hears about.
"""

from __future__ import annotations

import json
import queue
import shlex
import subprocess
import sys

import pytest

from tests.support.cli_run import modelctx
from tests.support.paths import SERVERS
from tests.support.wire import DEADLINE, HttpServer, stderr_lines


@pytest.fixture(scope="module")
def counting(tmp_path_factory):
    with HttpServer(SERVERS / "counting_server.py", tmp_path_factory.mktemp("listen") / "server.log") as server:
        yield server


def start_listening(*args: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    """A ``modelctx listen`` process, returned once it says the server confirmed the stream."""
    process = subprocess.Popen(
        [sys.executable, "-m", "modelctx", "listen", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = stderr_lines(process)
    first = lines.get(timeout=DEADLINE)
    assert first.strip() == "modelctx: listening; Ctrl-C to stop", first
    return process, lines


@pytest.mark.parametrize("mode", ["auto", "handshake"])
def test_listen_prints_a_list_change_as_a_json_line_and_stops_at_count(counting, mode):
    process, _ = start_listening("--url", counting.url, "--tools", "--json", "--count", "1", "--mode", mode)
    try:
        grown = modelctx("call", "grow", f"name=grown_{mode}", "--url", counting.url)
        assert grown.returncode == 0, grown.stderr
        out, _ = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert [json.loads(line) for line in out.splitlines()] == [{"event": "list_changed", "kind": "tools"}]


def test_listen_for_people_says_which_list_changed(counting):
    process, _ = start_listening("--url", counting.url, "--count", "1")
    try:
        modelctx("call", "grow", "name=grown_for_people", "--url", counting.url)
        out, _ = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
    assert out == "tools list changed\n"


def test_listen_that_hears_fewer_events_than_its_count_by_the_timeout_is_status_5(counting):
    result = modelctx("listen", "--url", counting.url, "--prompts", "--count", "1", "--timeout", "1")
    assert result.stdout == ""
    assert result.returncode == 5
    assert "timed out after 1 s with 0 of 1 events" in result.stderr


def test_listen_until_its_timeout_without_a_count_is_success(counting):
    result = modelctx("listen", "--url", counting.url, "--prompts", "--timeout", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_listen_to_a_server_that_dies_is_status_3(tmp_path):
    server = tmp_path / "dies.py"
    server.write_text(
        "import os, threading\nfrom modelctx import Server\nserver = Server('dies')\n"
        "threading.Timer(1.0, os._exit, (9,)).start()  # dies while the client listens\n"
    )
    command = shlex.join([sys.executable, "-m", "modelctx", "serve", str(server)])
    result = modelctx("listen", "--stdio", command, "--timeout", str(DEADLINE))
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("modelctx: stdio server") and last.endswith("exited with code 9")

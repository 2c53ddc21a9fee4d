"""``modelctx call`` and ``modelctx tools`` as a user runs them (a real subprocess, output
piped): a server that needs a URL opened first says which, a tool that must run as a task
is called and polled to its result, and a piped table keeps names whole."""

from __future__ import annotations

import shlex
import sys

from cli_run import SERVERS, modelctx, one_line_error

INSTRUCTED = shlex.join([sys.executable, "-m", "modelctx", "serve", str(SERVERS / "instructed_server.py")])
TASKS = shlex.join([sys.executable, "-m", "modelctx", "serve", str(SERVERS / "tasks_server.py")])
LONG_NAME = "fetch_the_quarterly_revenue_report_for_a_region"


def test_call_shows_the_url_a_url_elicitation_required_error_asks_the_user_to_open() -> None:
    result = modelctx("call", "connect_account", "--stdio", INSTRUCTED)
    line = one_line_error(result, 4, "https://example.com/connect?session=e1", "Authorize access to your files.")
    assert "open" in line and "run the command again" in line and "-32042" in line


def test_call_runs_a_tool_that_requires_a_task_and_polls_it_to_the_result() -> None:
    result = modelctx("call", "sleepy", "seconds=0.3", "--stdio", TASKS)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "slept 0.3s"


def test_a_piped_table_at_80_columns_keeps_each_name_on_one_line() -> None:
    result = modelctx("tools", "--stdio", INSTRUCTED)
    assert result.returncode == 0, result.stderr
    assert LONG_NAME in result.stdout, result.stdout
    assert all(len(line) <= 80 for line in result.stdout.splitlines()), result.stdout

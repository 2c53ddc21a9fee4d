"""``modelctx call`` and ``modelctx tools`` as a user runs them (a real subprocess, output
piped): a server that needs a URL opened first says which, a tool that must run as a task
is called and polled to its result, and a piped table keeps names whole."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.support.cli_run import modelctx, one_line_error
from tests.support.paths import SERVERS

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


def test_chat_help_names_the_variables_that_choose_the_model_api() -> None:
    result = modelctx("chat", "--help")
    assert result.returncode == 0, result.stderr
    for variable in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "MODELCTX_MODEL"):
        assert variable in result.stdout


def test_chat_refuses_a_modelctx_model_of_the_other_provider_in_cli_words_before_any_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MODELCTX_MODEL", "gpt-4o")
    result = modelctx("chat", "--config", str(tmp_path / "never-read.json"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "modelctx chat: MODELCTX_MODEL=gpt-4o is an OpenAI-compatible model, and the provider is anthropic: "
        "pass --model <an Anthropic model> or --provider openai, or unset MODELCTX_MODEL"
    )


def test_chat_with_provider_openai_and_no_key_says_the_key_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "MODELCTX_MODEL"):
        monkeypatch.delenv(name, raising=False)
    result = modelctx("chat", "--provider", "openai", "--config", str(tmp_path / "never-read.json"))
    assert result.returncode == 2
    assert result.stderr.startswith("modelctx chat: --provider openai needs OPENAI_API_KEY: export OPENAI_API_KEY=")

"""``--args`` and ``key=value`` given what no one means as arguments: a FIFO, a device,
a directory, endless input, bytes that are not UTF-8, JSON nested past Python's stack.
Each is one usage line and status 2, before the server is started; none hangs or eats memory.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modelctx.cli._arguments import MAX_ARGUMENTS_BYTES
from tests.support.cli_run import one_line_error, sample


def test_args_from_a_fifo_is_refused_instead_of_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "args.fifo"
    os.mkfifo(fifo)

    one_line_error(sample("call", "echo", "--args", f"@{fifo}"), 2, "not a regular file", "--args -")


@pytest.mark.parametrize("name", ["/dev/zero", "."])
def test_args_from_a_device_or_a_directory_is_refused(name: str) -> None:
    one_line_error(sample("call", "echo", "--args", f"@{name}"), 2, "not a regular file")


def test_args_on_stdin_past_the_bound_is_refused_unread() -> None:
    endless = " " * (MAX_ARGUMENTS_BYTES + 1)

    one_line_error(sample("call", "echo", "--args", "-", stdin=endless), 2, "standard input holds more than")


def test_an_args_file_that_is_not_utf8_says_so(tmp_path: Path) -> None:
    latin1 = tmp_path / "args.json"
    latin1.write_bytes('{"text": "café"}'.encode("latin-1"))

    one_line_error(sample("call", "echo", "--args", f"@{latin1}"), 2, "not UTF-8")


def test_json_nested_past_the_stack_is_a_usage_error(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    deep_file = tmp_path / "deep.json"
    deep_file.write_text(deep)

    one_line_error(sample("call", "echo", "--args", f"@{deep_file}"), 2, "nested too deeply")
    one_line_error(sample("call", "echo", f"text={deep[:20_000]}{deep[-20_000:]}"), 2, "nested too deeply")


def test_a_value_may_hold_equals_signs_and_unicode() -> None:
    result = sample("call", "echo", "text=a=b=ß✓")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "a=b=ß✓\n"


@pytest.mark.parametrize("value", ["1e400", "-1e400", "1.5e999"])
def test_a_number_too_large_for_json_is_refused_saying_it_is_out_of_range(value: str) -> None:
    # Read as inf, it went out as JSON null: the server's error named "null", not the number.
    one_line_error(sample("call", "add", f"a={value}", "b=1"), 2, f"a={value}: the number {value} is out of range")
    one_line_error(sample("call", "add", "--args", f'{{"a": {value}, "b": 1}}'), 2, f"the number {value} is out of range")


def test_nan_and_infinity_are_no_json_so_a_value_is_the_string_and_args_refuse_them() -> None:
    echoed = sample("call", "echo", "text=NaN")
    refused = sample("call", "echo", "--args", '{"text": Infinity}')

    assert echoed.returncode == 0 and echoed.stdout == "NaN\n", echoed.stderr
    one_line_error(refused, 2, "--args is not JSON", "Infinity")


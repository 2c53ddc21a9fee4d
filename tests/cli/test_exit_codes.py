"""The exit statuses of the client commands, which scripts rely on (``modelctx --help``):
0 success, 1 the tool returned isError, 2 usage error, 3 could not connect or the
server died, 4 the server answered a JSON-RPC error, 5 timed out, 130 interrupted, 141
stdout's reader left (`| head`).

Each failure is one ``modelctx: ...`` line on stderr, never a traceback, and nothing on
stdout. Every command runs as a real subprocess.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys

import pytest

from tests.support.cli_run import SAMPLE_STDIO, modelctx, one_line_error, sample
from tests.support.paths import DOCS
from tests.support.wire import DEADLINE, free_port, wait_until


def test_help_lists_every_command_and_the_exit_statuses():
    result = modelctx("--help")
    assert result.returncode == 0
    for command in ("serve", "discover", "tools", "call", "resources", "read", "prompts", "prompt", "complete",
                    "listen", "inspect", "dev", "install", "chat", "gateway", "auth-server"):
        assert f"\n  {command} " in result.stdout, command
    for status in ("0  success", "1  the tool returned isError", "2  usage error", "3  could not connect",
                   "4  the server answered a JSON-RPC error", "5  timed out", "130  interrupted"):
        assert status in result.stdout, status


def test_modelctx_alone_prints_its_usage_as_a_usage_error():
    result = modelctx()
    assert result.returncode == 2
    assert result.stderr.startswith("Usage: modelctx [OPTIONS] COMMAND [ARGS]...")
    assert result.stdout == ""


def test_help_imports_no_command():
    probe = (
        "import sys\nfrom modelctx.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "loaded = [m for m in sys.modules if m.startswith(('modelctx.client', 'modelctx.server', "
        "'modelctx.cli._client_commands', 'modelctx.cli._serve', 'modelctx.inspector', 'rich'))]\n"
        "print(loaded, file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=DEADLINE)
    assert result.stderr.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["tools"], "give the server with --url URL or --stdio"),
        (["tools", "--url", "http://127.0.0.1:1/mcp", "--stdio", "x"], "not both"),
        (["tools", "--url", "ftp://example.com"], "is not an http:// or https:// URL"),
        (["tools", "--stdio", "python 'unbalanced"], "cannot be split as a shell would"),
        (["tools", "--stdio", "x", "--header", "X-A: b"], "--header is for an HTTP server"),
        (["tools", "--url", "http://127.0.0.1:1/mcp", "--env", "A=b"], "--env is for a server run with --stdio"),
        (["tools", "--url", "http://127.0.0.1:1/mcp", "--header", "nocolon"], "is not K:V"),
        (["tools", "--stdio", "x", "--env", "novalue"], "--env 'novalue' is not K=V"),
        (["tools", "--stdio", "x", "--mode", "2025-11-25"], "spoken with --mode handshake"),
        (["tools", "--stdio", "x", "--mode", "newest"], "is not auto, handshake or one of"),
        (["tools", "--url", "http://127.0.0.1:1/mcp", "--bearer-env", "MODELCTX_NO_SUCH_TOKEN"],
         "the environment variable MODELCTX_NO_SUCH_TOKEN is not set"),
        (["call", "add", "a=1", "b", "--stdio", "x"], "'b' is not key=value"),
        (["call", "add", "--args", "{not json", "--stdio", "x"], "--args is not JSON"),
        (["call", "add", "--args", "[1, 2]", "--stdio", "x"], "must be a JSON object of arguments, not list"),
        (["call", "add", "--args", "@/no/such/args.json", "--stdio", "x"], "cannot read /no/such/args.json"),
        (["call", "register", "--accept-elicitation", "yes", "--stdio", "x"], "--accept-elicitation is not JSON"),
        (["complete", "language", "--stdio", "x"], "--prompt NAME or --template URI_TEMPLATE"),
        (["call", "--stdio", "x"], "Missing argument 'TOOL'"),
        (["listen", "--count", "0", "--stdio", "x"], "--count"),
    ],
)
def test_usage_errors_are_one_line_and_status_2_before_anything_starts(args, says):
    result = modelctx(*args)
    one_line_error(result, 2, says)
    assert result.stdout == ""


def test_a_command_this_installation_lacks_is_one_line_not_a_traceback():
    # An installation without the inspector's package: a None in sys.modules makes its
    # import fail as a missing module would.
    program = (
        "import sys\n"
        "sys.modules['modelctx.inspector'] = None\n"
        "from modelctx.cli import main\n"
        "main(['inspect', 'server.py'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=DEADLINE, stdin=subprocess.DEVNULL
    )
    one_line_error(result, 2, "'inspect' is not available in this installation")


def test_an_unreachable_url_is_status_3():
    url = f"http://127.0.0.1:{free_port()}/mcp"
    one_line_error(modelctx("tools", "--url", url), 3, f"127.0.0.1:{url.split(':')[2].split('/')[0]}")


def test_a_command_that_does_not_exist_is_status_3():
    one_line_error(modelctx("tools", "--stdio", "modelctx-no-such-server --flag"), 3, "could not start",
                   "modelctx-no-such-server")


def test_a_server_that_exits_at_once_is_status_3():
    command = shlex.join([sys.executable, "-c", "import sys; sys.exit(7)"])
    one_line_error(modelctx("tools", "--stdio", command), 3, "exited with code 7")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["call", "no_such_tool"], "the server answered error -32602: Unknown tool: no_such_tool"),
        (["read", "sample://nothing"], "the server answered error -32602"),
        (["prompt", "no_such_prompt"], "the server answered error -32602"),
    ],
)
def test_a_json_rpc_error_from_the_server_is_status_4_with_its_code(args, says):
    result = sample(*args)
    one_line_error(result, 4, says)
    assert result.stdout == ""


def test_a_call_past_its_timeout_is_status_5():
    result = sample("call", "sleepy", "seconds=30", "--timeout", "1")
    one_line_error(result, 5, "timed out", "tools/call")


def test_a_server_that_never_answers_is_status_5():
    silent = shlex.join([sys.executable, "-c", "import time; time.sleep(60)"])
    one_line_error(modelctx("tools", "--stdio", silent, "--timeout", "1"), 5, "no answer from", "within 1 s")


def test_ctrl_c_is_status_130(tmp_path):
    marker = tmp_path / "marker"
    process = subprocess.Popen(
        [sys.executable, "-m", "modelctx", "call", "sleepy", "seconds=30", f"marker={marker}", "--stdio", SAMPLE_STDIO],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: (tmp_path / "marker.started").exists(), "the tool to start")
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    assert err.strip().splitlines()[-1] == "modelctx: interrupted"
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_reader_that_stops_reading_ends_the_command_quietly_with_status_141(tmp_path, as_json):
    """``modelctx call ... | head``: once head has its bytes it closes the pipe. That is
    the reader's choice, not a failure: no error line, and 141 (as a shell reports a
    writer ended by SIGPIPE), not 3 (the server died) or Rich's and Click's 1 (isError)."""
    big = tmp_path / "big.py"
    big.write_text(
        "from modelctx import Server\nserver = Server('big')\n\n\n@server.tool\n"
        "def lines() -> str:\n    return 'line\\n' * 500_000\n"
    )
    stdio = shlex.join([sys.executable, "-m", "modelctx", "serve", str(big)])
    flags = ["--json"] if as_json else []
    process = subprocess.Popen(
        [sys.executable, "-m", "modelctx", "call", "lines", *flags, "--stdio", stdio],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        assert process.stdout.read(4)  # what `head -c 4` reads, then it leaves
        process.stdout.close()
        err = process.stderr.read().decode()
        process.wait(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 141, err
    assert err == ""


def test_the_docs_list_every_exit_status_the_code_has():

    from modelctx.cli._exit import EXIT_TABLE

    page = (DOCS / "reference" / "cli.md").read_text()
    documented = {int(row.split("|")[1]) for row in page.splitlines() if row.startswith("| ") and row.split("|")[1].strip().isdigit()}
    assert documented == {int(code) for code, _ in EXIT_TABLE}

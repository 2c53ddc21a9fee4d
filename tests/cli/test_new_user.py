"""What a newcomer meets at the command line: each mistake is reported in the user's
terms (their file, their line, what to do) and never as modelctx's own traceback; a
server started with no stdin to read ends instead of hanging.

Every test runs ``modelctx`` as a real subprocess.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from tests.support.wire import DEADLINE

SERVER = '''
from modelctx import Server

server = Server("newcomer")

@server.tool
def ping() -> str:
    return "pong"
'''


def serve(*args: str, cwd: Path, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "modelctx", "serve", *args],
        cwd=cwd,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )


def test_a_stdio_server_whose_stdin_is_dev_null_ends_at_once(tmp_path):
    # A background job in a script (`modelctx serve x.py &`) gets /dev/null as stdin:
    # that is end of input, not a reason to wait forever.
    (tmp_path / "server.py").write_text(SERVER)

    result = serve("server.py", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout == ""


def test_a_syntax_error_shows_the_line_and_no_traceback(tmp_path):
    (tmp_path / "server.py").write_text('from modelctx import Server\nserver = Server("x"\n')

    result = serve("server.py", cwd=tmp_path)

    assert result.returncode == 1
    assert "Traceback" not in result.stderr, result.stderr
    assert "syntax error" in result.stderr
    assert f'File "{tmp_path / "server.py"}", line 2' in result.stderr
    assert "never closed" in result.stderr


def test_a_registration_error_is_one_line_naming_the_place(tmp_path):
    source = SERVER + "\n@server.tool\ndef bad(x: object) -> str:\n    return ''\n"
    (tmp_path / "server.py").write_text(source)
    decorator_line = source.splitlines().index("@server.tool", 8) + 1

    result = serve("server.py", cwd=tmp_path)

    assert result.returncode == 1
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"modelctx: {tmp_path / 'server.py'}:{decorator_line}: tool 'bad': parameter 'x'")


def test_an_error_in_the_users_module_shows_only_the_users_frames(tmp_path):
    (tmp_path / "server.py").write_text(SERVER + "\nraise RuntimeError('no config file')\n")

    result = serve("server.py", cwd=tmp_path)

    assert result.returncode == 1
    assert "Traceback" in result.stderr and "RuntimeError: no config file" in result.stderr
    assert "modelctx/cli" not in result.stderr and "importlib" not in result.stderr, result.stderr


def test_a_port_in_use_is_one_line_and_no_url_is_announced(tmp_path):
    (tmp_path / "server.py").write_text(SERVER)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]

        result = serve("server.py", "--http", "--port", str(port), cwd=tmp_path)

    assert result.returncode == 1
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == (
        f"modelctx: cannot listen on 127.0.0.1:{port}: the address is in use; "
        "stop the process listening there or choose another port"
    )


def test_a_server_whose_lifespan_fails_never_announces_its_url(tmp_path):
    (tmp_path / "server.py").write_text(
        "from contextlib import asynccontextmanager\n"
        "from modelctx import Server\n"
        "@asynccontextmanager\n"
        "async def lifespan(server):\n"
        "    raise RuntimeError('database is down')\n"
        "    yield\n"
        "server = Server('down', lifespan=lifespan)\n"
    )
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]

    result = serve("server.py", "--http", "--port", str(port), cwd=tmp_path)

    assert result.returncode != 0
    assert "database is down" in result.stderr
    assert "serving 'down'" not in result.stderr, result.stderr

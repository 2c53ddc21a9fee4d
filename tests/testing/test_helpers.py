"""``modelctx.testing``: what a user gets for testing their own server.

The async context managers are used here as a user's async test would use them, and
must leave nothing behind (``leaks.leak_free``: tasks, descriptors, child processes).
The pytest plugin is tested as a user runs it: a small project in a temporary folder
(a server file and a test file using the fixtures) run by a real ``python -m pytest``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from modelctx import Server
from modelctx.errors import ConnectionClosed
from modelctx.testing import connected, served_http, spawned
from tests.support.leaks import alive, leak_free, settle
from tests.support.wire import DEADLINE, async_test

SERVER_FILE = '''
import os
from modelctx import Server, ToolError

server = Server("calc")

@server.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b

@server.tool
def pid() -> str:
    """This process's id, so a test can check that it is gone afterwards."""
    return str(os.getpid())

@server.tool
def greeting() -> str:
    return os.environ.get("GREETING", "hello")
'''


def calc_server() -> Server:
    server = Server("calc")

    @server.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return server


def text(result: object) -> str:
    return result.content[0].text  # type: ignore[attr-defined,no-any-return]


@pytest.fixture
def server_file(tmp_path: Path) -> Path:
    path = tmp_path / "calc.py"
    path.write_text(SERVER_FILE)
    return path


# -- the async context managers ----------------------------------------------------------------
@async_test()
async def test_connected_gives_an_in_process_client_for_a_server_object():
    async with leak_free("connected()"), connected(calc_server()) as client:
        assert [tool.name for tool in await client.tools()] == ["add"]
        assert text(await client.call_tool("add", {"a": 2, "b": 3})) == '{"result":5}'


@async_test()
async def test_connected_refuses_what_is_not_a_server_and_says_what_to_use():
    with pytest.raises(TypeError, match=r"for a file use spawned\(\)"):
        async with connected("calc.py"):  # type: ignore[arg-type]
            pass


@async_test(deadline=60)
async def test_spawned_runs_a_server_file_as_a_real_subprocess_and_stops_it(server_file):
    async with leak_free("spawned()"):
        async with spawned(str(server_file), env={"GREETING": "hej"}) as client:
            pid = int(text(await client.call_tool("pid")))
            assert pid != os.getpid() and alive(pid)
            assert text(await client.call_tool("greeting")) == "hej"
        assert not alive(pid)


@async_test(deadline=60)
async def test_spawned_takes_a_command_line_too(server_file):
    command = f"{sys.executable} -m modelctx serve {server_file}"
    async with leak_free("spawned(command)"), spawned(command) as client:
        assert text(await client.call_tool("add", {"a": 1, "b": 1})) == '{"result":2}'


@async_test(deadline=60)
async def test_a_server_that_cannot_start_is_an_error_quoting_its_stderr(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no database configured')\n")
    async with leak_free("a failed spawn"):
        with pytest.raises(ConnectionClosed, match="no database configured"):
            async with spawned(broken, timeout=DEADLINE):
                pass


@async_test(deadline=60)
async def test_served_http_serves_a_server_object_on_loopback_with_a_url():
    uvicorn_handlers = list(logging.getLogger("uvicorn").handlers)
    async with leak_free("served_http(server)"):
        async with (served := served_http(calc_server())) as client:
            assert served.url.startswith("http://127.0.0.1:") and served.url.endswith("/mcp")
            assert text(await client.call_tool("add", {"a": 4, "b": 5})) == '{"result":9}'
            # A real socket: a second client of any kind reaches the same URL.
            async with httpx.AsyncClient() as plain:
                reply = await plain.post(served.url, content=b"{}", headers={"content-type": "application/json"})
            assert reply.status_code == 400
        with pytest.raises(httpx.ConnectError):
            httpx.post(served.url, content=b"{}", timeout=DEADLINE)
    assert logging.getLogger("uvicorn").handlers == uvicorn_handlers  # the test run's logging is left alone


@async_test(deadline=60)
async def test_served_http_runs_a_server_file_as_an_http_subprocess(server_file):
    async with leak_free("served_http(file)"):
        async with (served := served_http(server_file)) as client:
            pid = int(text(await client.call_tool("pid")))
            assert served.url.startswith("http://127.0.0.1:")
            assert alive(pid)
        assert not alive(pid)


@async_test(deadline=60)
async def test_an_http_server_file_that_cannot_start_is_an_error_quoting_its_stderr(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no database configured')\n")
    async with leak_free("a failed HTTP start"):
        with pytest.raises(ConnectionError, match=r"--http exited; its stderr:\n(.|\n)*no database configured"):
            async with served_http(broken):
                pass


# -- the pytest plugin, in a user's project ----------------------------------------------------
USER_TESTS = '''
import os
from pathlib import Path

import pytest

from calc import server

PIDS = Path(__file__).parent / "pids.txt"


@pytest.fixture
def mcp_server():
    return server


def test_in_process(mcp_client):
    assert [tool.name for tool in mcp_client.tools()] == ["add", "pid", "greeting"]
    assert mcp_client.call_tool("add", {"a": 2, "b": 2}).structured_content == {"result": 4}


def test_over_stdio(mcp_stdio_client):
    client = mcp_stdio_client("calc.py", env={"GREETING": "moi"})
    assert client.call_tool("greeting").content[0].text == "moi"
    with PIDS.open("a") as pids:
        pids.write(client.call_tool("pid").content[0].text + "\\n")


@pytest.mark.parametrize("target", ["object", "file"])
def test_over_http(mcp_http_client, target):
    client = mcp_http_client(server if target == "object" else "calc.py")
    assert client.url.startswith("http://127.0.0.1:")
    assert client.call_tool("add", {"a": 20, "b": 22}).structured_content == {"result": 42}
    if target == "file":
        with PIDS.open("a") as pids:
            pids.write(client.call_tool("pid").content[0].text + "\\n")


def test_a_wrong_answer_fails(mcp_client):
    assert mcp_client.call_tool("add", {"a": 1, "b": 1}).structured_content == {"result": 3}
'''


def run_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Autoload off and the plugin named: the same run whether or not the installed
    # modelctx registers it as a pytest11 entry point (loading it twice is an error).
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "modelctx.testing.plugin", "-p", "no:cacheprovider", "-rA", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_users_tests_pass_and_fail_as_they_should_and_leave_no_process(tmp_path):
    project = tmp_path / "user_project"
    project.mkdir()
    (project / "calc.py").write_text(SERVER_FILE)
    (project / "test_calc.py").write_text(USER_TESTS)

    result = run_pytest(project)
    report = result.stdout + result.stderr

    assert result.returncode == 1, report  # one test fails
    for passing in ("test_in_process", "test_over_stdio", "test_over_http[object]", "test_over_http[file]"):
        assert f"PASSED test_calc.py::{passing}" in report, report
    assert "FAILED test_calc.py::test_a_wrong_answer_fails" in report, report
    assert "assert {'result': 2} == {'result': 3}" in report, report  # pytest's own assertion report
    assert "1 failed, 4 passed" in report, report

    pids = [int(line) for line in (project / "pids.txt").read_text().split()]
    assert len(pids) == 2
    assert settle(lambda: not any(alive(pid) for pid in pids), DEADLINE), pids


def test_mcp_client_without_an_mcp_server_fixture_says_what_to_write(tmp_path):
    (tmp_path / "test_missing.py").write_text("def test_it(mcp_client):\n    pass\n")
    result = run_pytest(tmp_path)
    assert result.returncode == 1
    assert "mcp_client needs a fixture named mcp_server that returns your Server" in result.stdout


def test_a_tool_that_never_answers_fails_its_test_at_the_mcp_timeout_deadline(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\nmcp_timeout = 2\n")
    (tmp_path / "stuck.py").write_text(
        "import asyncio\nfrom modelctx import Server\nserver = Server('stuck')\n\n"
        "@server.tool\nasync def wait() -> str:\n    await asyncio.Event().wait()\n    return 'never'\n"
    )
    (tmp_path / "test_stuck.py").write_text(
        "import pytest\nfrom stuck import server\n\n@pytest.fixture\ndef mcp_server():\n    return server\n\n"
        "def test_in_process(mcp_client):\n    mcp_client.call_tool('wait')\n\n"
        "def test_over_stdio(mcp_stdio_client):\n    mcp_stdio_client('stuck.py').call_tool('wait')\n"
    )
    result = run_pytest(tmp_path)
    assert result.returncode == 1
    assert "2 failed" in result.stdout, result.stdout
    assert result.stdout.count("RequestTimeout") >= 2, result.stdout


def test_an_mcp_handlers_fixture_answers_what_the_server_asks_through_mcp_client(tmp_path):
    """A newcomer's tool that asks the user (elicitation) is testable with the sync fixture:
    the user's ``mcp_handlers`` fixture gives the answers."""
    (tmp_path / "asking.py").write_text(
        "from modelctx import Context, Server\nserver = Server('asking')\n\n"
        "@server.tool\nasync def subscribe(city: str, ctx: Context) -> str:\n"
        "    answer = await ctx.elicit(f'Where should the {city} forecast go?',\n"
        "        {'type': 'object', 'properties': {'email': {'type': 'string'}}, 'required': ['email']})\n"
        "    return f\"{answer.content['email']} gets {city}\" if answer.accepted else answer.action\n"
    )
    (tmp_path / "test_asking.py").write_text(
        "import pytest\nfrom asking import server\nfrom modelctx import ClientHandlers\n\n"
        "@pytest.fixture\ndef mcp_server():\n    return server\n\n"
        "@pytest.fixture\ndef mcp_handlers():\n"
        "    async def answer(elicitation):\n"
        "        return {'action': 'accept', 'content': {'email': 'ada@example.com'}}\n"
        "    return ClientHandlers(elicitation=answer)\n\n"
        "def test_subscribe(mcp_client):\n"
        "    result = mcp_client.call_tool('subscribe', {'city': 'Oslo'})\n"
        "    assert result.content[0].text == 'ada@example.com gets Oslo'\n"
    )
    result = run_pytest(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "1 passed" in result.stdout

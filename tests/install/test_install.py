"""``modelctx install``: run as a user runs it, against config files in a temporary HOME.

Each host's format and location (install/_hosts.py): Claude Desktop's
``claude_desktop_config.json`` and Cursor's ``mcp.json`` under ``mcpServers``, VS Code's
``mcp.json`` under ``servers`` with ``"type": "stdio"``, Claude Code's project ``.mcp.json``.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from modelctx import Client
from modelctx.install import HOSTS
from modelctx.transports.stdio_client import StdioClientTransport
from tests.support.wire import DEADLINE, async_test

SERVER = '''
import os
from modelctx import Server

server = Server("weather")

@server.tool
def forecast(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}, key={os.environ.get('WEATHER_KEY', '')}"
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "weather.py").write_text(SERVER)
    return folder


def install(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    home = project.parent / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "APPDATA")}
    env["HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "modelctx.install", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )


def read(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def expected_args(project: Path) -> list[str]:
    return ["-m", "modelctx", "serve", str(project / "weather.py")]


def test_claude_desktop_gets_an_mcpServers_entry_that_runs_this_python_on_the_absolute_file(project):
    result = install(project, "weather.py", "--client", "claude-desktop", "--env", "WEATHER_KEY=k1")
    assert result.returncode == 0, result.stderr
    config = project.parent / "home" / ".config" / "Claude" / "claude_desktop_config.json"  # Linux
    entry = read(config)["mcpServers"]["weather"]
    assert entry == {"command": sys.executable, "args": expected_args(project), "env": {"WEATHER_KEY": "k1"}}
    assert os.path.isabs(entry["command"])
    assert f"Wrote server \"weather\" for claude-desktop to {config}" in result.stdout
    assert '"WEATHER_KEY": "*** (written to the file)"' in result.stdout  # what it wrote, values hidden
    assert stat.S_IMODE(config.stat().st_mode) == 0o600  # it holds env values


def test_cursor_writes_its_global_file_or_the_workspace_one(project):
    assert install(project, "weather.py", "--client", "cursor").returncode == 0
    user = read(project.parent / "home" / ".cursor" / "mcp.json")["mcpServers"]["weather"]
    assert user == {"command": sys.executable, "args": expected_args(project)}

    assert install(project, "weather.py", "--client", "cursor", "--workspace", ".").returncode == 0
    assert read(project / ".cursor" / "mcp.json")["mcpServers"]["weather"] == user


def test_vscode_writes_servers_with_type_stdio_in_the_workspace_or_the_user_profile(project):
    result = install(project, "weather.py", "--client", "vscode", "--workspace", str(project), "--name", "wx")
    assert result.returncode == 0, result.stderr
    workspace = read(project / ".vscode" / "mcp.json")
    assert "mcpServers" not in workspace
    assert workspace["servers"]["wx"] == {"type": "stdio", "command": sys.executable, "args": expected_args(project)}

    assert install(project, "weather.py", "--client", "vscode").returncode == 0
    profile = project.parent / "home" / ".config" / "Code" / "User" / "mcp.json"
    assert read(profile)["servers"]["weather"]["type"] == "stdio"


VSCODE_JSONC = """\
// Servers for this project (VS Code reads JSON with comments)
{
  "inputs": [
    /* an API key, asked once */
    {"type": "promptString", "id": "key", "password": true},
  ],
  "servers": {
    // the linter, kept as written
    "lint": {"type": "stdio", "command": "lint-mcp", "args": ["--fast",],},
  },
}
"""


def test_vscode_mcp_json_with_comments_and_trailing_commas_gets_the_entry_and_keeps_the_rest(project):
    config = project / ".vscode" / "mcp.json"
    config.parent.mkdir()
    config.write_text(VSCODE_JSONC)

    result = install(project, "weather.py", "--client", "vscode", "--workspace", str(project))
    assert result.returncode == 0, result.stderr
    written = config.read_text()
    # Every line of the person's file is still there, in order, comments included.
    kept = iter(written.splitlines())
    assert all(any(line == other for other in kept) for line in VSCODE_JSONC.splitlines())
    from modelctx.install._jsonc import blank

    parsed = json.loads(blank(written))
    assert parsed["servers"]["lint"] == {"type": "stdio", "command": "lint-mcp", "args": ["--fast"]}
    assert parsed["servers"]["weather"]["command"] == sys.executable
    assert parsed["inputs"] == [{"type": "promptString", "id": "key", "password": True}]

    # Replaced with --force: the new entry, the comments still there.
    again = install(project, "weather.py", "--client", "vscode", "--workspace", str(project), "--force", "--name", "lint")
    assert again.returncode == 0, again.stderr
    replaced = config.read_text()
    assert "// the linter, kept as written" in replaced and "/* an API key, asked once */" in replaced
    assert json.loads(blank(replaced))["servers"]["lint"]["command"] == sys.executable


def test_claude_code_writes_the_project_scope_mcp_json(project):
    result = install(project, "weather.py", "--client", "claude-code")  # the workspace defaults to here
    assert result.returncode == 0, result.stderr
    entry = read(project / ".mcp.json")["mcpServers"]["weather"]
    assert entry == {"type": "stdio", "command": sys.executable, "args": expected_args(project)}


def test_every_other_key_and_server_in_the_file_is_kept(project):
    config = project / "host.json"
    existing = {
        "globalShortcut": "Ctrl+Space",
        "mcpServers": {"other": {"command": "node", "args": ["x.js"]}},
        "inputs": [{"id": "k"}],
    }
    config.write_text(json.dumps(existing))
    assert install(project, "weather.py", "--config", str(config)).returncode == 0
    written = read(config)
    assert written["globalShortcut"] == "Ctrl+Space" and written["inputs"] == [{"id": "k"}]
    assert set(written["mcpServers"]) == {"other", "weather"}
    assert written["mcpServers"]["other"] == existing["mcpServers"]["other"]


def test_an_entry_of_the_same_name_is_replaced_only_with_force(project):
    config = project / "host.json"
    config.write_text(json.dumps({"mcpServers": {"weather": {"command": "old"}}}))
    before = config.read_text()

    refused = install(project, "weather.py", "--config", str(config), "--env", "WEATHER_KEY=new")
    assert refused.returncode == 1
    assert 'already has a server named "weather"; pass --force' in refused.stderr
    assert config.read_text() == before

    forced = install(project, "weather.py", "--config", str(config), "--force")
    assert forced.returncode == 0, forced.stderr
    assert read(config)["mcpServers"]["weather"]["command"] == sys.executable


def test_dry_run_prints_the_entry_and_writes_nothing(project):
    result = install(project, "weather.py", "--client", "cursor", "--dry-run", "--env", "A=s3cret-value")
    assert result.returncode == 0, result.stderr
    assert "Would write server \"weather\" for cursor" in result.stdout
    # The variable's name is shown; its value (often an API key) is not.
    assert '"A": "*** (written to the file)"' in result.stdout
    assert "s3cret-value" not in result.stdout + result.stderr
    assert not (project.parent / "home").exists()


@pytest.mark.parametrize("content", ["{\"mcpServers\": {,}", "// a comment\n{}", "[1, 2]", '{"mcpServers": []}'])
def test_a_malformed_config_is_one_clear_error_and_the_file_is_untouched(project, content):
    config = project / "host.json"
    config.write_text(content)
    result = install(project, "weather.py", "--config", str(config))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert str(config) in result.stderr and "The file was not changed." in result.stderr
    assert config.read_text() == content
    assert {p.name for p in project.iterdir()} == {"weather.py", "host.json"}  # no temporary file left


def test_env_file_values_are_written_and_env_options_win(project):
    (project / ".env").write_text("# secrets\nexport WEATHER_KEY='from-file'\nOTHER=\"two words\"\n\n")
    result = install(project, "weather.py", "--client", "cursor", "--env-file", ".env", "--env", "OTHER=cli")
    assert result.returncode == 0, result.stderr
    env = read(project.parent / "home" / ".cursor" / "mcp.json")["mcpServers"]["weather"]["env"]
    assert env == {"WEATHER_KEY": "from-file", "OTHER": "cli"}


def test_a_bad_env_pair_or_a_missing_file_is_a_usage_error(project):
    bad = install(project, "weather.py", "--env", "NOEQUALS")
    assert bad.returncode == 2 and "is not KEY=VALUE" in bad.stderr
    missing = install(project, "nothere.py")
    assert missing.returncode == 2 and "no such file: nothere.py" in missing.stderr
    (project / "notes.txt").write_text("not a server")
    not_python = install(project, "notes.txt")
    assert not_python.returncode == 2 and len(not_python.stderr.strip().splitlines()) == 1
    empty = install(project, "weather.py", "--name", " ", "--dry-run")
    assert empty.returncode == 2 and "--name must not be empty" in empty.stderr


def test_workspace_is_refused_for_claude_desktop_which_has_no_project_config(project):
    result = install(project, "weather.py", "--client", "claude-desktop", "--workspace", ".")
    assert result.returncode == 2 and "claude-desktop has no project config" in result.stderr
    assert not (project.parent / "home").exists()


def test_with_checks_that_the_packages_are_installed_in_the_python_the_host_will_run(project):
    assert install(project, "weather.py", "--dry-run", "--with", "click").returncode == 0
    missing = install(project, "weather.py", "--with", "no-such-package-mcx", "--with", "click")
    assert missing.returncode == 1
    assert f"no-such-package-mcx not installed in {sys.executable}" in missing.stderr
    assert "-m pip install no-such-package-mcx" in missing.stderr
    assert not (project.parent / "home").exists()


@pytest.mark.parametrize(
    ("client", "platform", "environ", "expected"),
    [
        ("claude-desktop", "darwin", {}, "H/Library/Application Support/Claude/claude_desktop_config.json"),
        ("claude-desktop", "win32", {"APPDATA": "C:/Users/u/AppData/Roaming"}, "C:/Users/u/AppData/Roaming/Claude/claude_desktop_config.json"),
        ("claude-desktop", "linux", {"XDG_CONFIG_HOME": "/xdg"}, "/xdg/Claude/claude_desktop_config.json"),
        ("vscode", "darwin", {}, "H/Library/Application Support/Code/User/mcp.json"),
        ("vscode", "win32", {}, "H/AppData/Roaming/Code/User/mcp.json"),
        ("vscode", "linux", {}, "H/.config/Code/User/mcp.json"),
        ("cursor", "win32", {"APPDATA": "C:/x"}, "H/.cursor/mcp.json"),
    ],
)
def test_each_host_s_user_config_is_where_that_host_looks_on_each_os(client, platform, environ, expected):
    path = HOSTS[client].default_path(None, Path("H"), platform, environ)
    assert path.as_posix() == expected


@async_test(deadline=60)
async def test_the_written_command_line_starts_the_server(project):
    for client in ("claude-desktop", "vscode"):
        config = project / f"{client}.json"
        result = install(project, "weather.py", "--client", client, "--config", str(config), "--env", "WEATHER_KEY=k9")
        assert result.returncode == 0, result.stderr
        entry = read(config)[HOSTS[client].servers_key]["weather"]
        # As a host starts it: the command and args as written, from another directory.
        transport = StdioClientTransport(entry["command"], entry["args"], env=entry["env"], cwd=project.parent)
        async with Client(transport, timeout=DEADLINE) as client_session:
            assert [tool.name for tool in await client_session.tools()] == ["forecast"]
            answer = await client_session.call_tool("forecast", {"city": "Oslo"})
            assert answer.content[0].text == "sunny in Oslo, key=k9"


def test_a_config_that_is_a_symlink_is_written_where_it_points_and_stays_a_link(project):
    dotfiles = project.parent / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "host.json").write_text('{"mcpServers": {"other": {"command": "node"}}}')
    config = project / "host.json"
    config.symlink_to(dotfiles / "host.json")

    result = install(project, "weather.py", "--config", str(config))

    assert result.returncode == 0, result.stderr
    assert config.is_symlink()
    assert set(read(dotfiles / "host.json")["mcpServers"]) == {"other", "weather"}


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_an_env_file_that_is_a_fifo_or_a_device_is_refused_without_waiting_or_reading_it(project, special):
    if special == "fifo":
        special = str(project / "env.fifo")
        os.mkfifo(special)

    result = install(project, "weather.py", "--config", str(project / "host.json"), "--env-file", special)

    assert result.returncode == 2
    assert "is not a regular file" in result.stderr
    assert not (project / "host.json").exists()

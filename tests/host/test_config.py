"""The host's configuration file (issue 8, "modelctx.Host"): the ``mcpServers`` format,
and errors that name the server and the key."""

from __future__ import annotations

import json
import os

import pytest

from modelctx.host import HostConfig, HostConfigError, load_config


def config(servers: dict, **top) -> HostConfig:
    return HostConfig.from_dict({"mcpServers": servers, **top}, environ={"TOKEN": "s3cret", "HOME_DIR": "/h"})


def test_a_stdio_and_an_http_server_are_read_with_every_setting(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "roots": [str(tmp_path)],
                "approvalStore": "~/state/approvals.json",
                "mcpServers": {
                    "weather": {"command": "python", "args": ["weather.py"], "env": {"A": "1"}, "cwd": "/tmp"},
                    "docs": {
                        "url": "http://127.0.0.1:8000/mcp",
                        "headers": {"X-Key": "k"},
                        "approval": "ask",
                        "tools": {"allow": ["search_*"], "deny": ["*_delete"]},
                        "timeout": 5,
                    },
                    "off": {"command": "nothing", "disabled": True},
                },
            }
        )
    )
    loaded = load_config(path)

    weather, docs = loaded.servers["weather"], loaded.servers["docs"]
    assert set(loaded.servers) == {"weather", "docs"}
    assert weather.kind == "stdio" and weather.args == ("weather.py",) and weather.env == {"A": "1"}
    assert weather.identity == "python weather.py"
    assert docs.kind == "http" and docs.identity == "http://127.0.0.1:8000/mcp" and docs.timeout == 5.0
    assert docs.approval == "ask"
    assert docs.tools.permits("search_pages") and not docs.tools.permits("search_delete")
    assert not docs.tools.permits("fetch")
    assert loaded.roots == (str(tmp_path),)
    assert loaded.approval_store == os.path.expanduser("~/state/approvals.json")


def test_environment_variables_are_expanded_in_env_and_headers():
    loaded = config(
        {
            "s": {"command": "run", "env": {"KEY": "${TOKEN}", "PRICE": "$$5"}},
            "h": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        }
    )
    assert loaded.servers["s"].env == {"KEY": "s3cret", "PRICE": "$5"}
    assert loaded.servers["h"].headers == {"Authorization": "Bearer s3cret"}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"command": "run", "comand": "x"}, "server 'bad': unknown key 'comand'"),
        ({"args": ["x"]}, "server 'bad': needs 'command'"),
        ({"type": "http"}, "server 'bad': an HTTP server needs 'url'"),
        ({"type": "stdio", "url": "http://x"}, "server 'bad': a stdio server needs 'command'"),
        ({"command": "run", "url": "http://x"}, "not both"),
        ({"url": "ftp://x"}, "'url' must start with http:// or https://"),
        ({"command": "run", "args": "a b"}, "'args' must be a list of strings"),
        ({"command": "run", "approval": "sometimes"}, "server 'bad': 'approval' must be 'allow', 'ask' or 'deny'"),
        ({"command": "run", "approval": 3}, "server 'bad': 'approval' must be"),
        ({"command": "run", "approval": {"defualt": "ask"}}, "server 'bad': 'approval': unknown key 'defualt'"),
        ({"command": "run", "approval": {"readOnly": "yes"}}, "server 'bad': 'approval'.readOnly must be"),
        ({"command": "run", "approval": {"tools": {"rm_*": "maybe"}}}, "'approval'.tools['rm_*'] must be"),
        ({"command": "run", "tools": {"alow": []}}, "unknown key 'tools.alow'"),
        ({"command": "run", "timeout": 0}, "'timeout' must be a positive number"),
        ({"command": "run", "env": {"K": "${MISSING}"}}, "env.K uses ${MISSING}, which is not set"),
        ({"url": "http://x", "args": []}, "'args' does not apply to a http server"),
    ],
)
def test_a_mistake_names_the_server_and_the_key(entry, message):
    with pytest.raises(HostConfigError) as raised:
        config({"bad": entry})
    assert message in str(raised.value)


def test_a_mistake_at_the_top_or_in_the_file_is_named(tmp_path):
    with pytest.raises(HostConfigError, match="unknown top-level key 'servers'"):
        HostConfig.from_dict({"servers": {}})
    with pytest.raises(HostConfigError, match="'approvalStore' must be the path of a JSON file"):
        HostConfig.from_dict({"mcpServers": {}, "approvalStore": 1})
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(HostConfigError, match="broken.json is not valid JSON"):
        load_config(broken)
    with pytest.raises(HostConfigError, match="cannot read the configuration"):
        load_config(tmp_path / "missing.json")
    deep = tmp_path / "deep.json"
    deep.write_text('{"mcpServers": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(HostConfigError, match="deep.json is nested too deeply"):
        load_config(deep)

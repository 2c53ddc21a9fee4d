"""Each client command of ``modelctx``, run as a real subprocess against the sample server
(``tests/fixtures/servers/sample_server.py``) on stdio and on Streamable HTTP.

``--json`` output is parsed as JSON: it is the result object and nothing else.
"""

from __future__ import annotations

import base64
import json
import shlex
import sys

from tests.support.cli_run import modelctx, sample
from tests.support.wire import SAMPLE_SERVER

LOGO_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def as_json(result) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_discover_json_says_the_era_versions_and_capabilities_in_both_eras():
    modern = as_json(sample("discover", "--json"))
    handshake = as_json(sample("discover", "--json", "--mode", "handshake"))

    assert modern["era"] == "2026-07-28" and modern["protocolVersion"] == "2026-07-28"
    assert "2025-11-25" in modern["supportedVersions"]
    assert handshake["era"] == "handshake" and handshake["protocolVersion"] == "2025-11-25"
    for found in (modern, handshake):
        assert found["serverInfo"] == {"name": "sample-server", "version": "1.2.3"}
        assert {"tools", "resources", "prompts", "completions"} <= set(found["capabilities"])
        assert found["instructions"] == "A server for tests."


def test_discover_for_people_names_the_server():
    result = sample("discover")
    assert result.returncode == 0, result.stderr
    assert "sample-server 1.2.3" in result.stdout and "2026-07-28" in result.stdout


def test_tools_lists_each_tool_with_its_required_arguments_starred():
    result = sample("tools")
    assert result.returncode == 0, result.stderr
    assert "echo" in result.stdout and "text*" in result.stdout and "Add two integers." in result.stdout


def test_tools_json_is_the_list_of_tools():
    tools = as_json(sample("tools", "--json"))["tools"]
    by_name = {tool["name"]: tool for tool in tools}
    assert {"echo", "add", "refuse", "progress", "register"} <= set(by_name)
    assert by_name["add"]["inputSchema"]["required"] == ["a", "b"]


def test_call_values_are_json_when_they_parse_and_strings_otherwise():
    added = as_json(sample("call", "add", "a=2", "b=3", "--json"))
    word = as_json(sample("call", "echo", "text=Oslo", "--json"))
    quoted = as_json(sample("call", "echo", 'text="3"', "--json"))

    assert added["structuredContent"] == {"result": 5}
    assert word["content"] == [{"type": "text", "text": "Oslo"}]
    assert quoted["content"] == [{"type": "text", "text": "3"}]  # the string "3", not the number


def test_call_prints_the_content_for_people():
    result = sample("call", "echo", "text=hello there")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello there\n"


def test_call_takes_args_as_json_from_a_file_or_stdin_with_pairs_laid_over(tmp_path):
    args_file = tmp_path / "args.json"
    args_file.write_text('{"a": 10, "b": 1}')

    from_file = as_json(sample("call", "add", "--args", f"@{args_file}", "b=5", "--json"))
    from_stdin = as_json(sample("call", "add", "--args", "-", "--json", stdin='{"a": 1, "b": 1}'))
    inline = as_json(sample("call", "add", "--args", '{"a": 4, "b": 4}', "--json"))

    assert from_file["structuredContent"] == {"result": 15}
    assert from_stdin["structuredContent"] == {"result": 2}
    assert inline["structuredContent"] == {"result": 8}


def test_a_tool_that_reports_an_error_exits_1_and_its_result_is_still_printed():
    human = sample("call", "refuse", "reason=busy")
    machine = sample("call", "refuse", "--json")

    assert human.returncode == 1 and human.stdout == "refused: busy\n"
    assert machine.returncode == 1
    assert json.loads(machine.stdout)["isError"] is True


def test_resources_json_lists_resources_and_templates():
    found = as_json(sample("resources", "--json"))
    assert {r["uri"] for r in found["resources"]} == {"sample://greeting", "sample://logo.png"}
    assert [t["uriTemplate"] for t in found["resourceTemplates"]] == ["sample://items/{id}"]


def test_resources_for_people_show_both_tables():
    result = sample("resources")
    assert result.returncode == 0, result.stderr
    assert "sample://greeting" in result.stdout and "sample://items/{id}" in result.stdout


def test_read_prints_text_and_json_carries_blobs_exactly():
    text = sample("read", "sample://greeting")
    item = sample("read", "sample://items/apple")
    logo = as_json(sample("read", "sample://logo.png", "--json"))

    assert text.stdout == "Hello from the sample server\n"
    assert item.stdout == "item apple\n"
    assert base64.b64decode(logo["contents"][0]["blob"]) == LOGO_PNG


def test_prompts_and_prompt_with_string_arguments():
    prompts = as_json(sample("prompts", "--json"))["prompts"]
    got = as_json(sample("prompt", "review", "code=print(1)", "language=rust", "--json"))
    human = sample("prompt", "review", "code=x = 1")

    assert [p["name"] for p in prompts] == ["review"]
    assert got["messages"][0]["content"]["text"] == "Please review this rust code:\nprint(1)"
    assert human.stdout.startswith("user: Please review this python code:\nx = 1")


def test_complete_a_prompt_argument_and_a_template_variable():
    languages = sample("complete", "--prompt", "review", "language", "p")
    items = as_json(sample("complete", "--template", "sample://items/{id}", "id", "ap", "--json"))

    assert languages.returncode == 0, languages.stderr
    assert languages.stdout.splitlines() == ["python", "perl", "php"]
    assert items["completion"]["values"] == ["apple", "apricot"]


def test_a_form_the_server_asks_is_declined_when_no_terminal_can_answer():
    result = sample("call", "register")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "registration: decline\n"
    assert "the server asked 'What is your name?'; declined" in result.stderr
    assert "--accept-elicitation" in result.stderr


def test_accept_elicitation_answers_every_form_with_the_fields_it_asks():
    result = sample("call", "register", "--accept-elicitation", '{"name": "Ada", "age": 36}')
    assert result.returncode == 0, result.stderr
    assert result.stdout == "registered Ada, aged 36\n"


def test_piped_output_has_no_spinner_or_progress():
    result = sample("call", "progress", "steps=3")
    assert result.returncode == 0
    assert result.stdout == "done after 3 steps\n"
    assert result.stderr == ""


def test_the_stdio_server_gets_env_and_cwd(tmp_path):
    server = tmp_path / "env_server.py"
    server.write_text(
        "import os\nfrom modelctx import Server\nserver = Server('env')\n"
        "@server.tool\ndef where() -> str:\n    return os.getcwd() + ' ' + os.environ['GREETING']\n"
    )
    command = shlex.join([sys.executable, "-m", "modelctx", "serve", server.name])  # relative to --cwd
    result = modelctx("call", "where", "--stdio", command, "--env", "GREETING=hi there", "--cwd", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{tmp_path} hi there\n"


def test_every_command_works_over_streamable_http(http_server):
    url = http_server.url
    tools = as_json(modelctx("tools", "--url", url, "--json"))
    called = modelctx("call", "echo", "text=over http", "--url", url, "--header", "X-Trace: cli-test")
    read = modelctx("read", "sample://greeting", "--url", url)
    found = as_json(modelctx("discover", "--url", url, "--json"))

    assert "echo" in {tool["name"] for tool in tools["tools"]}
    assert called.returncode == 0 and called.stdout == "over http\n", called.stderr
    assert read.stdout == "Hello from the sample server\n"
    assert found["era"] == "2026-07-28"


def test_the_stdio_command_line_is_split_as_a_shell_would(tmp_path):
    spaced = tmp_path / "a folder"
    spaced.mkdir()
    (spaced / "server.py").write_text(SAMPLE_SERVER.read_text())
    command = shlex.join([sys.executable, "-m", "modelctx", "serve", str(spaced / "server.py")])
    assert "'" in command  # the space is quoted, and the quotes must be undone
    result = modelctx("call", "echo", "text=quoted", "--stdio", command)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "quoted\n"

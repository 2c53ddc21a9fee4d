"""The SQLite reference server (``python -m modelctx.servers.sqlite DB_PATH``), through
real transports: a stdio subprocess and Streamable HTTP on 127.0.0.1, spoken to by our
``Client`` and by the official ``mcp`` 2.3.0 client.

What the issue asks of it: the schema as resources; a read-only query tool that refuses
anything but one reading statement (stacked statements, ATTACH, PRAGMA writes,
``load_extension``), with row limits, cursor pagination and bounded time and size;
results as structured content matching the output schema; writes only after the user
confirms through elicitation.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types
import pytest
from mcp import Client as OfficialClient
from mcp import StdioServerParameters

from modelctx import Client, ClientHandlers
from modelctx.client import ListChanged
from tests.support.wire import DEADLINE, async_test, free_port, wait_until

MODULE = "modelctx.servers.sqlite"
ROWS = 25


def module_command(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


@contextlib.contextmanager
def served_over_http(module: str, *args: str, log: Path) -> Iterator[str]:
    """``python -m MODULE ARGS --http`` on a free loopback port; yields its URL."""
    port = free_port()
    with open(log, "wb") as output:
        process = subprocess.Popen(
            module_command(module, *args, "--http", "--host", "127.0.0.1", "--port", str(port)),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(lambda: _listening(process, port, log), f"{module} on port {port}")
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.kill()
            process.wait(timeout=DEADLINE)


def _listening(process: subprocess.Popen[bytes], port: int, log: Path) -> bool:
    if process.poll() is not None:
        pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text(errors='replace')}")
    return b"serving" in log.read_bytes()


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "shop.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL)")
        db.execute("CREATE VIEW cheap AS SELECT name FROM items WHERE price < 5")
        db.executemany("INSERT INTO items (name, price) VALUES (?, ?)", [(f"item {i}", i) for i in range(ROWS)])
        db.commit()
    return path


def rows_in(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute(sql).fetchall()


class Person:
    """The user behind the client's elicitation handler: answers every question the same way."""

    def __init__(self, action: str, confirm: bool = True) -> None:
        self.action = action
        self.confirm = confirm
        self.asked: list[Any] = []

    async def elicit(self, request: Any) -> dict[str, Any]:
        self.asked.append(request)
        if self.action != "accept":
            return {"action": self.action}
        return {"action": "accept", "content": {"confirm": self.confirm}}


@contextlib.asynccontextmanager
async def connected(
    transport: str, database: Path, tmp_path: Path, person: Person | None = None, *options: str
) -> AsyncIterator[Client]:
    handlers = ClientHandlers(elicitation=(person or Person("decline")).elicit)
    with contextlib.ExitStack() as stack:
        if transport == "stdio":
            target: Any = module_command(MODULE, str(database), *options)
        else:
            target = stack.enter_context(served_over_http(MODULE, str(database), *options, log=tmp_path / "log"))
        async with Client(target, timeout=DEADLINE, handlers=handlers) as client:
            yield client


TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


async def next_event(client: Client, trigger: Any, **filters: Any) -> Any:
    """The first event ``client.listen(**filters)`` yields once ``trigger()`` ran on an open stream."""
    opened = asyncio.Event()
    events = client.listen(on_open=opened.set, **filters)
    first = asyncio.ensure_future(anext(events))
    try:
        await asyncio.wait_for(opened.wait(), DEADLINE)
        await trigger()
        return await asyncio.wait_for(first, DEADLINE)
    finally:
        first.cancel()
        await events.aclose()


# -- the schema ---------------------------------------------------------------------------------
@TRANSPORTS
@async_test()
async def test_the_schema_is_offered_as_an_overview_and_a_resource_per_table(transport, database, tmp_path):
    async with connected(transport, database, tmp_path) as client:
        uris = {resource.uri for resource in (await client.list_resources()).resources}
        overview = (await client.read_resource("sqlite://schema")).contents[0]["text"]
        items = (await client.read_resource("sqlite://table/items")).contents[0]

    assert uris == {"sqlite://schema", "sqlite://table/items", "sqlite://table/cheap"}
    assert "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL);" in overview
    assert "CREATE VIEW cheap" in overview
    assert items["mimeType"] == "application/json"
    assert '"name": "price"' in items["text"] and "CREATE TABLE items" in items["text"]


@async_test()
async def test_list_tables_and_describe_table_give_names_types_and_columns(database, tmp_path):
    async with connected("stdio", database, tmp_path) as client:
        schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
        tables = await client.call_tool("list_tables")
        described = await client.call_tool("describe_table", {"name": "items"})
        unknown = await client.call_tool("describe_table", {"name": "orders"})

    jsonschema.validate(tables.structured_content, schemas["list_tables"])
    jsonschema.validate(described.structured_content, schemas["describe_table"])
    assert tables.structured_content == {"tables": [{"name": "cheap", "type": "view"}, {"name": "items", "type": "table"}]}
    assert [c["name"] for c in described.structured_content["columns"]] == ["id", "name", "price"]
    assert described.structured_content["columns"][1] == {
        "name": "name", "type": "TEXT", "notNull": True, "default": None, "primaryKey": False
    }
    assert unknown.is_error and "no table or view named 'orders'" in unknown.content[0].text
    assert "cheap, items" in unknown.content[0].text


@async_test()
async def test_a_database_that_is_not_there_yet_is_created_empty(tmp_path):
    missing = tmp_path / "new.db"
    async with connected("stdio", missing, tmp_path, Person("accept")) as client:
        empty = await client.call_tool("list_tables")
        event = await next_event(
            client, lambda: client.call_tool("execute", {"sql": "CREATE TABLE notes (body TEXT)"}), resources=True
        )
        uris = {resource.uri for resource in (await client.list_resources()).resources}

    assert empty.structured_content == {"tables": []}
    assert event == ListChanged("resources")
    assert uris == {"sqlite://schema", "sqlite://table/notes"}
    assert rows_in(missing, "SELECT name FROM sqlite_schema") == [("notes",)]


# -- query: results, pages and bounds ---------------------------------------------------------------
@TRANSPORTS
@async_test()
async def test_query_results_are_structured_content_matching_the_output_schema(transport, database, tmp_path):
    async with connected(transport, database, tmp_path) as client:
        schema = next(t for t in (await client.list_tools()).tools if t.name == "query").output_schema
        result = await client.call_tool("query", {"sql": "SELECT id, name FROM items WHERE price < ? ORDER BY id", "params": [2]})

    jsonschema.validate(result.structured_content, schema)
    assert result.structured_content == {"columns": ["id", "name"], "rows": [[1, "item 0"], [2, "item 1"]]}


@TRANSPORTS
@async_test()
async def test_query_pages_through_every_row_with_next_cursor(transport, database, tmp_path):
    pages: list[list[Any]] = []
    async with connected(transport, database, tmp_path) as client:
        arguments: dict[str, Any] = {"sql": "SELECT id FROM items ORDER BY id", "limit": 10}
        while True:
            page = (await client.call_tool("query", arguments)).structured_content
            pages.append(page["rows"])
            if "nextCursor" not in page:
                break
            arguments["cursor"] = page["nextCursor"]

    assert [len(rows) for rows in pages] == [10, 10, 5]
    assert [row[0] for rows in pages for row in rows] == list(range(1, ROWS + 1))


@async_test()
async def test_a_cursor_is_refused_for_another_query(database, tmp_path):
    async with connected("stdio", database, tmp_path) as client:
        first = await client.call_tool("query", {"sql": "SELECT id FROM items", "limit": 5})
        other = await client.call_tool(
            "query", {"sql": "SELECT name FROM items", "cursor": first.structured_content["nextCursor"]}
        )
        forged = await client.call_tool("query", {"sql": "SELECT id FROM items", "cursor": "not a cursor"})

    assert other.is_error and "cursor belongs to another query" in other.content[0].text
    assert forged.is_error and "cursor is not one this server gave" in forged.content[0].text


@async_test()
async def test_a_page_stops_at_the_byte_limit_and_carries_on_with_a_cursor(database, tmp_path):
    async with connected("stdio", database, tmp_path, None, "--max-bytes", "60") as client:
        page = (await client.call_tool("query", {"sql": "SELECT name FROM items ORDER BY id", "limit": 100})).structured_content
        too_big = await client.call_tool("query", {"sql": "SELECT printf('%.100c', 'x')"})

    assert 0 < len(page["rows"]) < ROWS and "nextCursor" in page
    assert too_big.is_error and "larger than the 60 bytes" in too_big.content[0].text


@async_test()
async def test_a_row_limit_above_the_maximum_is_refused(database, tmp_path):
    async with connected("stdio", database, tmp_path, None, "--max-rows", "20") as client:
        refused = await client.call_tool("query", {"sql": "SELECT * FROM items", "limit": 21})

    assert refused.is_error and "limit must be between 1 and 20" in refused.content[0].text


@async_test()
async def test_a_query_running_past_its_time_limit_is_stopped(database, tmp_path):
    endless = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
    async with connected("stdio", database, tmp_path, None, "--timeout", "0.2") as client:
        stopped = await client.call_tool("query", {"sql": endless})
        after = await client.call_tool("query", {"sql": "SELECT count(*) FROM items"})

    assert stopped.is_error and "ran longer than 0.2 s and was stopped" in stopped.content[0].text
    assert after.structured_content["rows"] == [[ROWS]]  # the server goes on serving


# -- query: injection attempts ---------------------------------------------------------------------
INJECTIONS = {
    "stacked statements": ("SELECT 1; DROP TABLE items", "exactly one SQL statement"),
    "stacked after a comment": ("SELECT 1 -- x\n; DELETE FROM items", "exactly one SQL statement"),
    "ATTACH another file": ("ATTACH DATABASE 'other.db' AS other", "it opens other database files"),
    "VACUUM INTO another file": ("VACUUM INTO 'other.db'", "ATTACH (VACUUM uses it too) is not allowed"),
    "PRAGMA write": ("PRAGMA user_version = 7", "PRAGMA user_version is not allowed"),
    "PRAGMA turning query_only off": ("PRAGMA query_only = OFF", "PRAGMA query_only is not allowed"),
    "a pragma function": ("SELECT * FROM pragma_table_info('items')", "PRAGMA table_info is not allowed"),
    "load_extension": ("SELECT load_extension('/tmp/evil.so')", "load_extension() is not allowed"),
    "fts3_tokenizer pointer leak": ("SELECT fts3_tokenizer('simple')", "fts3_tokenizer() is not allowed"),
    "fts3_tokenizer setting a pointer": (
        "SELECT * FROM (SELECT fts3_tokenizer('evil', x'4141414141414141'))", "fts3_tokenizer() is not allowed"
    ),
    "a write": ("DELETE FROM items", "use the execute tool"),
    "a write in a CTE": ("WITH x AS (SELECT 1) INSERT INTO items (name) SELECT 'evil' FROM x", "use the execute tool"),
}


@pytest.mark.parametrize("attempt", list(INJECTIONS), ids=list(INJECTIONS))
@async_test()
async def test_query_refuses_anything_but_one_read(attempt, database, tmp_path):
    sql, reason = INJECTIONS[attempt]
    before = rows_in(database, "SELECT * FROM items")
    async with connected("stdio", database, tmp_path) as client:
        refused = await client.call_tool("query", {"sql": sql})

    assert refused.is_error and reason in refused.content[0].text
    assert rows_in(database, "SELECT * FROM items") == before
    assert rows_in(database, "PRAGMA user_version") == [(0,)]
    assert not (tmp_path / "other.db").exists()


# -- execute: confirmed through elicitation ----------------------------------------------------------
INSERT = {"sql": "INSERT INTO items (name, price) VALUES (?, ?)", "params": ["new", 9.5]}


@TRANSPORTS
@async_test()
async def test_a_confirmed_write_runs_once_and_says_what_changed(transport, database, tmp_path):
    person = Person("accept")
    async with connected(transport, database, tmp_path, person) as client:
        result = await client.call_tool("execute", INSERT)

    assert result.structured_content == {
        "executed": True, "rowsAffected": 1, "lastRowId": ROWS + 1, "message": "The statement ran; 1 row(s) changed."
    }
    [question] = person.asked
    assert "INSERT INTO items (name, price) VALUES (?, ?)" in question.message and '["new", 9.5]' in question.message
    assert rows_in(database, "SELECT name, price FROM items WHERE name = 'new'") == [("new", 9.5)]


@pytest.mark.parametrize(("action", "confirm", "why"), [
    ("decline", True, "answered decline"),
    ("cancel", True, "answered cancel"),
    ("accept", False, "did not confirm it"),
])
@TRANSPORTS
@async_test()
async def test_a_write_the_user_does_not_confirm_never_reaches_the_database(transport, action, confirm, why, database, tmp_path):
    async with connected(transport, database, tmp_path, Person(action, confirm)) as client:
        result = await client.call_tool("execute", INSERT)

    assert result.structured_content["executed"] is False
    assert why in result.content[0].text and "Nothing in the database changed" in result.content[0].text
    assert rows_in(database, "SELECT count(*) FROM items") == [(ROWS,)]


@async_test()
async def test_a_statement_that_cannot_run_is_refused_before_the_user_is_asked(database, tmp_path):
    person = Person("accept")
    async with connected("stdio", database, tmp_path, person) as client:
        stacked = await client.call_tool("execute", {"sql": "DELETE FROM items; DROP TABLE items"})
        attach = await client.call_tool("execute", {"sql": "ATTACH DATABASE 'other.db' AS other"})
        broken = await client.call_tool("execute", {"sql": "INSERT INTO nowhere VALUES (1)"})

    assert "exactly one SQL statement" in stacked.content[0].text
    assert "it opens other database files" in attach.content[0].text
    assert "no such table: nowhere" in broken.content[0].text
    assert person.asked == []
    assert rows_in(database, "SELECT count(*) FROM items") == [(ROWS,)]


@async_test()
async def test_execute_is_annotated_destructive_and_query_read_only(database, tmp_path):
    async with connected("stdio", database, tmp_path) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}

    assert tools["execute"].annotations.destructive_hint is True
    assert tools["execute"].annotations.read_only_hint is False
    assert all(tools[name].annotations.read_only_hint for name in ("query", "list_tables", "describe_table"))


@async_test()
async def test_a_table_created_by_a_confirmed_write_becomes_a_resource(database, tmp_path):
    async with connected("stdio", database, tmp_path, Person("accept")) as client:
        await client.call_tool("execute", {"sql": "CREATE TABLE orders (id INTEGER PRIMARY KEY)"})
        await client.call_tool("execute", {"sql": "DROP VIEW cheap"})
        uris = {resource.uri for resource in (await client.list_resources()).resources}

    assert uris == {"sqlite://schema", "sqlite://table/items", "sqlite://table/orders"}


# -- the official client --------------------------------------------------------------------------------
def official_target(transport: str, database: Path, stack: contextlib.ExitStack, log: Path) -> Any:
    if transport == "http":
        return stack.enter_context(served_over_http(MODULE, str(database), log=log))
    return StdioServerParameters(command=sys.executable, args=["-m", MODULE, str(database)], env=dict(os.environ))


def official_user(action: str):  # type: ignore[no-untyped-def]
    async def answer(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        if action == "accept":
            return mcp_types.ElicitResult(action="accept", content={"confirm": True})
        return mcp_types.ElicitResult(action=action)

    return answer


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@TRANSPORTS
@async_test(60)
async def test_the_official_client_queries_and_writes_with_confirmation(transport, mode, database, tmp_path):
    for action in ("decline", "accept"):
        with contextlib.ExitStack() as stack:
            target = official_target(transport, database, stack, tmp_path / f"{action}.log")
            async with OfficialClient(target, mode=mode, elicitation_callback=official_user(action), read_timeout_seconds=DEADLINE) as client:
                tools = {tool.name for tool in (await client.list_tools()).tools}
                page = await client.call_tool("query", {"sql": "SELECT count(*) AS n FROM items"})
                written = await client.call_tool("execute", INSERT)
                schema = await client.read_resource("sqlite://schema")
        assert tools == {"query", "execute", "list_tables", "describe_table"}
        assert page.structured_content["columns"] == ["n"]
        assert written.structured_content["executed"] is (action == "accept")
        assert "CREATE TABLE items" in schema.contents[0].text

    assert rows_in(database, "SELECT count(*) FROM items WHERE name = 'new'") == [(1,)]


@async_test()
async def test_a_string_or_blob_past_the_value_bound_is_refused_before_it_takes_memory_or_disk(database, tmp_path):
    person = Person("accept")
    async with connected("stdio", database, tmp_path, person) as client:
        made = await client.call_tool("query", {"sql": "SELECT length(randomblob(1000000000))"})
        stored = await client.call_tool("execute", {"sql": "INSERT INTO items (name) VALUES (zeroblob(1000000000))"})

    for refused in (made, stored):
        assert refused.is_error and "string or blob over the 16777216 bytes" in refused.content[0].text
    assert rows_in(database, "SELECT count(*) FROM items") == [(ROWS,)]
    assert database.stat().st_size < 1_000_000


@TRANSPORTS
@async_test()
async def test_a_parameter_sqlite_cannot_bind_is_a_tool_error_that_names_it_and_nothing_is_asked_or_run(
    transport, database, tmp_path
):
    # 10**30 does not fit SQLite's 64-bit INTEGER: the sqlite3 module raised OverflowError,
    # which came back as "internal error". Every other shape is refused by the schema.
    person = Person("accept")
    async with connected(transport, database, tmp_path, person) as client:
        answers = {}
        for name, value in {
            "huge": 10**30,
            "just past 64 bits": 2**63,
            "just below": -(2**63) - 1,
            "list": [1, [2]],
            "object": {"a": {"b": 1}},
            "bool": True,
        }.items():
            answers[name, "query"] = await client.call_tool("query", {"sql": "SELECT ?", "params": [value]})
            answers[name, "execute"] = await client.call_tool(
                "execute", {"sql": "INSERT INTO items (name) VALUES (?)", "params": [value]}
            )
        edge = await client.call_tool("query", {"sql": "SELECT ?, ?", "params": [2**63 - 1, -(2**63)]})

    for (name, tool), answer in answers.items():
        text = answer.content[0].text
        assert answer.is_error, (name, tool, text)
        assert "internal error" not in text, (name, tool, text)
        if name in ("huge", "just past 64 bits", "just below"):
            assert "params[0] is an integer outside SQLite's 64-bit range" in text, text
        else:
            assert text.startswith("Invalid arguments") and "$.params[0]" in text, text
    assert person.asked == []  # never asked to confirm a statement that cannot run
    assert rows_in(database, "SELECT count(*) FROM items") == [(ROWS,)]
    assert edge.structured_content == {"columns": ["?", "?"], "rows": [[2**63 - 1, -(2**63)]]}

"""The SQLite server: the schema as resources, read-only queries, confirmed writes.

``query``, ``list_tables`` and ``describe_table`` are plain methods, so modelctx runs
them on its worker threads; ``execute`` is async because it asks the user, and hands
its SQLite work to a thread (``asyncio.to_thread``). In the 2026-07-28 era the handler
runs again once the answer comes back, so it asks before it writes anything.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import msgspec

from ... import Context, Server, Text, ToolError, ToolResult
from ._execute import EXECUTE_OUTPUT_SCHEMA, check_statement, run_statement
from ._query import QUERY_OUTPUT_SCHEMA, Limits, Param, QueryError, run_query
from ._schema import TableInfo, Tables, UnknownTable, describe_table, list_tables, schema_text

__all__ = ["SCHEMA_URI", "build_server", "table_uri"]

SCHEMA_URI = "sqlite://schema"

_CONFIRM_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "title": "Run this statement", "description": "It changes the database."}
    },
    "required": ["confirm"],
}

_READS = {"readOnlyHint": True, "openWorldHint": False}
_WRITES = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": False}

Sql = Annotated[str, msgspec.Meta(description="one SQL statement; ? placeholders take params")]
Params = Annotated[
    list[Param] | None,
    msgspec.Meta(description="values for the statement's ? placeholders (integers within 64 bits)"),
]


def table_uri(name: str) -> str:
    """The URI of a table's resource: ``sqlite://table/NAME`` (NAME percent-encoded)."""
    return f"sqlite://table/{quote(name, safe='')}"


def _refused(exc: QueryError | UnknownTable) -> ToolError:
    return ToolError(str(exc))


def build_server(database: str | Path, limits: Limits | None = None) -> Server:
    """A server for the SQLite file ``database`` (created if missing)."""
    path = Path(database)
    sqlite3.connect(path).close()  # made empty if missing, as the sqlite3 shell would; no check first
    server = Server(
        "modelctx-sqlite",
        instructions=(
            f"The SQLite database {path.name}. Read its schema (resources, list_tables, describe_table), "
            "read with query (one SELECT a call, paged), change it with execute (the user confirms each statement)."
        ),
    )
    tables = _TableResources(server, path)
    tables.sync(tables.current())
    tools = _Tools(path, limits or Limits(), tables)
    server.add_tool(tools.query, annotations=_READS, output_schema=QUERY_OUTPUT_SCHEMA)
    server.add_tool(tools.execute, annotations=_WRITES, output_schema=EXECUTE_OUTPUT_SCHEMA)
    server.add_tool(tools.list_tables, annotations=_READS)
    server.add_tool(tools.describe_table, annotations=_READS)
    server.resource(SCHEMA_URI, name="schema", title="Database schema", mime_type="application/sql")(tools.schema)
    return server


class _Tools:
    """The tools' handlers, bound to one database and its limits."""

    def __init__(self, path: Path, limits: Limits, tables: _TableResources) -> None:
        self.path = path
        self.limits = limits
        self.tables = tables

    def query(self, sql: Sql, params: Params = None, limit: int = 100, cursor: str | None = None) -> dict[str, Any]:
        """Run one read-only SQL statement (SELECT, WITH, EXPLAIN) and return a page of its rows.

        Args:
            limit: rows per page (1 to the server's maximum, 1000 by default)
            cursor: the nextCursor of the previous page, to get the next one
        """
        try:
            return run_query(self.path, sql, params or [], limit, cursor, self.limits)
        except QueryError as exc:
            raise _refused(exc) from None

    async def execute(self, sql: Sql, ctx: Context, params: Params = None) -> ToolResult:
        """Change the database with one SQL statement (INSERT, UPDATE, DELETE, CREATE, ...),
        after the user confirms it."""
        values = params or []
        try:
            # Compile it first: never ask the user about a statement that cannot run.
            await asyncio.to_thread(check_statement, self.path, sql, values, self.limits)
        except QueryError as exc:
            raise _refused(exc) from None
        shown = f"\n\nwith parameters {json.dumps(values)}" if values else ""
        answer = await ctx.elicit(f"Run this statement on {self.path.name}?\n\n{sql}{shown}", _CONFIRM_FORM)
        if not (answer.accepted and answer.content and answer.content.get("confirm") is True):
            why = "did not confirm it" if answer.accepted else f"answered {answer.action}"
            return _not_run(f"The statement was not run: the user {why}. Nothing in the database changed.")
        try:
            outcome = await asyncio.to_thread(run_statement, self.path, sql, values, self.limits)
        except QueryError as exc:
            raise _refused(exc) from None
        self.tables.sync(await asyncio.to_thread(self.tables.current))
        return ToolResult([Text(outcome["message"])], structured=outcome)

    def list_tables(self) -> Tables:
        """The database's tables and views, with their type."""
        return Tables(tables=list_tables(self.path))

    def describe_table(self, name: str) -> TableInfo:
        """A table's or view's CREATE statement and columns (name, type, notNull, default, primaryKey)."""
        try:
            return describe_table(self.path, name)
        except UnknownTable as exc:
            raise _refused(exc) from None

    def schema(self) -> str:
        """Every CREATE statement of the database."""
        return schema_text(self.path)


def _not_run(message: str) -> ToolResult:
    return ToolResult([Text(message)], structured={"executed": False, "message": message})


class _TableResources:
    """One resource per table and view, kept in step with the schema (``list_changed``
    goes to subscribers when a statement adds or drops one)."""

    def __init__(self, server: Server, path: Path) -> None:
        self.server = server
        self.path = path
        self.registered: set[str] = set()

    def current(self) -> set[str]:
        """The tables and views there are now (blocking: call it off the event loop)."""
        return {table["name"] for table in list_tables(self.path)}

    def sync(self, names: set[str]) -> None:
        """Register ``names`` (from ``current``) as resources, remove the others (on the loop)."""
        for gone in self.registered - names:
            self.server.remove_resource(table_uri(gone))
        for new in sorted(names - self.registered):
            self._add(new)
        self.registered = names

    def _add(self, name: str) -> None:
        path = self.path

        def read() -> str:
            return json.dumps(describe_table(path, name), indent=2)

        self.server.resource(
            table_uri(name),
            name=f"table {name}",
            description=f"{name}: its CREATE statement and columns",
            mime_type="application/json",
        )(read)

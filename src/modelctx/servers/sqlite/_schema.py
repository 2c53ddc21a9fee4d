"""The database's schema: its tables and views, their CREATE statements and columns."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TypedDict

from ._connections import open_read_only

__all__ = ["Column", "Table", "TableInfo", "Tables", "UnknownTable", "describe_table", "list_tables", "schema_text"]


class Table(TypedDict):
    name: str
    type: Literal["table", "view"]


class Tables(TypedDict):
    tables: list[Table]


class Column(TypedDict):
    name: str
    type: str  # as declared ("" when the column has no declared type)
    notNull: bool
    default: str | None  # the default's SQL text
    primaryKey: bool


class TableInfo(TypedDict):
    name: str
    type: Literal["table", "view"]
    sql: str
    columns: list[Column]

_OBJECTS = (
    "SELECT name, type, sql FROM sqlite_schema "
    "WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
)


class UnknownTable(LookupError):
    """No table or view has that name; the message lists the ones there are."""


def list_tables(path: Path) -> list[Table]:
    """Every table and view (SQLite's own tables left out), by name."""
    db = open_read_only(path)
    try:
        return [Table(name=name, type=kind) for name, kind, _sql in db.execute(_OBJECTS)]
    finally:
        db.close()


def describe_table(path: Path, name: str) -> TableInfo:
    """``name``'s type, CREATE statement and columns. Raises ``UnknownTable``."""
    db = open_read_only(path)
    try:
        found = {row[0]: row for row in db.execute(_OBJECTS)}
        if name not in found:
            known = ", ".join(found) or "none yet"
            raise UnknownTable(f"no table or view named {name!r}; the tables are: {known}")
        _name, kind, sql = found[name]
        columns = [
            Column(name=column, type=declared, notNull=bool(not_null), default=default, primaryKey=bool(pk))
            for _cid, column, declared, not_null, default, pk in db.execute(
                "SELECT * FROM pragma_table_info(?)", (name,)
            )
        ]
        return TableInfo(name=name, type=kind, sql=sql, columns=columns)
    finally:
        db.close()


def schema_text(path: Path) -> str:
    """Every CREATE statement of the database (tables, views, indexes, triggers), as SQL."""
    db = open_read_only(path)
    try:
        rows = db.execute(
            "SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
            "ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'view' THEN 1 ELSE 2 END, name"
        )
        return "".join(f"{sql};\n" for (sql,) in rows)
    finally:
        db.close()

"""Writes: a statement checked before anyone is asked about it, then run once confirmed."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._connections import FencedConnection, problem
from ._query import Limits, Param, QueryError, check_params

__all__ = ["EXECUTE_OUTPUT_SCHEMA", "check_statement", "run_statement"]

EXECUTE_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "executed": {"type": "boolean", "description": "whether the statement ran"},
        "rowsAffected": {"type": "integer", "description": "rows inserted, updated or deleted (0 for statements such as CREATE)"},
        "lastRowId": {"type": ["integer", "null"], "description": "the rowid of the last row inserted"},
        "message": {"type": "string"},
    },
    "required": ["executed", "message"],
}


def check_statement(path: Path, sql: str, params: Sequence[Param], limits: Limits) -> None:
    """Compile ``sql`` without running it (``EXPLAIN``): one statement, valid, allowed.

    Raises ``QueryError`` saying what is wrong, so the user is never asked to confirm a
    statement that cannot run.
    """
    check_params(params)
    with FencedConnection(path, read_only=False, timeout=limits.timeout) as connection:
        try:
            connection.db.execute(f"EXPLAIN {sql}", list(params)).fetchall()
        except sqlite3.Error as exc:
            raise QueryError(problem(exc, connection, timeout=limits.timeout, writing=True)) from None


def run_statement(path: Path, sql: str, params: Sequence[Param], limits: Limits) -> dict[str, Any]:
    """Run ``sql`` once (its own transaction); the rows it changed and the last rowid."""
    check_params(params)
    with FencedConnection(path, read_only=False, timeout=limits.timeout) as connection:
        try:
            cursor = connection.db.execute(sql, list(params))
            cursor.fetchall()  # a RETURNING clause or a SELECT: run it to the end
        except sqlite3.Error as exc:
            raise QueryError(problem(exc, connection, timeout=limits.timeout, writing=True)) from None
        changed = max(cursor.rowcount, 0)  # -1 for statements that change no rows (CREATE, ...)
        return {
            "executed": True,
            "rowsAffected": changed,
            "lastRowId": cursor.lastrowid or None,
            "message": f"The statement ran; {changed} row(s) changed.",
        }

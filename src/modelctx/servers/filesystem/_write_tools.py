"""The tools that change files, left out with ``--read-only``; annotated so a host can ask first."""

from __future__ import annotations

import difflib
import os
import stat
from typing import TypedDict

from ...errors import ToolError
from ...server import Server
from ._files import move, read_text, write_text
from ._paths import Located, Roots, open_directory, stat_located
from ._read_tools import tool

__all__ = ["register_write_tools"]

DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": False}


class _EditRequired(TypedDict):
    oldText: str
    newText: str


class Edit(_EditRequired, total=False):
    """One exact replacement: ``oldText`` must occur exactly once, unless ``replaceAll``."""

    replaceAll: bool


def _apply(located: Located, text: str, edits: list[Edit]) -> str:
    """``text`` with ``edits`` applied in order; ``ToolError`` naming the first that does not fit."""
    for number, edit in enumerate(edits, 1):
        old, new = edit["oldText"], edit["newText"]
        if not old:
            raise ToolError(f"edit {number}: oldText is empty; give the exact text to replace")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"edit {number}: oldText was not found in {located.given!r}; nothing was changed")
        if count > 1 and not edit.get("replaceAll", False):
            raise ToolError(
                f"edit {number}: oldText occurs {count} times in {located.given!r}; include more context "
                "so it matches once, or set replaceAll; nothing was changed"
            )
        text = text.replace(old, new) if edit.get("replaceAll", False) else text.replace(old, new, 1)
    return text


def _diff(located: Located, before: str, after: str) -> str:
    name = str(located.real)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"{name} (before)", f"{name} (after)"
    )
    return "".join(lines) or "(no change)"


def _make_directories(located: Located) -> None:
    """``located`` and its missing parents, each made by ``mkdir`` under its parent's
    descriptor as the walk from the root reaches it (no link followed)."""
    try:
        os.close(open_directory(located, create=True))
    except ToolError:
        try:
            exists = not stat.S_ISDIR(stat_located(located).st_mode)
        except ToolError:
            exists = False
        if exists:
            raise ToolError(f"cannot create {located.given!r}: it exists and is not a directory") from None
        raise


def register_write_tools(server: Server, roots: Roots) -> None:
    """Add the writing tools to ``server``, confined to ``roots``."""

    @tool(server, annotations={**DESTRUCTIVE, "idempotentHint": True})
    def write_file(path: str, content: str) -> str:
        """Create a file, or replace a file's whole content, with UTF-8 text."""
        located = roots.locate(path)
        write_text(located, content)
        return f"Successfully wrote to {located.real}"

    @tool(server, annotations={**DESTRUCTIVE, "idempotentHint": False})
    def edit_file(path: str, edits: list[Edit], dryRun: bool = False) -> str:  # noqa: N803
        """Replace exact text in a file. Each oldText must match exactly once (or set
        replaceAll); if any edit does not fit, nothing is written. Returns a unified
        diff; dryRun=true only shows it."""
        located = roots.locate(path)
        before = read_text(located)
        after = _apply(located, before, edits)
        if not dryRun:
            write_text(located, after)
        return _diff(located, before, after)

    @tool(server, annotations={"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True,
                              "openWorldHint": False})
    def create_directory(path: str) -> str:
        """Create a directory and any missing parents; fine if it already exists."""
        located = roots.locate(path)
        _make_directories(located)
        return f"Successfully created directory {located.real}"

    @tool(server, annotations={**DESTRUCTIVE, "idempotentHint": False})
    def move_file(source: str, destination: str) -> str:
        """Move or rename a file or directory; fails if the destination exists."""
        origin, target = roots.locate(source), roots.locate(destination)
        move(origin, target)
        return f"Successfully moved {origin.real} to {target.real}"

"""Reading a host's JSON config, adding one server entry, and writing it back atomically."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["InstallError", "InstallUsageError", "add_entry", "parse_config", "read_config", "read_text", "write_atomically"]


class InstallError(Exception):
    """The entry cannot be written; the message says why and what to do. Nothing was changed."""


class InstallUsageError(InstallError):
    """What was asked cannot be done as written (no such FILE, not a .py file, an empty
    name, a project config for a host without one): ``modelctx install`` exits 2."""


def read_text(path: Path) -> str:
    """The text of the config at ``path``: "" when it does not exist."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"cannot read {path}: {exc}; fix its permissions or pass --config PATH") from None


def parse_config(text: str, path: Path, *, jsonc: bool = False) -> dict[str, Any]:
    """The config ``text`` as a dict: ``{}`` when it is empty. ``jsonc``: comments and
    trailing commas are allowed (VS Code's files; ``_jsonc``).

    Raises ``InstallError`` when it is not a JSON object (the other hosts' files are
    strict JSON, and what they would not read is refused rather than written back)."""
    if not text.strip():
        return {}
    if jsonc:
        from ._jsonc import blank

        text = blank(text)
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        allowed = "" if jsonc else " (comments and trailing commas are not JSON)"
        raise InstallError(
            f"{path} is not valid JSON{'C' if jsonc else ''} (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            f"fix it{allowed} or move it aside, then run install again. The file was not changed."
        ) from None
    if not isinstance(config, dict):
        raise InstallError(
            f"{path} holds a JSON {type(config).__name__}, not an object; the host expects an object. "
            "Fix it or move it aside, then run install again. The file was not changed."
        )
    return config


def read_config(path: Path, *, jsonc: bool = False) -> dict[str, Any]:
    """The config at ``path`` as a dict (``parse_config`` of its text)."""
    return parse_config(read_text(path), path, jsonc=jsonc)


def add_entry(config: dict[str, Any], servers_key: str, name: str, entry: dict[str, Any], *, force: bool, path: Path) -> dict[str, Any]:
    """A copy of ``config`` with ``entry`` at ``config[servers_key][name]``; every other
    key and server kept. An entry already there is replaced only with ``force``."""
    servers = config.get(servers_key, {})
    if not isinstance(servers, dict):
        raise InstallError(
            f'{path}: "{servers_key}" is a JSON {type(servers).__name__}, not an object of servers; '
            "fix it, then run install again. The file was not changed."
        )
    if name in servers and not force:
        raise InstallError(
            f'{path} already has a server named "{name}"; pass --force to replace it, or --name to '
            "add this one under another name. The file was not changed."
        )
    return {**config, servers_key: {**servers, name: entry}}


def write_atomically(path: Path, config: dict[str, Any], *, private: bool, text: str | None = None) -> None:
    """Write ``config`` (or ``text``, when given: the file as edited in place) to ``path`` through a temporary file in the same directory and a
    rename, so the host never reads half a file. The directory is created; an existing
    file keeps its permissions; a new one is 0600 when ``private`` (it holds env values).
    A config that is a symlink (dotfiles kept in another folder) is written where it
    points, so the link stays a link."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o600 if private else 0o644
    if text is None:
        text = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

"""``modelctx install``: add a server file to an MCP host's config.

``install(file, client="claude-desktop")`` writes the host's entry that starts ``file``
with this interpreter's ``python -m modelctx serve FILE``, keeping everything else in
the config file, and returns what it wrote and where (``Installed``). The command line
is ``modelctx install`` (``_cli.py``); each host's format and location is ``_hosts.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._config_file import InstallError, InstallUsageError, add_entry, parse_config, read_text, write_atomically
from ._hosts import HOSTS, HostFormat, server_entry

__all__ = ["HOSTS", "InstallError", "InstallUsageError", "Installed", "install"]


@dataclass(frozen=True)
class Installed:
    """What ``install`` wrote (or, with ``dry_run``, would write): the server ``name``,
    its ``entry``, the config file ``path``, and whether the file was ``written``."""

    name: str
    entry: dict[str, Any]
    path: Path
    client: str
    written: bool


def install(
    file: str | os.PathLike[str],
    *,
    client: str = "claude-desktop",
    name: str | None = None,
    env: Mapping[str, str] | None = None,
    config: str | os.PathLike[str] | None = None,
    workspace: str | os.PathLike[str] | None = None,
    force: bool = False,
    dry_run: bool = False,
    home: Path | None = None,
) -> Installed:
    """Add ``file``'s server to ``client``'s config (``config``, else the host's default
    file; ``workspace`` picks the project file of Cursor, VS Code and Claude Code).

    The entry is named ``name`` (default: the file's stem). Raises ``InstallError``, with
    the file untouched, when the config is not a JSON object or an entry of that name
    exists and ``force`` is false; ``InstallUsageError`` (an ``InstallError``) when what
    was asked is wrong as written: no such file, not a ``.py`` file, an empty name, a
    ``workspace`` for a host without a project config.
    """
    host, server_file, entry_name = _checked_request(file, client, name, config, workspace)
    path = _config_path(host, config, workspace, home)
    entry = server_entry(host, server_file, env or {})
    original = read_text(path)
    updated = add_entry(
        parse_config(original, path, jsonc=host.jsonc), host.servers_key, entry_name, entry, force=force, path=path
    )
    # A JSONC file is edited in place, so the person's comments and layout are kept.
    edited = None
    if host.jsonc and original.strip():
        from ._jsonc import with_entry

        edited = with_entry(original, host.servers_key, entry_name, entry)
    if not dry_run:
        try:
            write_atomically(path, updated, private=bool(env), text=edited)
        except OSError as exc:
            raise InstallError(f"cannot write {path}: {exc}; check the directory's permissions or pass --config PATH") from None
    return Installed(entry_name, entry, path, client, written=not dry_run)


def _checked_request(
    file: str | os.PathLike[str],
    client: str,
    name: str | None,
    config: str | os.PathLike[str] | None,
    workspace: str | os.PathLike[str] | None,
) -> tuple[HostFormat, Path, str]:
    """The host, the server file and the entry's name ``install`` was asked for;
    ``InstallUsageError`` when the request is wrong as written."""
    host = HOSTS.get(client)
    if host is None:
        raise InstallUsageError(f"unknown client {client!r}; choose one of {', '.join(HOSTS)}")
    server_file = Path(file).absolute()
    if not server_file.is_file():
        raise InstallUsageError(f"no such file: {file}; give the path of the .py file that holds your Server")
    if server_file.suffix != ".py":
        raise InstallUsageError(f"{file} is not a .py file; give the Python file that holds your Server")
    entry_name = name or server_file.stem
    if not entry_name.strip():
        raise InstallUsageError("--name must not be empty")
    if workspace is not None and config is None and not host.has_workspace_file:
        raise InstallUsageError(
            f"{client} has no project config, only the user's; leave out --workspace, or use "
            "--client cursor, vscode or claude-code for a project"
        )
    return host, server_file, entry_name


def _config_path(
    host: HostFormat, config: str | os.PathLike[str] | None, workspace: str | os.PathLike[str] | None, home: Path | None
) -> Path:
    """``config``, else the host's project file in ``workspace``, else its user file."""
    if config is not None:
        return Path(config).absolute()
    folder = Path(workspace).absolute() if workspace is not None else None
    return host.default_path(folder, home or Path.home(), sys.platform, os.environ)

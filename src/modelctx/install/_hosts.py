"""Each MCP host's config file: where it lives and what one stdio server entry looks like.

Formats and default locations, as each host documents them:

* Claude Desktop: ``claude_desktop_config.json``, ``{"mcpServers": {NAME: {"command",
  "args", "env"}}}``; in ``~/Library/Application Support/Claude`` (macOS),
  ``%APPDATA%\\Claude`` (Windows), ``$XDG_CONFIG_HOME/Claude`` or ``~/.config/Claude``
  (Linux, where the app is unofficial).
* Cursor: ``mcp.json`` with ``mcpServers``; ``~/.cursor/mcp.json`` for every project,
  ``WORKSPACE/.cursor/mcp.json`` for one.
* VS Code: ``mcp.json`` with a ``servers`` object whose stdio entries say ``"type":
  "stdio"``; ``WORKSPACE/.vscode/mcp.json``, else the user profile's ``mcp.json`` in
  ``~/Library/Application Support/Code/User`` (macOS), ``%APPDATA%\\Code\\User``
  (Windows), ``$XDG_CONFIG_HOME/Code/User`` or ``~/.config/Code/User`` (Linux).
* Claude Code: the project scope's ``WORKSPACE/.mcp.json`` with ``mcpServers``, entries
  as ``claude mcp add --scope project`` writes them (``"type": "stdio"``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["HOSTS", "HostFormat", "server_entry"]


@dataclass(frozen=True)
class HostFormat:
    """One host: the key its servers live under, whether entries carry ``"type":
    "stdio"``, and where its config file is when no ``--config`` is given."""

    name: str
    servers_key: str
    typed: bool
    has_workspace_file: bool  # True: --workspace picks a project file
    jsonc: bool = False  # True: the host reads comments and trailing commas (VS Code)

    def default_path(self, workspace: Path | None, home: Path, platform: str, environ: Mapping[str, str]) -> Path:
        """The config file this host reads: the workspace's when one is given and the
        host has such a file, else the user's, as the host finds it on ``platform``."""
        if self.name == "claude-code":
            return (workspace or Path.cwd()) / ".mcp.json"
        if workspace is not None and self.has_workspace_file:
            folder = ".cursor" if self.name == "cursor" else ".vscode"
            return workspace / folder / "mcp.json"
        if self.name == "cursor":
            return home / ".cursor" / "mcp.json"
        app_dir = _app_data(home, platform, environ)
        if self.name == "vscode":
            return app_dir / "Code" / "User" / "mcp.json"
        return app_dir / "Claude" / "claude_desktop_config.json"


def _app_data(home: Path, platform: str, environ: Mapping[str, str]) -> Path:
    """Where desktop apps keep their settings on ``platform`` (``sys.platform``)."""
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform.startswith("win"):
        appdata = environ.get("APPDATA")
        return Path(appdata) if appdata else home / "AppData" / "Roaming"
    xdg = environ.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg and os.path.isabs(xdg) else home / ".config"


HOSTS: dict[str, HostFormat] = {
    "claude-desktop": HostFormat("claude-desktop", "mcpServers", typed=False, has_workspace_file=False),
    "cursor": HostFormat("cursor", "mcpServers", typed=False, has_workspace_file=True),
    "vscode": HostFormat("vscode", "servers", typed=True, has_workspace_file=True, jsonc=True),
    "claude-code": HostFormat("claude-code", "mcpServers", typed=True, has_workspace_file=True),
}


def server_entry(host: HostFormat, server_file: Path, env: Mapping[str, str], python: str | None = None) -> dict[str, Any]:
    """The entry that starts ``server_file`` with ``python -m modelctx serve``: this
    interpreter by absolute path (hosts start servers with their own, smaller ``PATH``)
    and the file by absolute path (hosts start them in a directory of their choosing)."""
    entry: dict[str, Any] = {"type": "stdio"} if host.typed else {}
    # abspath, not resolve: a virtualenv's python is a symlink whose target is outside it.
    entry["command"] = os.path.abspath(python or sys.executable)
    entry["args"] = ["-m", "modelctx", "serve", str(server_file)]
    if env:
        entry["env"] = dict(env)
    return entry

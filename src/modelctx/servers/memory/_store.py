"""Where the memory server keeps its graph when ``--store`` is not given."""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["STORE_VARIABLE", "default_store"]

STORE_VARIABLE = "MODELCTX_MEMORY_STORE"


def _data_dir() -> Path:
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")


def default_store() -> Path:
    """``$MODELCTX_MEMORY_STORE`` if set, else ``modelctx/memory.sqlite3`` in the user's data directory."""
    chosen = os.environ.get(STORE_VARIABLE)
    return Path(chosen) if chosen else _data_dir() / "modelctx" / "memory.sqlite3"

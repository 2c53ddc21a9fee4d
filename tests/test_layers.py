"""Imports point down only (ARCHITECTURE.md): cli -> host -> auth -> server/client -> transports -> protocol -> errors.

Read from the source with ``ast``, so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import modelctx

PACKAGE = Path(modelctx.__file__).parent
# What each layer may import from modelctx, besides itself.
ALLOWED = {
    "protocol": {"errors"},
    "transports": {"protocol", "errors"},
    "server": {"transports", "protocol", "errors"},
    "client": {"transports", "protocol", "errors"},
    "auth": {"client", "server", "transports", "protocol", "errors"},
    "host": {"auth", "client", "server", "transports", "protocol", "errors"},
}


def _imported_layers(path: Path) -> set[str]:
    layers = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            parts = (node.module or "").split(".")
            # from ..x import y inside a layer package names layer x; from . import is its own layer
            if node.level == 2 and parts[0]:
                layers.add(parts[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("modelctx."):
            layers.add(node.module.split(".")[1])
    return layers


def test_each_layer_imports_only_the_layers_below_it():
    wrong = []
    for layer, allowed in ALLOWED.items():
        for path in (PACKAGE / layer).rglob("*.py"):
            if "types" in path.relative_to(PACKAGE / layer).parts:
                continue
            extra = _imported_layers(path) - allowed - {layer}
            if extra:
                wrong.append(f"{path.relative_to(PACKAGE)} imports {sorted(extra)}")
    assert wrong == []


def test_the_server_and_the_client_never_import_each_other():
    for layer, other in (("server", "client"), ("client", "server")):
        for path in (PACKAGE / layer).rglob("*.py"):
            assert other not in _imported_layers(path), path

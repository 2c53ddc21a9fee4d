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
    # Beside the stack, each on the part it uses: the reference servers are servers only,
    # the inspector a client only, the install command touches no MCP layer at all.
    "servers": {"server", "protocol", "errors"},
    "inspector": {"client", "transports", "protocol", "errors"},
    "install": {"errors"},
    "testing": {"client", "server", "transports", "protocol", "errors"},
    "cli": {"host", "auth", "client", "server", "transports", "protocol", "errors"},
}


def _imported_layers(path: Path) -> set[str]:
    # The package a module sits in, as parts under modelctx (auth/dev/_oauth.py: auth, dev).
    package = path.relative_to(PACKAGE).parent.parts
    layers = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            # from .x / ..x / ...x: resolve against this module's package, so a subpackage's
            # "from .._dpop" names its own layer (auth), not a layer called "_dpop".
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = [*base, *(node.module or "").split(".")]
            if target and target[0]:
                layers.add(target[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("modelctx."):
            layers.add(node.module.split(".")[1])
    return layers


def test_each_layer_imports_only_the_layers_below_it():
    wrong = []
    for layer, allowed in ALLOWED.items():
        for path in (PACKAGE / layer).rglob("*.py"):
            if "types" in path.relative_to(PACKAGE / layer).parts:
                continue
            if path.name == "__main__.py" and _imported_layers(path) <= {"cli", layer}:
                continue  # a `python -m` entry point runs the command line: it stands above every layer
            extra = _imported_layers(path) - allowed - {layer}
            if extra:
                wrong.append(f"{path.relative_to(PACKAGE)} imports {sorted(extra)}")
    assert wrong == []


def test_the_server_and_the_client_never_import_each_other():
    for layer, other in (("server", "client"), ("client", "server")):
        for path in (PACKAGE / layer).rglob("*.py"):
            assert other not in _imported_layers(path), path

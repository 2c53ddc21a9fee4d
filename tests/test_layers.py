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
    # auth reaches URLs through transports.fetch, so it needs nothing of the client.
    "auth": {"server", "transports", "protocol", "errors"},
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


# -- private insides stay inside their package ---------------------------------------------------
#
# A module or name with a leading underscore belongs to the top-level package it is in; another
# package reaches it only through the package's public names (its ``__init__``, or a public module
# such as ``transports/fetch.py`` or ``protocol/connection.py``, the seams). None reaches in today
# (issue 22 took the list from 122 to 0): an exception would be listed here, by the private module
# reached, with the importing files and its reason; a new one fails the test, and so does an entry
# that no longer happens.
REACHING_IN: dict[str, set[str]] = {}


def _reaching_in(source: str, package: tuple[str, ...]) -> set[str]:
    """The private modules of other top-level packages that a module of ``package`` (its parts
    under modelctx) imports from, or whose private names it imports, as ``package._module``."""
    reached = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level >= 1:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            target = [*base, *(node.module or "").split(".")]
        elif node.module and node.module.split(".")[0] == "modelctx":
            target = node.module.split(".")[1:]
        else:
            continue
        target = [part for part in target if part]
        if not target or (package and target[0] == package[0]):
            continue
        private = [part for part in target[1:] if part.startswith("_")]
        if private:
            reached.add(f"{target[0]}.{private[0]}")
        for alias in node.names:  # from ..protocol import _meta; from ..server._x import _name
            if alias.name.startswith("_") and not private:
                reached.add(f"{target[0]}.{alias.name}")
    return reached


def _every_reach_in() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).parts[:2] == ("protocol", "types"):
            continue  # generated
        for module in _reaching_in(path.read_text(), path.relative_to(PACKAGE).parent.parts):
            found.setdefault(module, set()).add(path.relative_to(PACKAGE).as_posix())
    return found


def test_no_package_imports_another_packages_private_modules_or_names():
    found = _every_reach_in()
    new = {module: files - REACHING_IN.get(module, set()) for module, files in found.items()}
    assert {module: files for module, files in new.items() if files} == {}, (
        "import these through the package's public names (or give it one), not its private module"
    )


def test_the_list_of_imports_that_still_reach_in_only_shrinks():
    found = _every_reach_in()
    gone = {module: files - found.get(module, set()) for module, files in REACHING_IN.items()}
    assert {module: files for module, files in gone.items() if files} == {}, "delete these entries from REACHING_IN"


def test_a_private_import_of_another_package_is_found_relative_or_absolute():
    # The finder itself: both spellings, a private module and a private name, and not one's own package.
    source = (
        "from ...client._fetch import x\n"
        "from modelctx.server._bus import y\n"
        "from ...protocol import _meta\n"
        "from ._resource import z\n"
        "from .._dpop import w\n"
        "from ...transports.fetch import UrlPolicy\n"
    )
    assert _reaching_in(source, ("auth", "dev")) == {"client._fetch", "server._bus", "protocol._meta"}

"""The exception tree drawn in ``modelctx.errors``'s docstring is the tree of classes.

Every module under modelctx is imported, and every subclass of ``MCPError`` found is
compared with the drawing: each drawn under the class it derives from, none left out,
none drawn that does not exist.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import modelctx
from modelctx import errors
from modelctx.errors import MCPError

# A node of the drawing: its tree prefix, then "├── " or "└── " (none for the root), then its name.
_NODE = re.compile(r"^(?P<prefix>(?:[│ ]   )*)(?:[├└]── )?(?P<name>[A-Z]\w*)(?:\s|$)")


def _drawing() -> dict[str, str | None]:
    """Each class named in the drawing -> the one drawn above it (None for the root)."""
    doc = errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    parents: dict[str, str | None] = {}
    path: list[str] = []  # the last node seen at each depth
    for line in block.splitlines():
        line = line.removeprefix("    ")
        match = _NODE.match(line)
        if match is None or ("── " not in line and path):
            continue  # a description carried over to the next line
        depth = len(match["prefix"]) // 4 + (1 if "── " in line else 0)
        del path[depth:]
        name = match["name"]
        assert name not in parents, f"{name} is drawn twice"
        parents[name] = path[-1] if path else None
        path.append(name)
    return parents


def _classes() -> dict[str, str | None]:
    """Each MCPError subclass defined in modelctx -> its nearest MCPError base."""
    for module in pkgutil.walk_packages(modelctx.__path__, "modelctx."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: dict[str, str | None] = {"MCPError": None}
    todo = [MCPError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            todo.append(sub)
            if not sub.__module__.startswith("modelctx.") or sub.__name__.startswith("_"):
                continue  # a private class is not part of the tree a user catches
            parent = next(base for base in sub.__bases__ if issubclass(base, MCPError))
            if parent.__name__ == sub.__name__:
                # The same error seen from inside a package (transports._url_guard.UrlRefused is
                # errors.UrlRefused and the transport's HttpError at once): one node.
                continue
            assert found.get(sub.__name__, parent.__name__) == parent.__name__, f"two {sub.__name__} classes"
            found[sub.__name__] = parent.__name__
    return found


def test_the_drawing_shows_every_error_class_under_its_parent():
    drawn, defined = _drawing(), _classes()
    assert {name: parent for name, parent in defined.items() if drawn.get(name, "?") != parent} == {}, (
        "draw these in errors.py's docstring, each under the class it derives from"
    )
    assert sorted(set(drawn) - set(defined)) == [], "the drawing names classes that do not exist"


def test_the_drawing_includes_the_classes_defined_outside_errors_py():
    drawn = _drawing()
    for name in ("RateLimited", "StartupError", "TaskCancelled", "HostConfigError", "InvalidDPoPProof"):
        assert name in drawn, name


def test_the_drawing_is_read_as_drawn():
    # The reader itself, on the top of the drawing.
    drawn = _drawing()
    assert drawn["MCPError"] is None
    assert drawn["ProtocolError"] == "MCPError"
    assert drawn["ResourceNotFound"] == "InvalidParams"
    assert drawn["SessionExpired"] == "ConnectionClosed"
    assert drawn["ConversationFileError"] == "LocalError"

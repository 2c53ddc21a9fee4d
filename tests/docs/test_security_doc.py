"""SECURITY.md is a promise: every limit and guard in it names its scope and a test that exists.

Each row of its tables states a scope (per request, connection, session, principal, process, or
shared through Redis), and every test it cites (`tests/folder/test_file.py::name`, the file's path
in the repository; `::name` for the same file, `::…suffix` for a name that shares the previous
one's beginning) is a test function of that file, so a test that is renamed or removed cannot
leave a promise standing without its proof.
"""

from __future__ import annotations

import ast
import re
from functools import cache

from tests.support.paths import ROOT

SECURITY = ROOT / "SECURITY.md"
CITATION = re.compile(r"`((?:tests/(?:\w+/)*test_\w+\.py)?(?:::[\w…]+)*)`")


def _rows(heading: str) -> list[list[str]]:
    """The cells of each row of the table under the ``## heading`` of SECURITY.md."""
    text = SECURITY.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows[1:]]


@cache
def _tests_in(file_path: str) -> frozenset[str]:
    path = ROOT / file_path
    assert path.is_file(), f"SECURITY.md cites {file_path}, which is not a test file"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(
        node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    )


def _check_citations(cell: str) -> int:
    """Assert that every test ``cell`` cites exists; return how many it cites."""
    current: str | None = None
    cited = 0
    for citation in CITATION.findall(cell):
        file_part, _, names = citation.partition("::")
        if file_part:
            current = file_part
            _tests_in(current)
        assert current is not None, f"{citation!r} names no test file before it"
        cited += 1
        for name in names.split("::") if names else []:
            defined = _tests_in(current)
            if name.startswith("…"):
                assert any(test.endswith(name[1:]) for test in defined), f"{current}::{name} is not a test"
            elif name[:1].isupper():
                continue  # a test class: its methods are the names after it
            else:
                assert name in defined, f"{current}::{name} is not a test"
    return cited


def test_every_limit_states_its_scope_and_cites_tests_that_exist() -> None:
    rows = _rows("Limits (defaults; where to change them)")
    assert len(rows) > 20
    for what, _default, scope, _where, tests in rows:
        assert scope.startswith(("per ", "shared")), f"the limit {what!r} states no scope: {scope!r}"
        assert _check_citations(tests) > 0, f"the limit {what!r} cites no test"


def test_every_guard_states_its_scope_and_cites_tests_that_exist() -> None:
    rows = _rows("Guards")
    assert len(rows) > 15
    for guard, scope, tests in rows:
        assert scope.startswith(("per ", "shared")), f"the guard {guard[:40]!r} states no scope: {scope!r}"
        assert _check_citations(tests) > 0, f"the guard {guard[:40]!r} cites no test"

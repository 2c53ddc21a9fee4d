"""Can a URI match a template at all? Answered in time linear in the URI.

``re`` backtracks: a template whose variables can swallow the literal after them
(``{a}.{b}.{c}/x``: a value may hold a ".") takes O(n^k) steps to *reject* a URI of
n characters, and a peer chooses the URI (``resources/read``). 3,000 characters cost
52 s on the event loop. So before the regex runs, this module decides in one pass per
step whether any match exists, on a description of the template as steps:

* ``Lit(text)``: exactly ``text``;
* ``Run(excluded)``: any number of characters, none in ``excluded`` (``None``: any);
* ``Opt(steps)``: the steps, or nothing.

The steps must describe a language that contains the regex's (they may accept more:
a URI they accept goes on to the regex; one they refuse never could have matched).
Positions reachable so far are one byte each, so the work is O(len(uri)) per step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Lit", "Opt", "Run", "Step", "may_match"]


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Run:
    excluded: frozenset[str] | None  # None: every character may be in the run


@dataclass(frozen=True)
class Opt:
    steps: tuple[Step, ...]


Step = Lit | Run | Opt


def may_match(steps: tuple[Step, ...], uri: str) -> bool:
    """False only when no string of ``steps``' language equals ``uri``."""
    reach = bytearray(len(uri) + 1)
    reach[0] = 1
    return bool(_advance(steps, uri, reach)[len(uri)])


def _advance(steps: tuple[Step, ...], uri: str, reach: bytearray) -> bytearray:
    for step in steps:
        if isinstance(step, Lit):
            reach = _literal(step.text, uri, reach)
        elif isinstance(step, Run):
            reach = _run(step.excluded, uri, reach)
        else:
            reach = _either(reach, _advance(step.steps, uri, reach))
        if reach.find(1) < 0:
            break  # nothing reachable: nothing after can be
    return reach


def _literal(text: str, uri: str, reach: bytearray) -> bytearray:
    if not text:
        return reach
    out = bytearray(len(reach))
    at = reach.find(1)
    while at >= 0:
        if uri.startswith(text, at):
            out[at + len(text)] = 1
        at = reach.find(1, at + 1)
    return out


def _run(excluded: frozenset[str] | None, uri: str, reach: bytearray) -> bytearray:
    out = bytearray(reach)  # an empty run
    spans = [(0, len(uri))] if excluded is None else (m.span() for m in _allowed(excluded).finditer(uri))
    for start, end in spans:
        # Runs are maximal, so they never touch: from the first reachable position of
        # a run, every later position up to its end is reachable.
        first = reach.find(1, start, end + 1)
        if first >= 0:
            out[first : end + 1] = b"\x01" * (end + 1 - first)
    return out


def _either(one: bytearray, other: bytearray) -> bytearray:
    size = len(one)
    return bytearray((int.from_bytes(one, "little") | int.from_bytes(other, "little")).to_bytes(size, "little"))


@lru_cache(maxsize=64)
def _allowed(excluded: frozenset[str]) -> re.Pattern[str]:
    return re.compile("[^" + "".join(re.escape(c) for c in sorted(excluded)) + "]+")

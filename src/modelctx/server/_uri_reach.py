"""Match a URI against a template's steps in time linear in the URI, with no backtracking.

A peer chooses the URI of ``resources/read``; a backtracking regex tries the splits of
a URI one by one, and some templates (``{a}{b}{?q}{c}{d}``) cost it O(n^4) steps: a 4 KB
URI held the event loop for seconds. This module reads a URI against the template as
steps:

* ``Lit(text)``: exactly ``text``;
* ``Run(excluded, shortest, at_least_one)``: characters none of which is in ``excluded``
  (``None``: any), as few as will do (``shortest``, a regex's ``*?``) or as many as
  will do (a regex's ``*``);
* ``Opt(steps)``: the steps when they can be taken (a regex's greedy ``(?:...)?``), else
  nothing.

It answers what a backtracking regex of the same steps answers: the first split, in the
regex's order of preference, that reads the whole URI. Theory of operation:

1. Backward: for each step i, the positions of the URI from which steps i.. can read the
   rest of the URI to its end. One pass over the URI per step, from the last step back.
2. Forward: from position 0, each step takes the extent it prefers among those that end
   where the next step can go on (step 1 says which). No choice is ever undone, so the
   walk reads each character once per step.

A step with a ``name`` records the span it read (an ``Opt`` skipped records none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["POSITIONS_PER_STEP", "Cost", "Lit", "Opt", "Run", "Step", "count_steps", "match_steps"]


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Run:
    excluded: frozenset[str] | None  # None: every character may be in the run
    shortest: bool = False  # prefer the shortest run that lets the rest match
    at_least_one: bool = False
    name: str | None = None


@dataclass(frozen=True)
class Opt:
    steps: tuple[Step, ...]
    name: str | None = None


Step = Lit | Run | Opt
Spans = dict[str, tuple[int, int]]


@dataclass
class Cost:
    """Positions of the URI the matcher scanned, in Python or in C.

    ``match_steps`` keeps ``positions <= POSITIONS_PER_STEP * (len(uri) + 1) *
    count_steps(steps)``: per step, a pass over the URI on the way back and what the
    step itself scans: a literal, its text at each place it is written; an optional,
    the union of its two ways; a run, its stretches (each at most one position beyond
    its length, and fewer than the URI's positions) on the way back, and its own
    stretch on the way forward.
    """

    positions: int = 0


POSITIONS_PER_STEP = 4


@dataclass
class _Plan:
    """Backward reachability of a sequence of steps: ``reach[i]`` has a 1 at each position
    from which steps i.. (then what follows the sequence) read the URI to its end."""

    reach: list[bytearray]
    inner: dict[int, _Plan] = field(default_factory=dict)  # an Opt's index: its steps' plan


def count_steps(steps: tuple[Step, ...]) -> int:
    """How many steps ``steps`` has, counting those inside each ``Opt``, and a literal
    of k characters as k (it is compared at each place it is written, and those may
    overlap)."""
    return sum(
        count_steps(step.steps) + 1 if isinstance(step, Opt) else max(1, len(step.text)) if isinstance(step, Lit) else 1
        for step in steps
    )


def match_steps(steps: tuple[Step, ...], uri: str, cost: Cost | None = None) -> Spans | None:
    """The spans the named steps read when ``steps`` read all of ``uri``, or ``None``."""
    cost = cost if cost is not None else Cost()
    end = bytearray(len(uri) + 1)
    end[len(uri)] = 1
    plan = _backward(steps, uri, end, cost)
    if not plan.reach[0][0]:
        return None
    spans: Spans = {}
    _forward(steps, plan, uri, 0, spans, cost)
    return spans


# -- backward: where can the rest be read from? -----------------------------------------
def _backward(steps: tuple[Step, ...], uri: str, after: bytearray, cost: Cost) -> _Plan:
    reach = [after] * (len(steps) + 1)
    plan = _Plan(reach)
    for index in range(len(steps) - 1, -1, -1):
        step, then = steps[index], reach[index + 1]
        cost.positions += len(then)
        if then.find(1) < 0:
            reach[index] = then  # nothing reachable after: nothing before either
        elif isinstance(step, Lit):
            reach[index] = _literal_back(step.text, uri, then, cost)
        elif isinstance(step, Run):
            reach[index] = _run_back(step, uri, then, cost)
        else:
            inner = _backward(step.steps, uri, then, cost)
            plan.inner[index] = inner
            cost.positions += len(then)  # the union of the two ways
            reach[index] = _either(inner.reach[0], then)
    return plan


def _literal_back(text: str, uri: str, then: bytearray, cost: Cost) -> bytearray:
    if not text:
        return then
    out = bytearray(len(then))
    cost.positions += len(then)  # the search
    at = uri.find(text)
    while at >= 0:  # each place the literal is written (they may overlap)
        cost.positions += len(text)
        if then[at + len(text)]:
            out[at] = 1
        at = uri.find(text, at + 1)
    return out


def _run_back(run: Run, uri: str, then: bytearray, cost: Cost) -> bytearray:
    # A run reads within one maximal stretch of allowed characters [start, stop): from
    # any position of it up to the last position where the rest can go on.
    out = bytearray(len(then)) if run.at_least_one else bytearray(then)
    for start, stop in _stretches(run.excluded, uri):
        cost.positions += stop - start + 1
        last = then.rfind(1, start, stop + 1)
        upto = last if run.at_least_one else last + 1
        if upto > start:
            out[start:upto] = b"\x01" * (upto - start)
    return out


def _either(one: bytearray, other: bytearray) -> bytearray:
    size = len(one)
    return bytearray((int.from_bytes(one, "little") | int.from_bytes(other, "little")).to_bytes(size, "little"))


def _stretches(excluded: frozenset[str] | None, uri: str) -> list[tuple[int, int]]:
    if not excluded:
        return [(0, len(uri))]
    return [m.span() for m in _allowed(excluded).finditer(uri)]


# -- forward: the split a backtracking regex would find first -----------------------------
def _forward(steps: tuple[Step, ...], plan: _Plan, uri: str, at: int, spans: Spans, cost: Cost) -> int:
    for index, step in enumerate(steps):
        start = at
        if isinstance(step, Lit):
            at += len(step.text)
            continue
        if isinstance(step, Run):
            at = _run_forward(step, uri, at, plan.reach[index + 1], cost)
        elif plan.inner[index].reach[0][at]:  # an Opt is taken whenever it can be
            at = _forward(step.steps, plan.inner[index], uri, at, spans, cost)
        else:
            continue  # an Opt that cannot be taken here: skipped, no span
        if step.name is not None:
            spans[step.name] = (start, at)
    return at


def _run_forward(run: Run, uri: str, at: int, then: bytearray, cost: Cost) -> int:
    stop = at if at == len(uri) else _stretch_end(run.excluded, uri, at)
    first = at + 1 if run.at_least_one else at
    cost.positions += stop - at + 1
    # Reachability guarantees a position in [first, stop] where the rest goes on.
    return then.find(1, first, stop + 1) if run.shortest else then.rfind(1, first, stop + 1)


def _stretch_end(excluded: frozenset[str] | None, uri: str, at: int) -> int:
    if not excluded:
        return len(uri)
    found = _allowed(excluded).match(uri, at)
    return at if found is None else found.end()


@lru_cache(maxsize=64)
def _allowed(excluded: frozenset[str]) -> re.Pattern[str]:
    # One character class, no alternation: scanned in linear time, never backtracks.
    return re.compile("[^" + "".join(re.escape(c) for c in sorted(excluded)) + "]+", re.DOTALL)

"""The scenario registry: what the benchmark measures, one module per scenario.

A scenario measures one implementation at a time: ``run(ctx, impl)`` returns a dict of
metric values for ``impl`` ("modelctx" or "official") and the runner does the rest
(both implementations, errors, the table, the JSON). ``section`` groups the rows:
"server" scenarios drive our server and the official server with the same client;
a later "client" section (our client against the official client, same server) adds
modules here with ``section="client"`` and needs no change to run.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["Metric", "Target", "Scenario", "Context", "SCENARIOS", "by_name"]


@dataclass(frozen=True)
class Target:
    """A goal for one metric.

    ``kind`` is "speedup" (ours vs official, in the better direction, at least
    ``value``) or "ours_below" / "ours_above" (our absolute value against ``value``).
    """

    kind: str
    value: float

    def describe(self, unit: str) -> str:
        if self.kind == "speedup":
            return f">= {self.value:g}x"
        sign = "<" if self.kind == "ours_below" else ">"
        return f"ours {sign} {self.value:g} {unit}"

    def met(self, ours: float | None, official: float | None, speedup: float | None) -> bool | None:
        if self.kind == "speedup":
            return None if speedup is None else speedup >= self.value
        if ours is None:
            return None
        return ours < self.value if self.kind == "ours_below" else ours > self.value


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    target: Target | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    section: str
    description: str
    metrics: tuple[Metric, ...]
    run: Callable[["Context", str], dict[str, Any]]


@dataclass
class Context:
    """What a scenario gets from the runner."""

    servers: Any  # harness.Servers
    quick: bool
    log: Callable[[str], None]
    official_env: dict[str, str] = field(default_factory=dict)
    wrk: str | None = None

    def pick(self, full: Any, quick: Any) -> Any:
        return quick if self.quick else full


def _load() -> tuple[Scenario, ...]:
    # Imported here, in display order; each module defines SCENARIO (or SCENARIOS).
    from . import http_load, startup, stdio_pipelined, stdio_serial

    found: list[Scenario] = []
    for module in (stdio_serial, stdio_pipelined, http_load, startup):
        found.extend(getattr(module, "SCENARIOS", None) or [module.SCENARIO])
    return tuple(found)


SCENARIOS: tuple[Scenario, ...] = _load()


def by_name(name: str) -> Scenario:
    for scenario in SCENARIOS:
        if scenario.name == name:
            return scenario
    known = ", ".join(s.name for s in SCENARIOS)
    raise KeyError(f"no scenario {name!r}; known: {known}")

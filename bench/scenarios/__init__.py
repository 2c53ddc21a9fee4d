"""The scenario registry: what the benchmark measures, one module per scenario.

A scenario measures one implementation at a time: ``run(ctx, impl)`` returns a dict of
metric values for ``impl`` ("modelctx" or "official") and the runner does the rest
(both implementations, errors, the table, the JSON). ``section`` groups the rows:
"server" scenarios drive our server and the official server with the same client.

"client" scenarios (``client_stdio``, ``client_http``) measure a matrix instead: each
client (ours, the official one) against each server. Their ``impls`` are
``ClientRun`` keys such as ``"modelctx->official"`` (our client, the official server)
or ``"modelctx*32->modelctx"`` (32 calls in flight), ``run(ctx, key)`` measures one
cell, and run.py prints the matrix with its ratios. ``finish(ctx)``, when given, runs
once after all of a scenario's runs, even on error (e.g. to stop shared servers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness import IMPLS  # what a "server" scenario measures: "modelctx", "official"

__all__ = ["SCENARIOS", "ClientRun", "Context", "Metric", "Scenario", "Target", "by_name"]


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
    #: Our async server against the official one (or an absolute bound).
    target: Target | None = None
    #: Our sync tool (on a worker thread) at most this many times worse than our async one.
    sync_within: float | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    section: str
    description: str
    metrics: tuple[Metric, ...]
    run: Callable[[Context, str], dict[str, Any]]
    #: What ``run`` is called with, in order: "modelctx"/"official", or ClientRun keys.
    impls: tuple[str, ...] = IMPLS
    #: Called once after the last ``run`` (also after an error): releases shared state.
    finish: Callable[[Context], None] | None = None


@dataclass(frozen=True)
class ClientRun:
    """One cell of a client matrix: ``client`` against ``server``, ``in_flight`` calls at
    a time over one client. Its ``key`` names it in ``Scenario.impls`` and the JSON."""

    client: str
    server: str
    in_flight: int = 1

    @property
    def key(self) -> str:
        star = f"*{self.in_flight}" if self.in_flight > 1 else ""
        return f"{self.client}{star}->{self.server}"

    @classmethod
    def parse(cls, key: str) -> ClientRun:
        client, server = key.split("->")
        client, _, n = client.partition("*")
        return cls(client, server, int(n) if n else 1)


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
    from . import (
        client_http,
        client_stdio,
        http_load,
        issue25,
        scale_workers,
        startup,
        stdio_pipelined,
        stdio_serial,
    )

    found: list[Scenario] = []
    for module in (stdio_serial, stdio_pipelined, http_load, startup, client_stdio, client_http, scale_workers, issue25):
        found.extend(getattr(module, "SCENARIOS", None) or [module.SCENARIO])
    return tuple(found)


SCENARIOS: tuple[Scenario, ...] = _load()


def by_name(name: str) -> Scenario:
    for scenario in SCENARIOS:
        if scenario.name == name:
            return scenario
    known = ", ".join(s.name for s in SCENARIOS)
    raise KeyError(f"no scenario {name!r}; known: {known}")

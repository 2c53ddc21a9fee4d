"""Namespaced names: one flat name per (server, tool) that model APIs accept.

Model APIs accept tool names matching ``^[a-zA-Z0-9_-]{1,64}$``. A tool ``forecast`` of
the server ``weather`` is offered as ``weather_forecast``. Three things can go wrong, and
each is settled by a rule that looks only at the set of (server, tool) pairs, never at
the order servers connected in, so two hosts with the same servers give the same names:

- a character outside the set (``get.weather``) becomes ``_``;
- a name longer than 64 characters keeps the server's name (up to 20 characters) and
  the start of the tool's, then an 8-hex-digit hash of the *full, exact* server and
  tool names: the hash carries whatever was cut, so two tools that differ only past
  the cut still get different names;
- two pairs that come out the same (server ``a_b`` tool ``c`` and server ``a`` tool
  ``b_c`` are both ``a_b_c``) both get the hashed form; neither keeps the plain name,
  so which one a plain name means never depends on who came first. Should hashed names
  collide too, the colliding ones get longer hashes until all differ.

``NameMap`` keeps both directions, so a name maps back to the exact server and tool.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator

__all__ = ["NAME_PATTERN", "NameMap", "namespaced"]

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_LENGTH = 64
_SERVER_KEPT = 20
_HASH_LENGTHS = (8, 12, 16, 24, 32)  # 32 hex digits leave room for 31 of the name
_OUTSIDE = re.compile(r"[^a-zA-Z0-9_-]")


def _clean(part: str) -> str:
    return _OUTSIDE.sub("_", part)


def _digest(server: str, tool: str, length: int) -> str:
    # NUL cannot occur in either name on the wire as a separator would: the pair is exact.
    return hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()[:length]


def namespaced(server: str, tool: str, *, level: int = 0) -> str:
    """The name of ``tool`` of ``server`` for a model; it matches ``NAME_PATTERN``.

    ``level`` 0 is the plain ``<server>_<tool>`` when that fits; ``level`` n > 0 is the
    hashed form with the n-th hash length (``NameMap`` uses it to settle collisions).
    """
    plain = f"{_clean(server)}_{_clean(tool)}"
    if level == 0 and len(plain) <= MAX_LENGTH:
        return plain
    length = _HASH_LENGTHS[min(max(level, 1), len(_HASH_LENGTHS)) - 1]
    digest = _digest(server, tool, length)
    head = _clean(server)[:_SERVER_KEPT]
    room = MAX_LENGTH - len(head) - len(digest) - 2  # two underscores
    tool_part = _clean(tool)[: max(room, 0)]
    if not tool_part:
        head = head[: MAX_LENGTH - len(digest) - 1]
        return f"{head}_{digest}"
    return f"{head}_{tool_part}_{digest}"


class NameMap:
    """Names for a set of (server, tool) pairs, unique, in both directions.

    Built from the whole set at once: the same set gives the same names, in whatever
    order it is given.
    """

    def __init__(self, pairs: Iterable[tuple[str, str]]) -> None:
        unique = sorted(set(pairs))
        levels = dict.fromkeys(unique, 0)
        while True:
            by_name: dict[str, list[tuple[str, str]]] = defaultdict(list)
            for pair in unique:
                by_name[namespaced(*pair, level=levels[pair])].append(pair)
            clashes = [group for group in by_name.values() if len(group) > 1]
            if not clashes:
                break
            for group in clashes:
                for pair in group:
                    levels[pair] += 1
                    if levels[pair] > len(_HASH_LENGTHS):  # 128-bit digests alike: never in practice
                        raise ValueError(f"cannot give {pair!r} a name of its own")
        self._to_pair = {name: group[0] for name, group in by_name.items()}
        self._to_name = {pair: name for name, pair in self._to_pair.items()}

    def name_for(self, server: str, tool: str) -> str:
        """The namespaced name of ``tool`` of ``server``; ``KeyError`` if not in the map."""
        return self._to_name[(server, tool)]

    def resolve(self, name: str) -> tuple[str, str] | None:
        """The exact (server, tool) a namespaced name stands for; None for an unknown name."""
        return self._to_pair.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._to_pair

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._to_pair))

    def __len__(self) -> int:
        return len(self._to_pair)

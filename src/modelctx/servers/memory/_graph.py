"""The knowledge graph in SQLite: entities, their observations, relations between them.

Each operation opens its own connection and runs in one ``BEGIN IMMEDIATE``
transaction, so several servers (or threads) sharing a store never interleave their
reads and writes; WAL lets readers go on while one writes. The semantics are those of
``@modelcontextprotocol/server-memory``: creating an entity or relation that exists
is a no-op that is not reported back, observations are a set kept in insertion order,
deleting an entity deletes its relations, deleting what is not there is not an error.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["EntityNotFound", "KnowledgeGraph"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entities (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    entity_type TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS observations (
    id INTEGER PRIMARY KEY,
    entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    content TEXT NOT NULL,
    UNIQUE (entity_id, content)
);
CREATE TABLE IF NOT EXISTS relations (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    relation_type TEXT NOT NULL,
    UNIQUE (source, target, relation_type)
);
"""

_BUSY_TIMEOUT_SECONDS = 10.0  # another process's write transaction, at most this long

Entity = dict[str, Any]  # {"name", "entityType", "observations"}
Relation = dict[str, str]  # {"from", "to", "relationType"}


def _turn_on_wal(db: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode=WAL``, retried: while another process opens or writes the
    same new store, SQLite answers "database is locked" at once, without waiting on the
    busy timeout, and the server would not start."""
    deadline = time.monotonic() + _BUSY_TIMEOUT_SECONDS
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.02)


class EntityNotFound(LookupError):
    """An operation named an entity the graph does not hold."""


class KnowledgeGraph:
    """A knowledge graph stored in the SQLite file at ``path`` (created if missing)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_SECONDS)
        try:
            # WAL: readers are not blocked by a writer; the setting stays with the file.
            _turn_on_wal(db)
            db.executescript(_SCHEMA)  # idempotent: an existing store keeps its data
        finally:
            db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_SECONDS, isolation_level=None)
        try:
            db.execute("PRAGMA foreign_keys=ON")
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    # -- writes ----------------------------------------------------------------------
    def create_entities(self, entities: Sequence[Entity]) -> list[Entity]:
        """Add the entities whose names are new; returns those (the others are left as they are)."""
        created: list[Entity] = []
        with self._transaction() as db:
            for entity in entities:
                inserted = db.execute(
                    "INSERT INTO entities (name, entity_type) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                    (entity["name"], entity["entityType"]),
                )
                if inserted.rowcount:
                    _add_observations(db, inserted.lastrowid, entity["observations"])
                    created.append(entity)
        return created

    def create_relations(self, relations: Sequence[Relation]) -> list[Relation]:
        """Add the relations that are new; returns those."""
        created: list[Relation] = []
        with self._transaction() as db:
            for relation in relations:
                inserted = db.execute(
                    "INSERT INTO relations (source, target, relation_type) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    (relation["from"], relation["to"], relation["relationType"]),
                )
                if inserted.rowcount:
                    created.append(relation)
        return created

    def add_observations(self, additions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Add observations to existing entities; per entity, the ones that were new.

        Raises ``EntityNotFound`` (and adds nothing) when an entity does not exist.
        """
        results: list[dict[str, Any]] = []
        with self._transaction() as db:
            for addition in additions:
                entity_id = _entity_id(db, addition["entityName"])
                added = _add_observations(db, entity_id, addition["contents"])
                results.append({"entityName": addition["entityName"], "addedObservations": added})
        return results

    def delete_entities(self, names: Sequence[str]) -> None:
        """Delete the entities and every relation from or to them."""
        with self._transaction() as db:
            for name in names:
                db.execute("DELETE FROM entities WHERE name = ?", (name,))
                db.execute("DELETE FROM relations WHERE source = ? OR target = ?", (name, name))

    def delete_observations(self, deletions: Sequence[dict[str, Any]]) -> None:
        """Delete observations from entities (unknown entities and observations are skipped)."""
        with self._transaction() as db:
            for deletion in deletions:
                db.executemany(
                    "DELETE FROM observations WHERE content = ? AND entity_id = (SELECT id FROM entities WHERE name = ?)",
                    [(content, deletion["entityName"]) for content in deletion["observations"]],
                )

    def delete_relations(self, relations: Sequence[Relation]) -> None:
        """Delete the relations (those not there are skipped)."""
        with self._transaction() as db:
            db.executemany(
                "DELETE FROM relations WHERE source = ? AND target = ? AND relation_type = ?",
                [(r["from"], r["to"], r["relationType"]) for r in relations],
            )

    # -- reads -----------------------------------------------------------------------
    def read_graph(self) -> dict[str, list[Any]]:
        """Every entity and relation, in the order they were created."""
        with self._transaction() as db:
            return {"entities": _entities(db), "relations": _relations(db)}

    def search_nodes(self, query: str) -> dict[str, list[Any]]:
        """Entities whose name, type or an observation contains ``query`` (any case), and
        the relations with at least one end among them."""
        needle = query.lower()
        with self._transaction() as db:
            found = [e for e in _entities(db) if _matches(e, needle)]
            return {"entities": found, "relations": _touching(db, [e["name"] for e in found])}

    def open_nodes(self, names: Sequence[str]) -> dict[str, list[Any]]:
        """The named entities (unknown names skipped) and the relations touching them."""
        with self._transaction() as db:
            wanted = set(names)
            found = [e for e in _entities(db) if e["name"] in wanted]
            return {"entities": found, "relations": _touching(db, [e["name"] for e in found])}


def _entity_id(db: sqlite3.Connection, name: str) -> int:
    row = db.execute("SELECT id FROM entities WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise EntityNotFound(f"Entity with name {name} not found")
    return int(row[0])


def _add_observations(db: sqlite3.Connection, entity_id: int | None, contents: Iterable[str]) -> list[str]:
    added: list[str] = []
    for content in contents:
        inserted = db.execute(
            "INSERT INTO observations (entity_id, content) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (entity_id, content),
        )
        if inserted.rowcount:
            added.append(content)
    return added


def _entities(db: sqlite3.Connection) -> list[Entity]:
    rows = db.execute("SELECT id, name, entity_type FROM entities ORDER BY id").fetchall()
    observations: dict[int, list[str]] = {row[0]: [] for row in rows}
    for entity_id, content in db.execute("SELECT entity_id, content FROM observations ORDER BY id"):
        observations[entity_id].append(content)
    return [{"name": name, "entityType": kind, "observations": observations[i]} for i, name, kind in rows]


def _relations(db: sqlite3.Connection) -> list[Relation]:
    rows = db.execute("SELECT source, target, relation_type FROM relations ORDER BY id")
    return [{"from": source, "to": target, "relationType": kind} for source, target, kind in rows]


def _touching(db: sqlite3.Connection, names: list[str]) -> list[Relation]:
    wanted = set(names)
    return [r for r in _relations(db) if r["from"] in wanted or r["to"] in wanted]


def _matches(entity: Entity, needle: str) -> bool:
    return (
        needle in entity["name"].lower()
        or needle in entity["entityType"].lower()
        or any(needle in observation.lower() for observation in entity["observations"])
    )

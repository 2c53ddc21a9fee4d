"""The knowledge graph in SQLite: entities, their observations, relations between them.

Each operation opens its own connection and runs in one ``BEGIN IMMEDIATE``
transaction, so several servers (or threads) sharing a store never interleave their
reads and writes; WAL lets readers go on while one writes. The semantics are those of
``@modelcontextprotocol/server-memory``: creating an entity or relation that exists
is a no-op that is not reported back, observations are a set kept in insertion order,
deleting an entity deletes its relations, deleting what is not there is not an error.

Reads are bounded: an answer holds at most ``PAGE_ITEMS`` entities and relations and
about ``PAGE_BYTES`` of their JSON, read from SQLite a few hundred rows at a time, so
neither the answer nor the server's memory grows with the graph (``read_graph`` of
200,000 entities took the server from 39 to 341 MB and its answer, 30 MB, was past what
a client reads as one message). ``read_page`` goes on from a ``Position`` (the next
page's cursor); ``search_page`` and ``open_page`` say when they left matches out. The
dict-returning ``read_graph``, ``search_nodes`` and ``open_nodes`` (for Python callers)
are unbounded, read in chunks all the same.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PAGE_BYTES", "PAGE_ITEMS", "EntityNotFound", "KnowledgeGraph", "Page", "Position"]

#: What one read holds at most: entities and relations together ...
PAGE_ITEMS = 1_000
#: ... and about this many bytes of their JSON (a single larger item still goes alone).
PAGE_BYTES = 1 << 20
#: Rows read from SQLite at a time.
_CHUNK = 256

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


@dataclass(frozen=True)
class Position:
    """Where a ``read_page`` page starts: after entity id ``entity`` or, once every
    entity was read (``relations``), after relation id ``relation``."""

    entity: int = 0
    relation: int = 0
    relations: bool = False


@dataclass
class Page:
    """A bounded read: ``graph`` (``entities``, ``relations``); ``next`` where
    ``read_page`` goes on, or ``truncated`` for a search that left matches out."""

    graph: dict[str, list[Any]]
    bounded: bool = True
    next: Position | None = None
    truncated: bool = False
    _items: int = 0
    _bytes: int = 0

    def take(self, kind: str, item: dict[str, Any]) -> bool:
        """Add ``item`` if it fits (the first always does); False when the page is full."""
        if not self.bounded:
            self.graph[kind].append(item)
            return True
        size = len(json.dumps(item, ensure_ascii=False))
        if self._items and (self._items >= PAGE_ITEMS or self._bytes + size > PAGE_BYTES):
            return False
        self._items += 1
        self._bytes += size
        self.graph[kind].append(item)
        return True


def _chunks(rows: sqlite3.Cursor) -> Iterator[list[Any]]:
    """The rows of one query, ``_CHUNK`` at a time."""
    while chunk := rows.fetchmany(_CHUNK):
        yield chunk


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
        """Every entity and relation, in the order they were created (unbounded: the
        server's tools read pages, ``read_page``)."""
        with self._transaction() as db:
            rows = db.execute("SELECT id, name, entity_type FROM entities ORDER BY id")
            entities = [entity for _, entity in _entities(db, rows)]
            relations = db.execute("SELECT id, source, target, relation_type FROM relations ORDER BY id")
            return {"entities": entities, "relations": [relation for _, relation in _relations(relations)]}

    def search_nodes(self, query: str) -> dict[str, list[Any]]:
        """``search_page``, unbounded."""
        return self.search_page(query, bounded=False).graph

    def open_nodes(self, names: Sequence[str]) -> dict[str, list[Any]]:
        """``open_page``, unbounded."""
        return self.open_page(names, bounded=False).graph

    def read_page(self, start: Position | None = None) -> Page:
        """A page of the graph from ``start``: entities, then relations, in the order
        they were created; ``page.next`` is where the next page starts (None: the end)."""
        at = start or Position()
        page = Page({"entities": [], "relations": []})
        with self._transaction() as db:
            if not at.relations:
                rows = db.execute("SELECT id, name, entity_type FROM entities WHERE id > ? ORDER BY id", (at.entity,))
                for entity_id, entity in _entities(db, rows):
                    if not page.take("entities", entity):
                        page.next = Position(entity=entity_id - 1)  # it starts the next page
                        return page
            rows = db.execute(
                "SELECT id, source, target, relation_type FROM relations WHERE id > ? ORDER BY id",
                (at.relation if at.relations else 0,),
            )
            for relation_id, relation in _relations(rows):
                if not page.take("relations", relation):
                    page.next = Position(relation=relation_id - 1, relations=True)
                    return page
        return page

    def counts(self) -> tuple[int, int]:
        """How many entities and relations the graph holds."""
        with self._transaction() as db:
            entities = db.execute("SELECT count(*) FROM entities").fetchone()[0]
            relations = db.execute("SELECT count(*) FROM relations").fetchone()[0]
            return int(entities), int(relations)

    def search_page(self, query: str, *, bounded: bool = True) -> Page:
        """Entities whose name, type or an observation contains ``query`` (any case), and
        the relations with at least one end among them; at most a page of them."""
        needle = query.lower()
        with self._transaction() as db:
            rows = db.execute("SELECT id, name, entity_type FROM entities ORDER BY id")
            found = (e for _, e in _entities(db, rows) if _matches(e, needle))
            return _found(db, found, Page({"entities": [], "relations": []}, bounded=bounded))

    def open_page(self, names: Sequence[str], *, bounded: bool = True) -> Page:
        """The named entities (unknown names skipped) and the relations touching them;
        at most a page of them."""
        with self._transaction() as db:
            rows = db.execute(
                "SELECT id, name, entity_type FROM entities WHERE name IN (SELECT value FROM json_each(?)) ORDER BY id",
                (json.dumps(list(names)),),
            )
            found = (e for _, e in _entities(db, rows))
            return _found(db, found, Page({"entities": [], "relations": []}, bounded=bounded))


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


def _entities(db: sqlite3.Connection, rows: sqlite3.Cursor) -> Iterator[tuple[int, Entity]]:
    """``(id, entity)`` for each row of ``rows`` (id, name, type), with its observations,
    read a chunk of entities at a time."""
    for chunk in _chunks(rows):
        observations: dict[int, list[str]] = {row[0]: [] for row in chunk}
        found = db.execute(
            "SELECT entity_id, content FROM observations WHERE entity_id IN (SELECT value FROM json_each(?)) "
            "ORDER BY id",
            (json.dumps(list(observations)),),
        )
        for entity_id, content in found:
            observations[entity_id].append(content)
        for entity_id, name, kind in chunk:
            yield entity_id, {"name": name, "entityType": kind, "observations": observations[entity_id]}


def _relations(rows: sqlite3.Cursor) -> Iterator[tuple[int, Relation]]:
    """``(id, relation)`` for each row of ``rows`` (id, source, target, type)."""
    for chunk in _chunks(rows):
        for relation_id, source, target, kind in chunk:
            yield relation_id, {"from": source, "to": target, "relationType": kind}


def _found(db: sqlite3.Connection, entities: Iterable[Entity], page: Page) -> Page:
    """``page`` filled with ``entities`` and the relations touching them; ``truncated``
    when some did not fit."""
    for entity in entities:
        if not page.take("entities", entity):
            page.truncated = True
            break
    names = json.dumps([e["name"] for e in page.graph["entities"]])
    rows = db.execute(
        "SELECT id, source, target, relation_type FROM relations WHERE source IN (SELECT value FROM json_each(?1)) "
        "OR target IN (SELECT value FROM json_each(?1)) ORDER BY id",
        (names,),
    )
    for _, relation in _relations(rows):
        if not page.take("relations", relation):
            page.truncated = True
            break
    return page


def _matches(entity: Entity, needle: str) -> bool:
    return (
        needle in entity["name"].lower()
        or needle in entity["entityType"].lower()
        or any(needle in observation.lower() for observation in entity["observations"])
    )

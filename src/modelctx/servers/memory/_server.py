"""The memory server: the tools of ``@modelcontextprotocol/server-memory`` over a
``KnowledgeGraph`` stored in SQLite.

The handlers are plain methods: modelctx runs them on its worker threads, so SQLite's
blocking calls never hold up the event loop. Each result is what the npm server
returns (its JSON, indented, as text, and the same value as ``structuredContent``),
as long as it fits one page (``_graph.PAGE_ITEMS`` entities and relations, about
``_graph.PAGE_BYTES``): past that ``read_graph`` answers a page with ``nextCursor``
(its optional ``cursor`` argument reads the next), and ``search_nodes`` and
``open_nodes`` the first page of matches; a second text block says so and what to do.
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any

from ... import Server, Text, ToolError, ToolResult
from ._graph import PAGE_ITEMS, EntityNotFound, KnowledgeGraph, Page, Position
from ._schemas import INPUTS, OUTPUTS

__all__ = ["GRAPH_URI", "build_server"]

GRAPH_URI = "memory://knowledge-graph"

_WRITES = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
_DELETES = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}
_READS = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}

# name: (title, description, annotations), in the npm server's order.
_TOOLS: dict[str, tuple[str, str, dict[str, bool]]] = {
    "create_entities": ("Create Entities", "Create multiple new entities in the knowledge graph", _WRITES),
    "create_relations": (
        "Create Relations",
        "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice",
        _WRITES,
    ),
    "add_observations": ("Add Observations", "Add new observations to existing entities in the knowledge graph", _WRITES),
    "delete_entities": (
        "Delete Entities",
        "Delete multiple entities and their associated relations from the knowledge graph",
        _DELETES,
    ),
    "delete_observations": (
        "Delete Observations",
        "Delete specific observations from entities in the knowledge graph",
        _DELETES,
    ),
    "delete_relations": ("Delete Relations", "Delete multiple relations from the knowledge graph", _DELETES),
    "read_graph": ("Read Graph", "Read the entire knowledge graph", _READS),
    "search_nodes": ("Search Nodes", "Search for nodes in the knowledge graph based on a query", _READS),
    "open_nodes": ("Open Nodes", "Open specific nodes in the knowledge graph by their names", _READS),
}


def build_server(store: str | Path) -> Server:
    """A server whose knowledge graph lives in the SQLite file ``store`` (created if missing)."""
    server = Server(
        "modelctx-memory",
        instructions="A persistent knowledge graph: entities with observations, and relations between them.",
    )
    tools = _GraphTools(KnowledgeGraph(store), server)
    for name, (title, description, hints) in _TOOLS.items():
        server.add_tool(
            getattr(tools, name),
            title=title,
            description=description,
            annotations=hints,
            input_schema=INPUTS[name],
            output_schema=OUTPUTS[name],
        )
    server.resource(
        GRAPH_URI,
        name="knowledge-graph",
        title="Knowledge Graph",
        description="The full knowledge graph with all entities and relations",
        mime_type="application/json",
    )(tools.knowledge_graph)
    return server


def _data(value: dict[str, Any]) -> ToolResult:
    # The npm server's text is the bare list for the create/add tools, the graph object otherwise.
    shown = next(iter(value.values())) if len(value) == 1 else value
    return ToolResult([Text(json.dumps(shown, indent=2, ensure_ascii=False))], structured=value)


def _cursor(position: Position) -> str:
    raw = json.dumps([int(position.relations), position.relation if position.relations else position.entity])
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _position(cursor: str) -> Position:
    try:
        relations, after = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (binascii.Error, ValueError, TypeError, UnicodeError):
        relations = after = None
    if relations not in (0, 1) or not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise ToolError("cursor is not one this server gave; leave it out to read the graph from the start")
    return Position(relation=after, relations=True) if relations else Position(entity=after)


def _searched(page: Page, what: str) -> ToolResult:
    result = _data(page.graph)
    if page.truncated:
        graph = page.graph
        result.content.append(
            Text(
                f"Only the first {len(graph['entities'])} entities and {len(graph['relations'])} relations "
                f"{what} are shown: an answer holds at most {PAGE_ITEMS} of them (about 1 MB); "
                "narrow the query, or open fewer names at a time."
            )
        )
    return result


def _done(message: str) -> ToolResult:
    return ToolResult([Text(message)], structured={"success": True, "message": message})


class _GraphTools:
    """The tools' handlers (named and shaped as the npm server's), over one graph.

    Every change tells subscribers of ``memory://knowledge-graph``.
    """

    def __init__(self, graph: KnowledgeGraph, server: Server) -> None:
        self.graph = graph
        self.server = server

    def _changed(self) -> None:
        self.server.resource_updated(GRAPH_URI)

    def create_entities(self, entities: list[dict[str, Any]]) -> ToolResult:
        created = self.graph.create_entities(entities)
        self._changed()
        return _data({"entities": created})

    def create_relations(self, relations: list[dict[str, str]]) -> ToolResult:
        created = self.graph.create_relations(relations)
        self._changed()
        return _data({"relations": created})

    def add_observations(self, observations: list[dict[str, Any]]) -> ToolResult:
        try:
            results = self.graph.add_observations(observations)
        except EntityNotFound as exc:
            raise ToolError(f"{exc}; create it first with create_entities") from None
        self._changed()
        return _data({"results": results})

    def delete_entities(self, entityNames: list[str]) -> ToolResult:  # noqa: N803 - the npm server's argument name
        self.graph.delete_entities(entityNames)
        self._changed()
        return _done("Entities deleted successfully")

    def delete_observations(self, deletions: list[dict[str, Any]]) -> ToolResult:
        self.graph.delete_observations(deletions)
        self._changed()
        return _done("Observations deleted successfully")

    def delete_relations(self, relations: list[dict[str, str]]) -> ToolResult:
        self.graph.delete_relations(relations)
        self._changed()
        return _done("Relations deleted successfully")

    def read_graph(self, cursor: str | None = None) -> ToolResult:
        page = self.graph.read_page(_position(cursor) if cursor is not None else None)
        if page.next is None:
            return _data(page.graph)
        value: dict[str, Any] = {**page.graph, "nextCursor": _cursor(page.next)}
        result = _data(value)
        entities, relations = self.graph.counts()
        result.content.append(
            Text(
                f"This is one page of the graph ({entities} entities and {relations} relations in all): "
                f"call read_graph with cursor {value['nextCursor']!r} for the next page."
            )
        )
        return result

    def search_nodes(self, query: str) -> ToolResult:
        return _searched(self.graph.search_page(query), "that match")

    def open_nodes(self, names: list[str]) -> ToolResult:
        return _searched(self.graph.open_page(names), "of those named")

    def knowledge_graph(self) -> str:
        """The graph as JSON: whole when it fits one page; else its first page, with a
        ``note`` and the ``nextCursor`` the read_graph tool goes on from."""
        page = self.graph.read_page()
        value: dict[str, Any] = page.graph
        if page.next is not None:
            entities, relations = self.graph.counts()
            value = {
                **value,
                "note": f"the first page of a graph of {entities} entities and {relations} relations; "
                "call the read_graph tool with nextCursor for the rest",
                "nextCursor": _cursor(page.next),
            }
        return json.dumps(value, indent=2, ensure_ascii=False)

"""The memory server: the tools of ``@modelcontextprotocol/server-memory`` over a
``KnowledgeGraph`` stored in SQLite.

The handlers are plain functions: modelctx runs them on its worker threads, so SQLite's
blocking calls never hold up the event loop. Each result is what the npm server
returns (its JSON, indented, as text, and the same value as ``structuredContent``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ... import Server, Text, ToolError, ToolResult
from ._graph import EntityNotFound, KnowledgeGraph
from ._schemas import INPUTS, OUTPUTS

__all__ = ["GRAPH_URI", "build_server"]

GRAPH_URI = "memory://knowledge-graph"

Handler = TypeVar("Handler", bound=Callable[..., ToolResult])

_WRITES = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
_DELETES = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}
_READS = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


def _data(value: dict[str, Any]) -> ToolResult:
    return ToolResult([Text(json.dumps(_only_value(value), indent=2, ensure_ascii=False))], structured=value)


def _only_value(value: dict[str, Any]) -> Any:
    # The npm server's text is the bare list for the create/add tools, the graph object otherwise.
    return next(iter(value.values())) if len(value) == 1 else value


def _done(message: str) -> ToolResult:
    return ToolResult([Text(message)], structured={"success": True, "message": message})


def build_server(store: str | Path) -> Server:
    """A server whose knowledge graph lives in the SQLite file ``store`` (created if missing)."""
    graph = KnowledgeGraph(store)
    server = Server(
        "modelctx-memory",
        instructions="A persistent knowledge graph: entities with observations, and relations between them.",
    )

    def tool(name: str, title: str, description: str, annotations: dict[str, bool]) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            server.add_tool(
                fn,
                name=name,
                title=title,
                description=description,
                annotations=annotations,
                input_schema=INPUTS[name],
                output_schema=OUTPUTS[name],
            )
            return fn

        return register

    def changed() -> None:
        server.resource_updated(GRAPH_URI)

    @tool("create_entities", "Create Entities", "Create multiple new entities in the knowledge graph", _WRITES)
    def create_entities(entities: list[dict[str, Any]]) -> ToolResult:
        created = graph.create_entities(entities)
        changed()
        return _data({"entities": created})

    @tool(
        "create_relations",
        "Create Relations",
        "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice",
        _WRITES,
    )
    def create_relations(relations: list[dict[str, str]]) -> ToolResult:
        created = graph.create_relations(relations)
        changed()
        return _data({"relations": created})

    @tool("add_observations", "Add Observations", "Add new observations to existing entities in the knowledge graph", _WRITES)
    def add_observations(observations: list[dict[str, Any]]) -> ToolResult:
        try:
            results = graph.add_observations(observations)
        except EntityNotFound as exc:
            raise ToolError(f"{exc}; create it first with create_entities") from None
        changed()
        return _data({"results": results})

    @tool(
        "delete_entities",
        "Delete Entities",
        "Delete multiple entities and their associated relations from the knowledge graph",
        _DELETES,
    )
    def delete_entities(entityNames: list[str]) -> ToolResult:  # noqa: N803 - the npm server's argument name
        graph.delete_entities(entityNames)
        changed()
        return _done("Entities deleted successfully")

    @tool("delete_observations", "Delete Observations", "Delete specific observations from entities in the knowledge graph", _DELETES)
    def delete_observations(deletions: list[dict[str, Any]]) -> ToolResult:
        graph.delete_observations(deletions)
        changed()
        return _done("Observations deleted successfully")

    @tool("delete_relations", "Delete Relations", "Delete multiple relations from the knowledge graph", _DELETES)
    def delete_relations(relations: list[dict[str, str]]) -> ToolResult:
        graph.delete_relations(relations)
        changed()
        return _done("Relations deleted successfully")

    @tool("read_graph", "Read Graph", "Read the entire knowledge graph", _READS)
    def read_graph() -> ToolResult:
        return _data(graph.read_graph())

    @tool("search_nodes", "Search Nodes", "Search for nodes in the knowledge graph based on a query", _READS)
    def search_nodes(query: str) -> ToolResult:
        return _data(graph.search_nodes(query))

    @tool("open_nodes", "Open Nodes", "Open specific nodes in the knowledge graph by their names", _READS)
    def open_nodes(names: list[str]) -> ToolResult:
        return _data(graph.open_nodes(names))

    @server.resource(
        GRAPH_URI,
        name="knowledge-graph",
        title="Knowledge Graph",
        description="The full knowledge graph with all entities and relations",
        mime_type="application/json",
    )
    def knowledge_graph() -> str:
        return json.dumps(graph.read_graph(), indent=2, ensure_ascii=False)

    return server

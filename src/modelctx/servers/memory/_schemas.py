"""The tools' input and output schemas: those of ``@modelcontextprotocol/server-memory``,
property for property, so a client written for it works unchanged here."""

from __future__ import annotations

from typing import Any

__all__ = ["INPUTS", "OUTPUTS"]


def _strings(description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
    if description:
        schema["description"] = description
    return schema


def _object(properties: dict[str, Any], *, closed: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": list(properties)}
    if closed:  # outputs promise no other members
        schema["additionalProperties"] = False
    return schema


def _entity(closed: bool = False) -> dict[str, Any]:
    return _object(
        {
            "name": {"type": "string", "description": "The name of the entity"},
            "entityType": {"type": "string", "description": "The type of the entity"},
            "observations": _strings("An array of observation contents associated with the entity"),
        },
        closed=closed,
    )


def _relation(closed: bool = False) -> dict[str, Any]:
    return _object(
        {
            "from": {"type": "string", "description": "The name of the entity where the relation starts"},
            "to": {"type": "string", "description": "The name of the entity where the relation ends"},
            "relationType": {"type": "string", "description": "The type of the relation"},
        },
        closed=closed,
    )


def _array(items: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": items}
    if description:
        schema["description"] = description
    return schema


_GRAPH = _object(
    {"entities": _array(_entity(closed=True)), "relations": _array(_relation(closed=True))}, closed=True
)
# read_graph's page: the npm server's graph, and where the next page starts when the
# graph is larger than one answer holds (our addition; absent for a graph that fits).
_GRAPH_PAGE: dict[str, Any] = {
    **_GRAPH,
    "properties": {
        **_GRAPH["properties"],
        "nextCursor": {"type": "string", "description": "pass it as cursor to read the next page"},
    },
}
_DONE = _object({"success": {"type": "boolean"}, "message": {"type": "string"}}, closed=True)

INPUTS: dict[str, dict[str, Any]] = {
    "create_entities": _object({"entities": _array(_entity())}),
    "create_relations": _object({"relations": _array(_relation())}),
    "add_observations": _object(
        {
            "observations": _array(
                _object(
                    {
                        "entityName": {
                            "type": "string",
                            "description": "The name of the entity to add the observations to",
                        },
                        "contents": _strings("An array of observation contents to add"),
                    }
                )
            )
        }
    ),
    "delete_entities": _object({"entityNames": _strings("An array of entity names to delete")}),
    "delete_observations": _object(
        {
            "deletions": _array(
                _object(
                    {
                        "entityName": {
                            "type": "string",
                            "description": "The name of the entity containing the observations",
                        },
                        "observations": _strings("An array of observations to delete"),
                    }
                )
            )
        }
    ),
    "delete_relations": _object({"relations": _array(_relation(), "An array of relations to delete")}),
    "read_graph": {
        "type": "object",
        "properties": {
            "cursor": {
                "type": "string",
                "description": "The nextCursor of the previous page, to read the next one (leave it out to start)",
            }
        },
    },
    "search_nodes": _object(
        {
            "query": {
                "type": "string",
                "description": "The search query to match against entity names, types, and observation content",
            }
        }
    ),
    "open_nodes": _object({"names": _strings("An array of entity names to retrieve")}),
}

OUTPUTS: dict[str, dict[str, Any]] = {
    "create_entities": _object({"entities": _array(_entity(closed=True))}, closed=True),
    "create_relations": _object({"relations": _array(_relation(closed=True))}, closed=True),
    "add_observations": _object(
        {
            "results": _array(
                _object({"entityName": {"type": "string"}, "addedObservations": _strings()}, closed=True)
            )
        },
        closed=True,
    ),
    "delete_entities": _DONE,
    "delete_observations": _DONE,
    "delete_relations": _DONE,
    "read_graph": _GRAPH_PAGE,
    "search_nodes": _GRAPH,
    "open_nodes": _GRAPH,
}

"""Our memory server side by side with ``@modelcontextprotocol/server-memory``.

Both run as real stdio subprocesses (theirs on a temporary ``MEMORY_FILE_PATH``, ours on
a temporary ``--store``), get the same sequence of calls from our ``Client``, and must
offer the same tools (names, titles, descriptions, schemas, annotations) and give the
same results, so a user can switch from theirs to ours without changing anything.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

from modelctx import Client
from modelctx.transports.stdio_client import StdioClientTransport
from tests.support.wire import DEADLINE, async_test

NPM_MEMORY = os.environ.get("MODELCTX_NPM_MEMORY_BIN")
pytestmark = pytest.mark.skipif(not NPM_MEMORY, reason="MODELCTX_NPM_MEMORY_BIN is not set (scripts/test.sh installs it)")

PEOPLE = [
    {"name": "Ada", "entityType": "person", "observations": ["wrote the first program", "mathematician"]},
    {"name": "Charles", "entityType": "person", "observations": []},
    {"name": "Analytical Engine", "entityType": "machine", "observations": ["never finished"]},
]
WORKED_WITH = {"from": "Ada", "to": "Charles", "relationType": "worked with"}
DESIGNED = {"from": "Charles", "to": "Analytical Engine", "relationType": "designed"}

# The same calls, in order, to both servers: each tool, the no-op and edge cases included.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_graph", {}),
    ("create_entities", {"entities": PEOPLE}),
    ("create_entities", {"entities": [{"name": "Ada", "entityType": "robot", "observations": ["x"]}]}),
    ("create_relations", {"relations": [WORKED_WITH, DESIGNED]}),
    ("create_relations", {"relations": [WORKED_WITH]}),
    ("add_observations", {"observations": [{"entityName": "Charles", "contents": ["polymath"]}]}),
    ("add_observations", {"observations": [{"entityName": "Ada", "contents": ["mathematician", "poet's daughter"]}]}),
    ("add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}),
    ("search_nodes", {"query": "MATH"}),
    ("search_nodes", {"query": "machine"}),
    ("search_nodes", {"query": "nothing matches this"}),
    ("open_nodes", {"names": ["Ada", "Nobody"]}),
    ("delete_observations", {"deletions": [{"entityName": "Ada", "observations": ["mathematician", "absent"]}]}),
    ("delete_relations", {"relations": [WORKED_WITH, {"from": "x", "to": "y", "relationType": "z"}]}),
    ("read_graph", {}),
    ("delete_entities", {"entityNames": ["Charles", "Nobody"]}),
    ("read_graph", {}),
]


def theirs(tmp_path: Any) -> StdioClientTransport:
    assert NPM_MEMORY is not None
    env = {**os.environ, "MEMORY_FILE_PATH": str(tmp_path / "npm-memory.jsonl")}
    return StdioClientTransport(NPM_MEMORY, env=env)


def ours(tmp_path: Any) -> list[str]:
    return [sys.executable, "-m", "modelctx.servers.memory", "--store", str(tmp_path / "memory.sqlite3")]


def _without_dialect(schema: Any) -> Any:
    # Theirs names JSON Schema draft-07 in "$schema"; ours names none (2020-12, the spec's
    # default). The keywords used mean the same in both.
    return {k: v for k, v in schema.items() if k != "$schema"} if isinstance(schema, dict) else schema


def offered(tools: Any) -> dict[str, Any]:
    return {
        tool.name: {
            "title": tool.title,
            "description": tool.description,
            "inputSchema": _without_dialect(tool.input_schema),
            "outputSchema": _without_dialect(tool.output_schema),
            "annotations": tool.annotations,
        }
        for tool in tools
    }


def _without_our_paging(tools: dict[str, Any]) -> dict[str, Any]:
    """Our tools less what ours adds to theirs: read_graph's optional ``cursor`` argument
    and optional ``nextCursor`` (a graph larger than one answer comes in pages; one that
    fits is answered as theirs answers it)."""
    read = tools["read_graph"]
    inputs, outputs = dict(read["inputSchema"]), dict(read["outputSchema"])
    inputs["properties"] = {k: v for k, v in inputs["properties"].items() if k != "cursor"}
    outputs["properties"] = {k: v for k, v in outputs["properties"].items() if k != "nextCursor"}
    assert "cursor" not in inputs.get("required", []) and "nextCursor" not in outputs["required"]
    return {**tools, "read_graph": {**read, "inputSchema": inputs, "outputSchema": outputs}}


def outcome(result: Any) -> dict[str, Any]:
    return {
        "isError": bool(result.is_error),
        "text": [block.text for block in result.content],
        "structured": result.structured_content or None,
    }


async def run_sequence(target: Any) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    async with Client(target, timeout=DEADLINE) as client:
        tools = offered((await client.list_tools()).tools)
        outcomes = [outcome(await client.call_tool(name, arguments)) for name, arguments in CALLS]
        graph = (await client.read_resource("memory://knowledge-graph")).contents[0]["text"]
    return tools, outcomes, graph


@async_test(60)
async def test_ours_offers_the_same_tools_and_gives_the_same_results(tmp_path):
    their_tools, their_outcomes, their_graph = await run_sequence(theirs(tmp_path))
    our_tools, our_outcomes, our_graph = await run_sequence(ours(tmp_path))

    assert _without_our_paging(our_tools) == their_tools
    for (name, arguments), mine, reference in zip(CALLS, our_outcomes, their_outcomes, strict=True):
        if reference["isError"]:
            # The error says the same, and ours adds what to do about it.
            assert mine["isError"] and mine["text"][0].startswith(reference["text"][0]), (name, arguments)
        else:
            assert mine == reference, (name, arguments)
    assert our_graph == their_graph


@async_test(60)
async def test_a_store_of_ours_keeps_what_theirs_would_after_a_restart(tmp_path):
    for target in (theirs, ours):
        async with Client(target(tmp_path), timeout=DEADLINE) as client:
            await client.call_tool("create_entities", {"entities": PEOPLE})
            await client.call_tool("create_relations", {"relations": [DESIGNED]})
    graphs = []
    for target in (theirs, ours):
        async with Client(target(tmp_path), timeout=DEADLINE) as client:
            graphs.append((await client.call_tool("read_graph")).structured_content)

    assert graphs[0] == graphs[1] == {"entities": PEOPLE, "relations": [DESIGNED]}


@async_test(60)
async def test_where_they_differ_a_repeated_observation_is_kept_once_by_ours(tmp_path):
    # Theirs checks new observations only against those stored before the call, so the
    # same text twice in one call is stored twice; ours keeps an entity's observations a set.
    added = []
    for target in (theirs, ours):
        async with Client(target(tmp_path), timeout=DEADLINE) as client:
            await client.call_tool("create_entities", {"entities": [PEOPLE[1]]})
            twice = {"observations": [{"entityName": "Charles", "contents": ["polymath", "polymath"]}]}
            added.append((await client.call_tool("add_observations", twice)).structured_content)

    assert added == [
        {"results": [{"entityName": "Charles", "addedObservations": ["polymath", "polymath"]}]},
        {"results": [{"entityName": "Charles", "addedObservations": ["polymath"]}]},
    ]

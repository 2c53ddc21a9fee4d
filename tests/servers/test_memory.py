"""The memory reference server (``python -m modelctx.servers.memory --store PATH``)
through real transports, with our ``Client`` and the official ``mcp`` 2.3.0 client: the
knowledge graph survives restarts, two servers sharing a store lose no write, and the
``memory://knowledge-graph`` resource shows the graph.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client as OfficialClient
from mcp import StdioServerParameters

from modelctx import Client
from modelctx.client import ResourceUpdated
from modelctx.servers.memory import KnowledgeGraph, default_store
from tests.servers.test_sqlite import module_command, next_event, served_over_http
from tests.support.wire import DEADLINE, async_test

MODULE = "modelctx.servers.memory"

ADA = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
ENGINE = {"name": "Analytical Engine", "entityType": "machine", "observations": []}
DESIGNED = {"from": "Ada", "to": "Analytical Engine", "relationType": "programmed"}


def memory_server(store: Path) -> list[str]:
    return module_command(MODULE, "--store", str(store))


@contextlib.asynccontextmanager
async def connected(transport: str, store: Path, log: Path):  # type: ignore[no-untyped-def]
    with contextlib.ExitStack() as stack:
        target: Any = memory_server(store)
        if transport == "http":
            target = stack.enter_context(served_over_http(MODULE, "--store", str(store), log=log))
        async with Client(target, timeout=DEADLINE) as client:
            yield client


TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


@TRANSPORTS
@async_test()
async def test_the_graph_survives_a_restart_of_the_server(transport, tmp_path):
    store = tmp_path / "memory.sqlite3"
    async with connected(transport, store, tmp_path / "first.log") as client:
        await client.call_tool("create_entities", {"entities": [ADA, ENGINE]})
        await client.call_tool("create_relations", {"relations": [DESIGNED]})
        await client.call_tool("add_observations", {"observations": [{"entityName": "Ada", "contents": ["a poet's daughter"]}]})

    async with connected(transport, store, tmp_path / "second.log") as client:
        graph = (await client.call_tool("read_graph")).structured_content

    assert graph == {
        "entities": [{**ADA, "observations": ["wrote the first program", "a poet's daughter"]}, ENGINE],
        "relations": [DESIGNED],
    }


@async_test(60)
async def test_two_servers_sharing_a_store_lose_no_write(tmp_path):
    store = tmp_path / "shared.sqlite3"
    async with Client(memory_server(store), timeout=DEADLINE) as first, Client(memory_server(store), timeout=DEADLINE) as second:

        async def create(client: Client, prefix: str) -> None:
            for i in range(15):
                entity = {"name": f"{prefix}{i}", "entityType": "t", "observations": [prefix]}
                await client.call_tool("create_entities", {"entities": [entity]})
                await client.call_tool("add_observations", {"observations": [{"entityName": "shared", "contents": [f"{prefix}{i}"]}]})

        await first.call_tool("create_entities", {"entities": [{"name": "shared", "entityType": "t", "observations": []}]})
        await asyncio.gather(create(first, "a"), create(second, "b"))
        graph = (await first.call_tool("read_graph")).structured_content

    names = {entity["name"] for entity in graph["entities"]}
    assert names == {"shared"} | {f"{p}{i}" for p in "ab" for i in range(15)}
    [shared] = [entity for entity in graph["entities"] if entity["name"] == "shared"]
    assert sorted(shared["observations"]) == sorted(f"{p}{i}" for p in "ab" for i in range(15))


@async_test()
async def test_deleting_an_entity_deletes_its_relations_and_search_ignores_case(tmp_path):
    async with Client(memory_server(tmp_path / "m.sqlite3"), timeout=DEADLINE) as client:
        await client.call_tool("create_entities", {"entities": [ADA, ENGINE]})
        await client.call_tool("create_relations", {"relations": [DESIGNED]})
        found = (await client.call_tool("search_nodes", {"query": "FIRST PROGRAM"})).structured_content
        await client.call_tool("delete_entities", {"entityNames": ["Analytical Engine"]})
        opened = (await client.call_tool("open_nodes", {"names": ["Ada", "Nobody"]})).structured_content

    assert found == {"entities": [ADA], "relations": [DESIGNED]}
    assert opened == {"entities": [ADA], "relations": []}


@async_test()
async def test_observations_for_a_missing_entity_are_refused_and_nothing_is_added(tmp_path):
    async with Client(memory_server(tmp_path / "m.sqlite3"), timeout=DEADLINE) as client:
        await client.call_tool("create_entities", {"entities": [ADA]})
        refused = await client.call_tool(
            "add_observations",
            {"observations": [{"entityName": "Ada", "contents": ["new"]}, {"entityName": "Nobody", "contents": ["x"]}]},
        )
        graph = (await client.call_tool("read_graph")).structured_content

    assert refused.is_error
    assert refused.content[0].text == "Entity with name Nobody not found; create it first with create_entities"
    assert graph["entities"] == [ADA]  # one transaction: Ada's "new" was not kept either


@async_test()
async def test_the_knowledge_graph_resource_shows_the_graph(tmp_path):
    async with Client(memory_server(tmp_path / "m.sqlite3"), timeout=DEADLINE) as client:
        await client.call_tool("create_entities", {"entities": [ADA]})
        contents = (await client.read_resource("memory://knowledge-graph")).contents[0]

    assert contents["mimeType"] == "application/json"
    assert json.loads(contents["text"]) == {"entities": [ADA], "relations": []}


@TRANSPORTS
@async_test()
async def test_a_change_to_the_graph_tells_subscribers_of_the_resource(transport, tmp_path):
    async with connected(transport, tmp_path / "m.sqlite3", tmp_path / "log") as client:
        event = await next_event(
            client,
            lambda: client.call_tool("create_entities", {"entities": [ADA]}),
            resource_uris=["memory://knowledge-graph"],
        )

    assert event == ResourceUpdated("memory://knowledge-graph")


@pytest.mark.parametrize("transport", ["stdio", "http"])
@async_test(60)
async def test_the_official_client_reads_and_writes_the_graph(transport, tmp_path):
    store = tmp_path / "m.sqlite3"
    with contextlib.ExitStack() as stack:
        if transport == "http":
            target: Any = stack.enter_context(served_over_http(MODULE, "--store", str(store), log=tmp_path / "log"))
        else:
            target = StdioServerParameters(command=sys.executable, args=["-m", MODULE, "--store", str(store)], env=dict(os.environ))
        async with OfficialClient(target, read_timeout_seconds=DEADLINE) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            created = await client.call_tool("create_entities", {"entities": [ADA]})
            graph = await client.call_tool("read_graph", {})

    assert tools == [
        "create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
        "delete_relations", "read_graph", "search_nodes", "open_nodes",
    ]
    assert created.structured_content == {"entities": [ADA]}
    assert graph.structured_content == {"entities": [ADA], "relations": []}


def test_the_default_store_is_in_the_users_data_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("MODELCTX_MEMORY_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    if sys.platform.startswith("linux"):
        assert default_store() == tmp_path / "modelctx" / "memory.sqlite3"
    monkeypatch.setenv("MODELCTX_MEMORY_STORE", str(tmp_path / "elsewhere.db"))
    assert default_store() == tmp_path / "elsewhere.db"



def _open_and_write(store: str, writer: int) -> int:
    """One process: open the store (as a starting server does) and write to it."""
    graph = KnowledgeGraph(store)
    for j in range(50):
        graph.create_entities([{"name": f"e{j}", "entityType": "t", "observations": [f"from {writer}"]}])
        graph.add_observations([{"entityName": f"e{j}", "contents": [f"from {writer}", "\x1b[31m\u202e"]}])
    return writer


def test_processes_opening_a_new_store_while_others_write_to_it_all_open_and_lose_nothing(tmp_path):
    store = str(tmp_path / "new.sqlite3")  # not there yet: the first opener creates it and turns WAL on
    with multiprocessing.get_context("fork").Pool(6) as pool:
        assert sorted(pool.starmap(_open_and_write, [(store, w) for w in range(6)], chunksize=1)) == list(range(6))

    entities = KnowledgeGraph(store).read_graph()["entities"]
    assert len(entities) == 50
    expected = sorted([f"from {w}" for w in range(6)] + ["\x1b[31m\u202e"])
    assert all(sorted(e["observations"]) == expected for e in entities)


def _big_store(path: Path, entities: int, relations: int) -> Path:
    graph = KnowledgeGraph(path)
    graph.create_entities(
        [{"name": f"entity {i}", "entityType": "thing", "observations": [f"seen {i}"]} for i in range(entities)]
    )
    graph.create_relations(
        [{"from": f"entity {i}", "to": f"entity {i + 1}", "relationType": "next"} for i in range(relations)]
    )
    return path


@TRANSPORTS
@async_test(90)
async def test_read_graph_of_a_graph_larger_than_one_answer_comes_in_pages_that_add_up_to_the_graph(transport, tmp_path):
    # 200,000 entities in one read_graph took the server from 39 to 341 MB, and its 30 MB
    # answer was past what a client reads as one message.
    store = _big_store(tmp_path / "big.sqlite3", 2_500, 600)
    async with connected(transport, store, tmp_path / "server.log") as client:
        pages = [await client.call_tool("read_graph")]
        while (cursor := (pages[-1].structured_content or {}).get("nextCursor")) is not None:
            assert len(pages) < 10, "read_graph never reached the end of the graph"
            pages.append(await client.call_tool("read_graph", {"cursor": cursor}))
        refused = await client.call_tool("read_graph", {"cursor": "not a cursor"})
        resource = json.loads((await client.read_resource("memory://knowledge-graph")).contents[0]["text"])

    assert len(pages) == 4  # 1,000 entities and relations an answer
    for page in pages[:-1]:
        assert "2500 entities and 600 relations in all" in page.content[1].text
        assert "call read_graph with cursor" in page.content[1].text
    assert len(pages[-1].content) == 1  # the last page is the npm server's answer, no note
    entities = [e for page in pages for e in page.structured_content["entities"]]
    relations = [r for page in pages for r in page.structured_content["relations"]]
    assert [e["name"] for e in entities] == [f"entity {i}" for i in range(2_500)]
    assert entities[7] == {"name": "entity 7", "entityType": "thing", "observations": ["seen 7"]}
    assert relations == [{"from": f"entity {i}", "to": f"entity {i + 1}", "relationType": "next"} for i in range(600)]
    assert refused.is_error and "cursor is not one this server gave" in refused.content[0].text
    assert len(resource["entities"]) == 1_000 and "nextCursor" in resource and "2500 entities" in resource["note"]


@async_test(90)
async def test_search_and_open_nodes_answer_at_most_a_page_and_say_what_was_left_out(tmp_path):
    store = _big_store(tmp_path / "big.sqlite3", 2_500, 10)
    async with connected("stdio", store, tmp_path / "server.log") as client:
        searched = await client.call_tool("search_nodes", {"query": "ENTITY"})
        opened = await client.call_tool("open_nodes", {"names": [f"entity {i}" for i in range(0, 2_500, 2)]})
        few = await client.call_tool("search_nodes", {"query": "seen 3"})

    for result, what in ((searched, "that match"), (opened, "of those named")):
        graph = result.structured_content
        assert len(graph["entities"]) + len(graph["relations"]) == 1_000
        assert f"Only the first {len(graph['entities'])} entities" in result.content[1].text
        assert what in result.content[1].text and "narrow the query" in result.content[1].text
    # A search that fits is answered whole, as the npm server answers it.
    assert len(few.content) == 1
    assert {e["name"] for e in few.structured_content["entities"]} == {"entity 3"} | {
        f"entity {i}" for i in range(2_500) if str(i).startswith("3")
    }
    assert few.structured_content["relations"] == [
        {"from": "entity 2", "to": "entity 3", "relationType": "next"},
        {"from": "entity 3", "to": "entity 4", "relationType": "next"},
    ]

"""Server.from_asgi: a real FastAPI app, through its own OpenAPI document, called in-process.

No socket is opened for the app: calls go through ``httpx.ASGITransport``. The app's
pydantic models reach the tools as JSON Schema (FastAPI writes them as ``$ref``s into
``components/schemas``, a recursive one included).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi import FastAPI, Header, HTTPException, Request
from mcp import Client as OfficialClient
from pydantic import BaseModel

from modelctx import RegistrationError, Server
from modelctx.server import RouteMap, StartupError
from modelctx.testing import connected, served_http
from tests.support.wire import DEADLINE, async_test


class Item(BaseModel):
    name: str
    price: float
    tags: list[str] = []


class Folder(BaseModel):
    name: str
    children: list[Folder] = []


def make_app() -> tuple[FastAPI, dict[int, Item], list[dict[str, Any]]]:
    app = FastAPI(title="Shop", version="2.1.0")
    items: dict[int, Item] = {1: Item(name="pen", price=1.5)}
    calls: list[dict[str, Any]] = []

    @app.middleware("http")
    async def record(request: Any, call_next: Any) -> Any:
        calls.append({"path": request.scope["raw_path"], "host": request.headers.get("host"),
                      "client": request.client})
        return await call_next(request)

    @app.get("/items/{item_id}", tags=["items"])
    async def read_item(item_id: int) -> Item:
        """Read one item."""
        if item_id not in items:
            raise HTTPException(status_code=404, detail="no such item")
        return items[item_id]

    @app.post("/items", tags=["items"])
    async def create_item(item: Item, x_shop: str = Header(default="none")) -> dict[str, Any]:
        items[len(items) + 1] = item
        return {"id": len(items), "shop": x_shop}

    @app.get("/search")
    async def search(q: str, limit: int = 10) -> list[Item]:
        return [i for i in items.values() if q in i.name][:limit]

    @app.delete("/items/{item_id}", tags=["items", "admin"])
    async def delete_item(item_id: int) -> None:
        items.pop(item_id, None)

    @app.post("/folders")
    async def count(folder: Folder) -> dict[str, int]:
        def size(f: Folder) -> int:
            return 1 + sum(size(c) for c in f.children)

        return {"folders": size(folder)}

    return app, items, calls


def text(result: Any) -> str:
    return "".join(block.text for block in result.content)


def test_a_fastapi_apps_routes_become_tools_from_its_openapi_document():
    app, _, _ = make_app()
    server = Server.from_asgi(app)
    tools = {t["name"]: t for t in server.tools}

    # In the document's order: by path, then method.
    assert list(tools) == ["read_item_items__item_id__get", "delete_item_items__item_id__delete",
                           "create_item_items_post", "search_search_get", "count_folders_post"]
    assert (server.name, server.version) == ("Shop", "2.1.0")
    read = tools["read_item_items__item_id__get"]
    assert read["description"] == "Read Item\n\nRead one item."
    assert read["inputSchema"]["properties"]["item_id"]["type"] == "integer"
    assert read["outputSchema"]["required"] == ["name", "price"]
    create = tools["create_item_items_post"]["inputSchema"]
    assert set(create["properties"]) == {"x-shop", "name", "price", "tags"}
    assert create["required"] == ["name", "price"]


@async_test()
async def test_calls_reach_the_app_in_process_with_no_socket():
    app, items, calls = make_app()
    server = Server.from_asgi(app, headers={"x-shop": "north"})
    async with connected(server) as client:
        read = await client.call_tool("read_item_items__item_id__get", {"item_id": 1})
        created = await client.call_tool("create_item_items_post", {"name": "ink", "price": 3, "x-shop": "south"})
        found = await client.call_tool("search_search_get", {"q": "in", "limit": 5})
        missing = await client.call_tool("read_item_items__item_id__get", {"item_id": 9})
        invalid = await client.call_tool("read_item_items__item_id__get", {"item_id": "nine"})

    assert read.structured_content == {"name": "pen", "price": 1.5, "tags": []}
    assert created.structured_content == {"id": 2, "shop": "north"}  # the author's header wins
    assert items[2] == Item(name="ink", price=3)
    assert text(found) == '[{"name":"ink","price":3.0,"tags":[]}]'
    assert missing.is_error and text(missing) == 'GET /items/{item_id} answered 404 Not Found: {"detail":"no such item"}'
    assert invalid.is_error and len(calls) == 4  # refused by the input schema, never sent
    assert {c["host"] for c in calls} == {"asgi-app"}
    assert calls[0]["path"] == b"/items/1"


@async_test()
async def test_a_recursive_pydantic_model_is_a_ref_into_defs_and_works():
    app, _, _ = make_app()
    server = Server.from_asgi(app)
    schema = {t["name"]: t for t in server.tools}["count_folders_post"]["inputSchema"]
    async with connected(server) as client:
        counted = await client.call_tool(
            "count_folders_post", {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}
        )

    assert schema["properties"]["children"]["items"] == {"$ref": "#/$defs/Folder"}
    assert schema["$defs"]["Folder"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Folder"}
    assert counted.structured_content == {"folders": 3}


@async_test(60)
async def test_the_official_client_calls_a_fastapi_app_through_from_asgi():
    app, _, _ = make_app()
    maps = [RouteMap("exclude", tags=["admin"]), RouteMap("template", methods=["GET"], pattern=r"\{")]
    server = Server.from_asgi(app, route_maps=maps, uri_scheme="shop")
    served = served_http(server)
    async with served:
        async with OfficialClient(served.url, read_timeout_seconds=DEADLINE) as official:
            tools = [t.name for t in (await official.list_tools()).tools]
            templates = [t.uri_template for t in (await official.list_resource_templates()).resource_templates]
            item = await official.read_resource("shop://items/1")
            found = await official.call_tool("search_search_get", {"q": "pen"})

    assert tools == ["create_item_items_post", "search_search_get", "count_folders_post"]
    assert templates == ["shop://items/{item_id}"]
    assert item.contents[0].text == '{"name":"pen","price":1.5,"tags":[]}'
    assert found.is_error is False and "pen" in found.content[0].text


def test_an_app_without_an_openapi_document_is_refused_saying_what_to_pass():
    from starlette.applications import Starlette

    with pytest.raises(RegistrationError, match=r"Starlette has no openapi\(\) \(FastAPI has\): pass its document"):
        Server.from_asgi(Starlette())


@async_test()
async def test_the_apps_lifespan_runs_around_the_servers_and_its_state_reaches_requests():
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        events.append("startup")
        app.state.pool = "pool-1"
        yield {"greeting": "hello"}
        events.append("shutdown")

    app = FastAPI(lifespan=lifespan)

    @app.get("/hello", operation_id="hello")
    async def hello(request: Request) -> dict[str, str]:
        return {"greeting": request.state.greeting, "pool": request.app.state.pool}

    server = Server.from_asgi(app)
    assert events == []
    async with connected(server) as client:
        assert events == ["startup"]
        answer = await client.call_tool("hello", {})
    assert events == ["startup", "shutdown"]
    assert answer.structured_content == {"greeting": "hello", "pool": "pool-1"}


@async_test()
async def test_an_app_whose_startup_fails_fails_the_servers_start():
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        raise RuntimeError("no database")
        yield

    server = Server.from_asgi(FastAPI(lifespan=lifespan))
    with pytest.raises(StartupError) as failed:
        async with connected(server):
            pass
    assert "the ASGI app's lifespan failed" in str(failed.value.__cause__ or failed.value)

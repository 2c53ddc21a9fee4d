"""Server.from_openapi against the two Petstore documents, served by a real API on loopback.

tests/fixtures/openapi holds the documents as published (see its NOTICE.md); the API is
tests/fixtures/servers/petstore_api.py on uvicorn. Our Client and the official ``mcp`` client call
the built server; every call goes through to the API over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client as OfficialClient

from modelctx import InvalidParams, RegistrationError, Server
from modelctx.server import RouteMap
from modelctx.testing import connected, served_http
from tests.fixtures.servers.petstore_api import STORE, Served
from tests.support.paths import OPENAPI
from tests.support.wire import DEADLINE, async_test

DATA = OPENAPI
PETSTORE = DATA / "petstore.yaml"
SWAGGER = DATA / "swagger-petstore-3.yaml"


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    with Served() as served:
        yield served.url


@pytest.fixture(autouse=True)
def fresh_store() -> None:
    STORE.reset()


def text(result: Any) -> str:
    return "".join(block.text for block in result.content)


# -- the OpenAPI Initiative's petstore.yaml ----------------------------------------------------
def test_each_operation_becomes_a_tool_named_by_its_operation_id(api):
    server = Server.from_openapi(PETSTORE, base_url=f"{api}/v1")
    tools = {tool["name"]: tool for tool in server.tools}

    assert list(tools) == ["listPets", "createPets", "showPetById"]
    assert server.name == "Swagger Petstore" and server.version == "1.0.0"
    assert tools["listPets"]["description"] == "List all pets"
    assert tools["listPets"]["inputSchema"] == {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "maximum": 100, "format": "int32",
                      "description": "How many items to return at one time (max 100)"},
        },
        "additionalProperties": False,
    }
    # The body's properties are arguments of their own; Pet's $ref is inlined.
    assert tools["createPets"]["inputSchema"]["properties"] == {
        "id": {"type": "integer", "format": "int64"}, "name": {"type": "string"}, "tag": {"type": "string"},
    }
    assert tools["createPets"]["inputSchema"]["required"] == ["id", "name"]
    assert tools["showPetById"]["inputSchema"]["required"] == ["petId"]
    # A 2xx object answer is the outputSchema; an array answer (listPets) cannot be one.
    assert tools["showPetById"]["outputSchema"]["required"] == ["id", "name"]
    assert "outputSchema" not in tools["listPets"]


@async_test()
async def test_calls_reach_the_api_and_its_answers_come_back(api):
    server = Server.from_openapi(PETSTORE, base_url=f"{api}/v1")
    async with connected(server) as client:
        listed = await client.call_tool("listPets", {"limit": 1})
        created = await client.call_tool("createPets", {"id": 3, "name": "Kit", "tag": "cat"})
        shown = await client.call_tool("showPetById", {"petId": "3"})

    assert text(listed) == '[{"id":1,"name":"Rex","tag":"dog"}]'
    assert not created.is_error
    assert shown.structured_content == {"id": 3, "name": "Kit", "tag": "cat"}
    assert [(s.method, s.raw_path, s.query) for s in STORE.seen] == [
        ("GET", "/v1/pets", "limit=1"), ("POST", "/v1/pets", ""), ("GET", "/v1/pets/3", ""),
    ]
    assert STORE.seen[1].body == b'{"id":3,"name":"Kit","tag":"cat"}'
    assert STORE.seen[1].headers["content-type"] == "application/json"


@async_test()
async def test_a_non_2xx_answer_is_a_tool_error_with_its_status_and_body(api):
    server = Server.from_openapi(PETSTORE, base_url=f"{api}/v1")
    async with connected(server) as client:
        missing = await client.call_tool("showPetById", {"petId": "404"})

    assert missing.is_error is True
    assert text(missing) == 'GET /pets/{petId} answered 404 Not Found: {"code":404,"message":"no such pet"}'


@async_test()
async def test_the_spec_can_be_a_dict_or_a_url(api):
    import yaml

    from_dict = Server.from_openapi(yaml.safe_load(PETSTORE.read_text()), base_url=f"{api}/v1")
    from_url = Server.from_openapi(f"{api}/docs/swagger-petstore-3.yaml", base_url=f"{api}/api/v3")

    assert [t["name"] for t in from_dict.tools] == ["listPets", "createPets", "showPetById"]
    assert len(from_url.tools) == 19


# -- swagger-petstore's openapi.yaml (19 operations) -----------------------------------------
@async_test(60)
async def test_every_swagger_petstore_operation_goes_through(api):
    server = Server.from_openapi(SWAGGER, base_url=f"{api}/api/v3")
    pet = {"id": 7, "name": "Fido", "photoUrls": ["p.png"], "tags": [{"id": 1, "name": "good"}],
           "status": "pending", "category": {"id": 1, "name": "Dogs"}}
    user = {"id": 9, "username": "ada", "email": "ada@example.com"}
    async with connected(server) as client:
        results = {
            "addPet": await client.call_tool("addPet", pet),
            "updatePet": await client.call_tool("updatePet", {**pet, "status": "available"}),
            "findPetsByStatus": await client.call_tool("findPetsByStatus", {"status": "sold"}),
            "findPetsByTags": await client.call_tool("findPetsByTags", {"tags": ["good", "none"]}),
            "getPetById": await client.call_tool("getPetById", {"petId": 7}),
            "updatePetWithForm": await client.call_tool("updatePetWithForm", {"petId": 7, "name": "Fifi"}),
            "uploadFile": await client.call_tool("uploadFile", {"petId": 7, "body": "PNG...."}),
            "deletePet": await client.call_tool("deletePet", {"petId": 2, "api_key": "secret"}),
            "getInventory": await client.call_tool("getInventory", {}),
            "placeOrder": await client.call_tool("placeOrder", {"id": 11, "petId": 7, "quantity": 2}),
            "getOrderById": await client.call_tool("getOrderById", {"orderId": 11}),
            "deleteOrder": await client.call_tool("deleteOrder", {"orderId": 11}),
            "createUser": await client.call_tool("createUser", user),
            "createUsersWithListInput": await client.call_tool(
                "createUsersWithListInput", {"body": [{"username": "bob"}, {"username": "eve"}]}
            ),
            "loginUser": await client.call_tool("loginUser", {"username": "ada", "password": "pw"}),
            "logoutUser": await client.call_tool("logoutUser", {}),
            "getUserByName": await client.call_tool("getUserByName", {"username": "ada"}),
            "updateUser": await client.call_tool("updateUser", {"username": "ada", "body": {**user, "phone": "1"}}),
            "deleteUser": await client.call_tool("deleteUser", {"username": "bob"}),
        }

    assert {name for name, result in results.items() if result.is_error} == set()
    assert sorted(results) == sorted(t["name"] for t in server.tools)
    assert results["getPetById"].structured_content["name"] == "Fido"
    assert results["updatePetWithForm"].structured_content["name"] == "Fifi"
    assert results["getInventory"].structured_content == {"available": 2}
    assert results["getOrderById"].structured_content == {"id": 11, "petId": 7, "quantity": 2}
    assert text(results["loginUser"]) == '"logged in user session: ada"'
    assert text(results["findPetsByStatus"]).startswith('[{"id":2,"name":"Tom"')
    assert "9 bytes" not in text(results["uploadFile"]) and "7 bytes for pet 7" in text(results["uploadFile"])
    wire = {(s.method, s.raw_path): s for s in STORE.seen}
    assert wire[("GET", "/api/v3/pet/findByTags")].query == "tags=good&tags=none"  # explode: true
    assert wire[("POST", "/api/v3/pet/7")].query == "name=Fifi"
    assert wire[("DELETE", "/api/v3/pet/2")].headers["api_key"] == "secret"
    assert wire[("POST", "/api/v3/pet/7/uploadImage")].headers["content-type"] == "application/octet-stream"
    assert wire[("POST", "/api/v3/user/createWithList")].body == b'[{"username":"bob"},{"username":"eve"}]'
    assert set(STORE.users) == {"user1", "ada", "eve"}


def test_tool_annotations_follow_the_http_method(api):
    server = Server.from_openapi(SWAGGER, base_url=f"{api}/api/v3")
    annotations = {t["name"]: t["annotations"] for t in server.tools}

    assert annotations["getPetById"] == {"title": "Find pet by ID.", "readOnlyHint": True}
    assert annotations["deletePet"] == {"title": "Deletes a pet.", "destructiveHint": True, "idempotentHint": True}
    assert annotations["updatePet"]["idempotentHint"] is True and "readOnlyHint" not in annotations["updatePet"]
    assert "destructiveHint" not in annotations["addPet"]


def test_output_schemas_come_from_the_2xx_object_answer_with_refs_inlined(api):
    server = Server.from_openapi(SWAGGER, base_url=f"{api}/api/v3")
    tools = {t["name"]: t for t in server.tools}
    pet = tools["getPetById"]["outputSchema"]

    assert pet["required"] == ["name", "photoUrls"]
    assert pet["properties"]["category"]["properties"]["name"] == {"type": "string", "example": "Dogs"}
    assert "x-swagger-router-model" not in pet  # OpenAPI extensions are dropped
    assert tools["getInventory"]["outputSchema"]["additionalProperties"] == {"type": "integer", "format": "int32"}
    assert "outputSchema" not in tools["findPetsByStatus"]  # an array


# -- route maps ------------------------------------------------------------------------------
@async_test()
async def test_reads_as_resources_maps_gets_to_resources_and_templates(api):
    server = Server.from_openapi(SWAGGER, base_url=f"{api}/api/v3", route_maps=RouteMap.reads_as_resources(),
                                 uri_scheme="petstore")
    async with connected(server) as client:
        resources = [r.uri for r in await client.resources()]
        templates = [t.uri_template for t in await client.resource_templates()]
        inventory = (await client.read_resource("petstore://store/inventory")).contents
        pet = (await client.read_resource("petstore://pet/1")).contents
        available = (await client.read_resource("petstore://pet/findByStatus")).contents
        with pytest.raises(InvalidParams) as missing:
            await client.read_resource("petstore://pet/99")

    # A GET without path parameters is a resource (its optional query arguments unsent).
    assert resources == ["petstore://pet/findByStatus", "petstore://pet/findByTags", "petstore://store/inventory",
                         "petstore://user/login", "petstore://user/logout"]
    assert templates == ["petstore://pet/{petId}", "petstore://store/order/{orderId}", "petstore://user/{username}"]
    assert inventory[0]["text"] == '{"available":1,"sold":1}'
    assert inventory[0]["mimeType"] == "application/json"
    assert '"name":"Rex"' in pet[0]["text"]
    assert '"name":"Rex"' in available[0]["text"] and "Tom" not in available[0]["text"]
    assert missing.value.data == {"uri": "petstore://pet/99"}  # the API's 404: ResourceNotFound
    assert "getPetById" not in [t["name"] for t in server.tools] and "addPet" in [t["name"] for t in server.tools]


def test_route_maps_match_by_method_path_and_tags_first_match_wins(api):
    maps = [
        RouteMap("exclude", tags=["user"]),
        RouteMap("exclude", methods=["DELETE"]),
        RouteMap("tool", pattern=r"^/store/"),
        RouteMap("exclude"),
    ]
    server = Server.from_openapi(SWAGGER, base_url=f"{api}/api/v3", route_maps=maps)

    assert [t["name"] for t in server.tools] == ["getInventory", "placeOrder", "getOrderById"]


def test_a_route_map_that_makes_a_non_get_a_resource_is_refused(api):
    with pytest.raises(RegistrationError, match=r"PUT /pet: a route map makes it a resource, but only a GET can be read as a resource"):
        Server.from_openapi(SWAGGER, base_url=f"{api}/api/v3", route_maps=[RouteMap("resource")])
    with pytest.raises(RegistrationError, match="not one of"):
        RouteMap("prompt")  # type: ignore[arg-type]


# -- the official client ------------------------------------------------------------------------
@async_test(60)
async def test_the_official_mcp_client_lists_and_calls_the_openapi_tools(api):
    server = Server.from_openapi(SWAGGER, base_url=f"{api}/api/v3")
    served = served_http(server)
    async with served:
        async with OfficialClient(served.url, read_timeout_seconds=DEADLINE) as official:
            tools = {tool.name: tool for tool in (await official.list_tools()).tools}
            pet = await official.call_tool("getPetById", {"petId": 1})
            missing = await official.call_tool("getPetById", {"petId": 99})
            wrong = await official.call_tool("getPetById", {"petId": "one"})

    assert len(tools) == 19
    assert tools["getPetById"].annotations.read_only_hint is True
    assert tools["getPetById"].output_schema["required"] == ["name", "photoUrls"]
    assert pet.structured_content["name"] == "Rex"
    assert missing.is_error is True and missing.content[0].text.startswith("GET /pet/{petId} answered 404")
    assert wrong.is_error is True and "petId" in wrong.content[0].text  # checked against inputSchema, not sent
    assert [s.raw_path for s in STORE.seen] == ["/api/v3/pet/1", "/api/v3/pet/99"]

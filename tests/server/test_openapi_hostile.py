"""A spec and a model's arguments are input: from_openapi against hostile ones.

Path arguments never change the endpoint, calls never leave ``base_url``, only local
``$ref``s are followed, documents that expand without bound are refused by name, and what
the API answers is bounded before it reaches the client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from modelctx import RegistrationError, Server
from modelctx.testing import connected
from tests.fixtures.servers.petstore_api import STORE, Served
from tests.support.wire import async_test


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    with Served() as served:
        yield served.url


@pytest.fixture(autouse=True)
def fresh_store() -> None:
    STORE.reset()


def spec(paths: dict[str, Any], schemas: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "hostile", "version": "1"}, "paths": paths,
            "components": {"schemas": schemas or {}}, **top}


def get(operation_id: str, *parameters: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"get": {"operationId": operation_id, "parameters": list(parameters),
                    "responses": {"200": {"description": "ok"}}, **more}}


def path_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def text(result: Any) -> str:
    return "".join(block.text for block in result.content)


# -- the URL -----------------------------------------------------------------------------------
@async_test()
async def test_a_path_argument_is_one_percent_encoded_segment_and_never_changes_the_path(api):
    server = Server.from_openapi(spec({"/echo/items/{id}/detail": get("item", path_param("id"))}), base_url=api)
    async with connected(server) as client:
        answers = {
            value: await client.call_tool("item", {"id": value})
            for value in ["../../store/inventory", "a/b", "..", ".", "x?y=1#z", "%2F", "ü é"]
        }
        empty = await client.call_tool("item", {"id": ""})

    raw = {value: json.loads(text(result))["raw_path"] for value, result in answers.items()}
    assert raw == {
        "../../store/inventory": "/echo/items/..%2F..%2Fstore%2Finventory/detail",
        "a/b": "/echo/items/a%2Fb/detail",
        "..": "/echo/items/%2E%2E/detail",
        ".": "/echo/items/%2E/detail",
        "x?y=1#z": "/echo/items/x%3Fy%3D1%23z/detail",
        "%2F": "/echo/items/%252F/detail",
        "ü é": "/echo/items/%C3%BC%20%C3%A9/detail",
    }
    assert all(json.loads(text(r))["query"] == "" for r in answers.values())
    assert empty.is_error and text(empty) == "item: the path argument 'id' is empty"
    assert not any("inventory" in s.raw_path and "%2F" not in s.raw_path for s in STORE.seen)


@async_test()
async def test_the_specs_own_path_text_is_encoded_only_where_a_path_cannot_hold_it(api):
    server = Server.from_openapi(spec({"/echo/café menu/{id}": get("menu", path_param("id"))}), base_url=api)
    async with connected(server) as client:
        result = await client.call_tool("menu", {"id": "7"})

    assert json.loads(text(result))["raw_path"] == "/echo/caf%C3%A9%20menu/7"


@async_test()
async def test_a_header_argument_cannot_smuggle_another_header(api):
    trace = {"name": "X-Trace", "in": "header", "schema": {"type": "string"}}
    server = Server.from_openapi(spec({"/echo/h": get("h", trace)}), base_url=api)
    async with connected(server) as client:
        result = await client.call_tool("h", {"X-Trace": "t1\r\nX-Admin: yes"})

    assert result.is_error and text(result) == "h: the header argument 'X-Trace' holds a line break"
    assert STORE.seen == []


@async_test()
async def test_calls_go_to_base_url_never_to_the_specs_servers(api):
    document = spec({"/echo/here": get("here")}, servers=[{"url": "http://127.0.0.2:9/elsewhere"}])
    document["paths"]["/echo/here"]["get"]["servers"] = [{"url": "http://127.0.0.3:9/"}]
    server = Server.from_openapi(document, base_url=f"{api}/echo/base")
    async with connected(server) as client:
        result = await client.call_tool("here", {})

    assert json.loads(text(result))["raw_path"] == "/echo/base/echo/here"


def test_without_a_base_url_from_openapi_refuses_rather_than_follow_servers():
    with pytest.raises(RegistrationError, match="needs base_url=.*never followed"):
        Server.from_openapi(spec({"/x": get("x")}, servers=[{"url": "http://127.0.0.1:1"}]))
    with pytest.raises(RegistrationError, match="absolute http"):
        Server.from_openapi(spec({"/x": get("x")}), base_url="file:///etc")


@async_test()
async def test_a_path_like_a_network_location_stays_on_the_base_host(api):
    server = Server.from_openapi(spec({"//127.0.0.2:9/echo": get("sneaky")}), base_url=f"{api}/echo")
    async with connected(server) as client:
        result = await client.call_tool("sneaky", {})

    assert json.loads(text(result))["raw_path"] == "/echo//127.0.0.2:9/echo"


@async_test()
async def test_configured_headers_win_over_header_arguments(api):
    token = {"name": "x-api-key", "in": "header", "schema": {"type": "string"}}
    trace = {"name": "X-Trace", "in": "header", "schema": {"type": "string"}}
    auth = {"name": "Authorization", "in": "header", "schema": {"type": "string"}}
    server = Server.from_openapi(spec({"/echo/h": get("h", token, trace, auth)}), base_url=api,
                                 headers={"X-Api-Key": "the-author's"})
    async with connected(server) as client:
        tool = (await client.list_tools()).tools[0]
        result = await client.call_tool("h", {"x-api-key": "the-model's", "X-Trace": "t1"})

    sent = [(k, v) for k, v in json.loads(text(result))["header_list"] if k in ("x-api-key", "x-trace")]
    assert sent == [("x-trace", "t1"), ("x-api-key", "the-author's")]
    assert "Authorization" not in tool.input_schema["properties"]  # ignored, as OpenAPI says


@async_test()
async def test_redirects_are_not_followed(api):
    server = Server.from_openapi(spec({"/redirect": get("hop")}), base_url=api)
    async with connected(server) as client:
        result = await client.call_tool("hop", {})

    assert result.is_error and text(result) == "GET /redirect answered 302 Found"
    assert [s.raw_path for s in STORE.seen] == ["/redirect"]


# -- the answers ---------------------------------------------------------------------------------
@async_test()
async def test_an_error_answer_is_quoted_up_to_2_kb(api):
    server = Server.from_openapi(spec({"/big-error": get("big")}), base_url=api)
    async with connected(server) as client:
        result = await client.call_tool("big", {})

    assert result.is_error
    assert text(result) == "GET /big-error answered 500 Internal Server Error: " + "x" * 2048 + " ..."


@async_test()
async def test_a_2xx_answer_over_8_mb_is_cut_off_as_it_streams(api):
    server = Server.from_openapi(spec({"/big-answer": get("big")}), base_url=api)
    async with connected(server) as client:
        result = await client.call_tool("big", {})

    assert result.is_error and text(result) == "GET /big-answer: the answer is over 8,388,608 bytes"


@async_test()
async def test_an_api_that_does_not_answer_in_time_is_a_tool_error(api):
    seconds = {"name": "seconds", "in": "query", "schema": {"type": "number"}}
    server = Server.from_openapi(spec({"/slow": get("slow", seconds)}), base_url=api, timeout=0.3)
    async with connected(server) as client:
        result = await client.call_tool("slow", {"seconds": 3})

    assert result.is_error and text(result) == "GET /slow: the API did not answer within 0.3 s"


@async_test()
async def test_a_given_clients_own_timeout_is_kept_unless_timeout_is_passed(api):
    import httpx

    seconds = {"name": "seconds", "in": "query", "schema": {"type": "number"}}
    document = spec({"/slow": get("slow", seconds)})
    async with httpx.AsyncClient(base_url=api, timeout=0.3) as given:
        kept = Server.from_openapi(document, client=given)
        overridden = Server.from_openapi(document, client=given, timeout=0.6)
        async with connected(kept) as one, connected(overridden) as other:
            first = await one.call_tool("slow", {"seconds": 3})
            second = await other.call_tool("slow", {"seconds": 3})

    assert text(first) == "GET /slow: the API did not answer within 0.3 s"
    assert text(second) == "GET /slow: the API did not answer within 0.6 s"


@async_test()
async def test_an_api_that_is_down_is_a_tool_error_naming_no_internals():
    from tests.support.wire import free_port

    server = Server.from_openapi(spec({"/x": get("x")}), base_url=f"http://127.0.0.1:{free_port()}/api")
    async with connected(server) as client:
        result = await client.call_tool("x", {})

    assert result.is_error and text(result) == "GET /x: could not reach the API (ConnectError)"


# -- the document --------------------------------------------------------------------------------
@pytest.mark.parametrize("ref", ["https://127.0.0.1:1/schemas.yaml#/Pet", "other.yaml#/Pet", "/etc/passwd"])
def test_a_ref_outside_the_document_is_refused(ref):
    document = spec({"/x": get("x", {"name": "q", "in": "query", "schema": {"$ref": ref}})})

    with pytest.raises(RegistrationError, match=r"GET /x: \$ref .* points outside this document; only local"):
        Server.from_openapi(document, base_url="http://127.0.0.1:1")


def test_a_dangling_ref_is_refused_by_name():
    document = spec({"/x": get("x", {"$ref": "#/components/parameters/nope"})})

    with pytest.raises(RegistrationError, match=r"GET /x: \$ref '#/components/parameters/nope' points at nothing"):
        Server.from_openapi(document, base_url="http://127.0.0.1:1")


@async_test()
async def test_a_cyclic_schema_stays_a_ref_into_defs_and_validates(api):
    schemas = {
        "Node": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
            "owner": {"$ref": "#/components/schemas/Person"},
        }},
        "Person": {"type": "object", "properties": {"friend": {"$ref": "#/components/schemas/Person"}}},
    }
    body = {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}
    paths = {"/echo/tree": {"post": {"operationId": "plant", "requestBody": body,
                                     "responses": {"200": {"description": "ok"}}}}}
    server = Server.from_openapi(spec(paths, schemas), base_url=api)
    schema = server.tools[0]["inputSchema"]
    async with connected(server) as client:
        ok = await client.call_tool("plant", {"name": "root", "children": [{"name": "leaf", "children": []}]})
        bad = await client.call_tool("plant", {"name": "root", "children": [{"children": []}]})

    assert schema["properties"]["children"] == {"type": "array", "items": {"$ref": "#/$defs/Node"}}
    assert schema["properties"]["owner"]["properties"]["friend"] == {"$ref": "#/$defs/Person"}
    assert schema["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert schema["$defs"]["Person"]["properties"]["friend"] == {"$ref": "#/$defs/Person"}
    assert json.loads(json.loads(text(ok))["body"]) == {"name": "root", "children": [{"name": "leaf", "children": []}]}
    assert bad.is_error and "'name' is a required property" in text(bad)


@async_test()
async def test_references_that_fan_out_stay_refs_into_defs_instead_of_expanding(api):
    # Each level uses the next one twice: 2**20 nodes if inlined; 21 definitions as $defs.
    schemas = {f"L{i}": {"type": "object", "properties": {"a": {"$ref": f"#/components/schemas/L{i + 1}"},
                                                            "b": {"$ref": f"#/components/schemas/L{i + 1}"}}}
               for i in range(20)}
    schemas["L20"] = {"type": "string"}
    small = {"type": "object", "properties": {"n": {"type": "integer"}}}
    schemas["Small"] = small
    q = {"name": "q", "in": "query", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0"}}}}
    s = {"name": "s", "in": "query", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Small"}}}}
    server = Server.from_openapi(spec({"/echo/x": get("x", q), "/echo/y": get("y", s)}, schemas), base_url=api)
    fanned, inlined = (t["inputSchema"] for t in server.tools)
    async with connected(server) as client:
        ok = await client.call_tool("x", {"q": {"a": {"b": {"a": {}}}}})
        bad = await client.call_tool("x", {"q": {"a": 1}})

    assert fanned["properties"]["q"] == {"$ref": "#/$defs/L0"}
    assert sorted(fanned["$defs"]) == sorted(f"L{i}" for i in range(21))
    assert fanned["$defs"]["L3"]["properties"]["a"] == {"$ref": "#/$defs/L4"}
    assert inlined["properties"]["s"] == small and "$defs" not in inlined  # small ones are still inlined
    assert len(json.dumps(fanned)) < 5_000
    assert not ok.is_error and json.loads(text(ok))["query"] == "q=%7B%22a%22%3A%7B%22b%22%3A%7B%22a%22%3A%7B%7D%7D%7D%7D"
    assert bad.is_error and "is not of type 'object'" in text(bad)


def test_a_yaml_alias_bomb_is_refused(tmp_path):
    lines = ["openapi: 3.0.0", "info: {title: bomb, version: '1'}", "x-a: &a {type: string}"]
    previous = "a"
    for i in range(30):
        lines.append(f"x-{i}: &b{i} {{type: object, properties: {{p: *{previous}, q: *{previous}}}}}")
        previous = f"b{i}"
    lines += ["paths:", "  /x:", "    get:", "      operationId: x", "      parameters:",
              "        - {name: q, in: query, schema: *b29}", "      responses: {'200': {description: ok}}"]
    (tmp_path / "bomb.yaml").write_text("\n".join(lines))

    with pytest.raises(RegistrationError, match="expand to more than"):
        Server.from_openapi(tmp_path / "bomb.yaml", base_url="http://127.0.0.1:1")


def test_a_schema_nested_too_deep_is_refused_by_name():
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        deep = {"type": "array", "items": deep}

    with pytest.raises(RegistrationError, match="GET /x: a schema nests deeper than 64 levels"):
        Server.from_openapi(spec({"/x": get("x", {"name": "q", "in": "query", "schema": deep})}),
                            base_url="http://127.0.0.1:1")


def test_a_document_too_deep_for_the_parser_is_refused_by_name(tmp_path):
    (tmp_path / "deep.json").write_text('{"openapi": "3.0.0", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")

    with pytest.raises(RegistrationError, match="nests too deeply to read"):
        Server.from_openapi(tmp_path / "deep.json", base_url="http://127.0.0.1:1")


def test_a_huge_document_is_refused_before_it_is_read(tmp_path):
    from modelctx.server._openapi._load import MAX_SPEC_BYTES

    with open(tmp_path / "huge.json", "wb") as f:
        f.truncate(MAX_SPEC_BYTES + 1)

    with pytest.raises(RegistrationError, match="over the 16,777,216 limit"):
        Server.from_openapi(tmp_path / "huge.json", base_url="http://127.0.0.1:1")


def test_swagger_2_and_non_documents_are_refused_saying_what_they_are(tmp_path):
    (tmp_path / "old.json").write_text('{"swagger": "2.0", "paths": {}}')

    with pytest.raises(RegistrationError, match="not an OpenAPI 3.x document.*Swagger 2.0 document: convert"):
        Server.from_openapi(tmp_path / "old.json", base_url="http://127.0.0.1:1")
    with pytest.raises(RegistrationError, match="cannot read the OpenAPI spec"):
        Server.from_openapi(tmp_path / "missing.yaml", base_url="http://127.0.0.1:1")


def test_names_that_collide_after_sanitizing_are_made_unique_and_valid():
    paths = {
        "/a": get("list pets!"),
        "/b": get("list_pets"),
        "/c": get("list-pets?"),
        "/d/{id}": get("", path_param("id")),
        "/e": get("x" * 100),
        "/f": get("x" * 100),
    }
    names = [t["name"] for t in Server.from_openapi(spec(paths), base_url="http://127.0.0.1:1").tools]

    assert names == ["list_pets", "list_pets_2", "list-pets", "get_d_id", "x" * 64, "x" * 62 + "_2"]


@async_test()
async def test_arguments_are_checked_against_the_input_schema_before_any_request(api):
    limit = {"name": "limit", "in": "query", "required": True, "schema": {"type": "integer", "maximum": 10}}
    server = Server.from_openapi(spec({"/echo/l": get("l", limit)}), base_url=api)
    async with connected(server) as client:
        too_big = await client.call_tool("l", {"limit": 11})
        unknown = await client.call_tool("l", {"limit": 1, "admin": True})
        missing = await client.call_tool("l", {})

    assert [too_big.is_error, unknown.is_error, missing.is_error] == [True, True, True]
    assert "11 is greater than the maximum of 10" in text(too_big)
    assert "'admin' was unexpected" in text(unknown)
    assert STORE.seen == []

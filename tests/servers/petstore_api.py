"""The two Petstore APIs of tests/data/openapi, as a real Starlette app to call over HTTP.

``/api/v3/...`` implements enough of swagger-petstore-3.yaml (pets, store, users) and
``/v1/...`` the OpenAPI Initiative's petstore.yaml. Every request is recorded as it
arrived (method, raw path, query, headers, body), so tests can see what went on the wire.

Run as ``python tests/servers/petstore_api.py PORT`` to serve it on 127.0.0.1:PORT.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route


@dataclass
class Seen:
    method: str
    raw_path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Store:
    pets: dict[int, dict[str, Any]] = field(default_factory=dict)
    orders: dict[int, dict[str, Any]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    v1_pets: list[dict[str, Any]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)

    def reset(self) -> None:
        self.pets = {
            1: {"id": 1, "name": "Rex", "photoUrls": [], "tags": [{"id": 1, "name": "good"}], "status": "available"},
            2: {"id": 2, "name": "Tom", "photoUrls": ["http://x/tom.png"], "tags": [], "status": "sold",
                "category": {"id": 2, "name": "Cats"}},
        }
        self.orders = {5: {"id": 5, "petId": 1, "quantity": 1, "status": "placed", "complete": False}}
        self.users = {"user1": {"id": 1, "username": "user1", "email": "u1@example.com", "userStatus": 1}}
        self.v1_pets = [{"id": 1, "name": "Rex", "tag": "dog"}, {"id": 2, "name": "Tom"}]
        self.seen.clear()


STORE = Store()
STORE.reset()


def _not_found(what: str) -> Response:
    return PlainTextResponse(f"{what} not found", status_code=404)


def _int(request: Request, name: str) -> int | None:
    try:
        return int(request.path_params[name])
    except ValueError:
        return None


async def _json(request: Request) -> Any:
    raw = await request.body()
    kind = request.headers.get("content-type", "")
    if kind.startswith("application/x-www-form-urlencoded"):
        return {k: v[0] for k, v in parse_qs(raw.decode()).items()}
    return json.loads(raw or b"null")


async def add_pet(request: Request) -> Response:
    pet = await _json(request)
    if not isinstance(pet, dict) or "name" not in pet:
        return PlainTextResponse("Invalid input", status_code=405)
    pet.setdefault("id", max(STORE.pets, default=0) + 1)
    pet.setdefault("photoUrls", [])
    STORE.pets[int(pet["id"])] = pet
    return JSONResponse(pet)


async def update_pet(request: Request) -> Response:
    pet = await _json(request)
    if pet.get("id") not in STORE.pets:
        return _not_found("Pet")
    STORE.pets[pet["id"]].update(pet)
    return JSONResponse(STORE.pets[pet["id"]])


async def find_by_status(request: Request) -> Response:
    status = request.query_params.get("status", "available")
    return JSONResponse([p for p in STORE.pets.values() if p.get("status") == status])


async def find_by_tags(request: Request) -> Response:
    wanted = set(request.query_params.getlist("tags"))
    return JSONResponse([p for p in STORE.pets.values() if wanted & {t["name"] for t in p.get("tags", [])}])


async def pet(request: Request) -> Response:
    pet_id = _int(request, "petId")
    if pet_id is None:
        return PlainTextResponse("Invalid ID supplied", status_code=400)
    if request.method == "DELETE":
        if request.headers.get("api_key") == "forbidden":
            return PlainTextResponse("not with that key", status_code=400)
        if STORE.pets.pop(pet_id, None) is None:
            return PlainTextResponse("Invalid pet value", status_code=400)
        return Response(status_code=200)
    if pet_id not in STORE.pets:
        return _not_found("Pet")
    if request.method == "POST":
        for key in ("name", "status"):
            if key in request.query_params:
                STORE.pets[pet_id][key] = request.query_params[key]
    return JSONResponse(STORE.pets[pet_id])


async def upload_image(request: Request) -> Response:
    data = await request.body()
    return JSONResponse({"code": 200, "type": "ok", "message": f"{len(data)} bytes for pet {request.path_params['petId']}"})


async def inventory(request: Request) -> Response:
    counts: dict[str, int] = {}
    for p in STORE.pets.values():
        counts[p.get("status", "available")] = counts.get(p.get("status", "available"), 0) + 1
    return JSONResponse(counts)


async def place_order(request: Request) -> Response:
    order = await _json(request)
    order.setdefault("id", max(STORE.orders, default=0) + 1)
    STORE.orders[int(order["id"])] = order
    return JSONResponse(order)


async def order(request: Request) -> Response:
    order_id = _int(request, "orderId")
    if order_id is None or order_id not in STORE.orders:
        return _not_found("Order")
    if request.method == "DELETE":
        del STORE.orders[order_id]
        return Response(status_code=200)
    return JSONResponse(STORE.orders[order_id])


async def create_user(request: Request) -> Response:
    user = await _json(request)
    STORE.users[user["username"]] = user
    return JSONResponse(user)


async def create_users(request: Request) -> Response:
    users = await _json(request)
    for user in users:
        STORE.users[user["username"]] = user
    return JSONResponse(users[0] if users else {})


async def login(request: Request) -> Response:
    name = request.query_params.get("username", "")
    if name not in STORE.users:
        return PlainTextResponse("Invalid username/password supplied", status_code=400)
    return JSONResponse(f"logged in user session: {name}", headers={"X-Rate-Limit": "5000"})


async def logout(request: Request) -> Response:
    return PlainTextResponse("ok")


async def user(request: Request) -> Response:
    name = request.path_params["username"]
    if name not in STORE.users:
        return _not_found("User")
    if request.method == "PUT":
        STORE.users[name] = await _json(request)
        return Response(status_code=200)
    if request.method == "DELETE":
        del STORE.users[name]
        return Response(status_code=200)
    return JSONResponse(STORE.users[name])


async def big_error(request: Request) -> Response:
    return PlainTextResponse("x" * 100_000, status_code=500)


async def big_answer(request: Request) -> Response:
    return Response(b'"' + b"y" * (9 * 1024 * 1024) + b'"', media_type="application/json")


async def slow(request: Request) -> Response:
    import asyncio

    await asyncio.sleep(float(request.query_params.get("seconds", "5")))
    return JSONResponse({"slept": True})


async def redirect(request: Request) -> Response:
    return Response(status_code=302, headers={"location": "/api/v3/store/inventory"})


async def echo(request: Request) -> Response:
    """What arrived: the raw path, the query and the headers (for the hostile tests)."""
    seen = STORE.seen[-1]
    pairs = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in request.scope["headers"]]
    return JSONResponse({"raw_path": seen.raw_path, "query": seen.query, "headers": seen.headers, "header_list": pairs,
                         "body": (await request.body()).decode(errors="replace")})


async def document(request: Request) -> Response:
    from pathlib import Path

    name = request.path_params["name"]
    if name not in ("petstore.yaml", "swagger-petstore-3.yaml"):
        return _not_found(name)
    return Response((Path(__file__).parent.parent / "data" / "openapi" / name).read_bytes(),
                    media_type="application/yaml")


async def v1_pets(request: Request) -> Response:
    if request.method == "POST":
        STORE.v1_pets.append(await _json(request))
        return Response(status_code=201)
    limit = int(request.query_params.get("limit", 100))
    return JSONResponse(STORE.v1_pets[:limit], headers={"x-next": "/v1/pets?page=2"})


async def v1_pet(request: Request) -> Response:
    for p in STORE.v1_pets:
        if str(p["id"]) == request.path_params["petId"]:
            return JSONResponse(p)
    return JSONResponse({"code": 404, "message": "no such pet"}, status_code=404)


ROUTES = [
    Route("/api/v3/pet", add_pet, methods=["POST"]),
    Route("/api/v3/pet", update_pet, methods=["PUT"]),
    Route("/api/v3/pet/findByStatus", find_by_status),
    Route("/api/v3/pet/findByTags", find_by_tags),
    Route("/api/v3/pet/{petId}", pet, methods=["GET", "POST", "DELETE"]),
    Route("/api/v3/pet/{petId}/uploadImage", upload_image, methods=["POST"]),
    Route("/api/v3/store/inventory", inventory),
    Route("/api/v3/store/order", place_order, methods=["POST"]),
    Route("/api/v3/store/order/{orderId}", order, methods=["GET", "DELETE"]),
    Route("/api/v3/user", create_user, methods=["POST"]),
    Route("/api/v3/user/createWithList", create_users, methods=["POST"]),
    Route("/api/v3/user/login", login),
    Route("/api/v3/user/logout", logout),
    Route("/api/v3/user/{username}", user, methods=["GET", "PUT", "DELETE"]),
    Route("/big-error", big_error),
    Route("/big-answer", big_answer),
    Route("/slow", slow),
    Route("/redirect", redirect),
    Route("/echo/{rest:path}", echo, methods=["GET", "POST", "PUT", "DELETE"]),
    Route("/docs/{name}", document),
    Route("/v1/pets", v1_pets, methods=["GET", "POST"]),
    Route("/v1/pets/{petId}", v1_pet),
]


def recording(app: Any) -> Any:
    """``app``, with every request recorded in ``STORE.seen`` as it arrived."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []

        async def keep() -> Any:
            message = await receive()
            chunks.append(message.get("body", b""))
            return message

        seen = Seen(
            scope["method"],
            scope.get("raw_path", scope["path"].encode()).decode("latin-1"),
            scope.get("query_string", b"").decode("latin-1"),
            {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]},
            b"",
        )
        STORE.seen.append(seen)
        try:
            await app(scope, keep, send)
        finally:
            seen.body = b"".join(chunks)

    return asgi


APP = recording(Starlette(routes=ROUTES))


class Served:
    """The app on uvicorn in a thread of its own, on a free port of 127.0.0.1."""

    def __init__(self, port: int = 0) -> None:
        import socket

        import uvicorn

        if not port:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(uvicorn.Config(APP, host="127.0.0.1", port=port, log_level="warning",
                                                    lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the Petstore API did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(APP, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")

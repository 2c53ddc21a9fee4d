"""``Server.from_openapi`` and ``Server.from_asgi``: a document in, a server with its tools out."""

from __future__ import annotations

import importlib
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from ...errors import RegistrationError
from ._asgi import InProcessApp
from ._call import DEFAULT_TIMEOUT, Caller
from ._load import load_spec
from ._register import register_operations
from ._routes import RouteMap

if TYPE_CHECKING:
    from .._server import Server

__all__ = ["InProcessApp", "asgi_client_factory", "asgi_spec", "build"]


def build(
    server_class: type[Server],
    spec: dict[str, Any] | str | os.PathLike[str],
    *,
    base_url: str | None,
    client: Any,
    route_maps: Sequence[RouteMap] | None,
    headers: Mapping[str, str] | None,
    timeout: float | None,
    uri_scheme: str,
    make_client: Callable[[], Any] | None = None,
    app: InProcessApp | None = None,
    server_options: dict[str, Any],
) -> Server:
    _need("httpx")
    document = load_spec(spec, DEFAULT_TIMEOUT if timeout is None else timeout)
    if base_url is None and client is not None and str(getattr(client, "base_url", "")):
        base_url = str(client.base_url)
    if not base_url:
        raise RegistrationError(
            "from_openapi needs base_url= (where the API is), or a client= with a base_url; the spec's "
            "'servers' entries are never followed on their own"
        )
    try:
        caller = Caller(base_url, client=client, headers=headers, timeout=timeout, make_client=make_client)
    except ValueError as exc:
        raise RegistrationError(str(exc)) from None
    info: dict[str, Any] = document["info"] if isinstance(document.get("info"), dict) else {}
    options = dict(server_options)
    options.setdefault("version", str(info.get("version") or "0.1.0"))
    if isinstance(info.get("description"), str):
        options.setdefault("instructions", info["description"][:4000])
    name = options.pop("name", None) or str(info.get("title") or "openapi")
    options["lifespan"] = _closing(caller, options.get("lifespan"), app)
    server = server_class(name, **options)
    register_operations(server, document, caller, list(route_maps or ()), uri_scheme)
    return server


def _need(module: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError:
        raise RegistrationError(
            f"from_openapi and from_asgi call the API with {module}, which is not installed: "
            "pip install 'modelctx[openapi]'"
        ) from None


def asgi_spec(app: Any) -> dict[str, Any]:
    """The app's OpenAPI document: FastAPI's ``app.openapi()``. Raises ``RegistrationError``."""
    openapi = getattr(app, "openapi", None)
    if not callable(openapi):
        raise RegistrationError(
            f"{type(app).__name__} has no openapi() (FastAPI has): pass its document as spec=..."
        )
    document = openapi()
    if not isinstance(document, dict):
        raise RegistrationError(f"{type(app).__name__}.openapi() returned {type(document).__name__}, not a dict")
    return document


def asgi_client_factory(app: InProcessApp, base_url: str, timeout: float | None) -> Callable[[], Any]:
    """Makes clients that call ``app`` in this process (``httpx.ASGITransport``), no socket."""

    def make() -> Any:
        import httpx

        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url=base_url,
            timeout=DEFAULT_TIMEOUT if timeout is None else timeout,
            follow_redirects=False,
        )

    return make


def _closing(caller: Caller, user: Any, app: InProcessApp | None) -> Callable[[Any], AbstractAsyncContextManager[Any]]:
    """The server's lifespan: an in-process app's lifespan outside, the author's (if any)
    inside, the HTTP client closed after both."""

    @asynccontextmanager
    async def lifespan(server: Any) -> AsyncIterator[Any]:
        async with AsyncExitStack() as stack:
            stack.push_async_callback(caller.aclose)
            if app is not None:
                await stack.enter_async_context(app.running())
            if user is None:
                yield None
            else:
                yield await stack.enter_async_context(user(server))

    return lifespan

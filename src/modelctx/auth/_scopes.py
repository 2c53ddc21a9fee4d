"""``RequiredScopes``: the OAuth scopes each tool, prompt or resource needs, declared once.

A server middleware (``ServerConfig(middleware=[RequiredScopes(...)])``): before a
``tools/call``, ``prompts/get`` or ``resources/read`` reaches its handler, the
request's token must grant every scope declared for that name, else
``InsufficientScope``, which Streamable HTTP answers 403 with the step-up challenge
(authorization/index.mdx, Runtime Insufficient Scope). The same check a handler can
make itself with ``ctx.require_scopes``, but declared in one place and made before
any handler code runs. Without authentication there are no scopes: a declared name
is refused (fails closed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from ..errors import InsufficientScope

__all__ = ["RequiredScopes"]

# The params field naming the target of each method that has per-name scopes.
_TARGET = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class RequiredScopes:
    """Scopes by tool name (``tools``), prompt name (``prompts``) and resource URI
    (``resources``); names not listed need none beyond the resource's own
    ``required_scopes``."""

    def __init__(
        self,
        *,
        tools: Mapping[str, Iterable[str]] | None = None,
        prompts: Mapping[str, Iterable[str]] | None = None,
        resources: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self._by_method: dict[str, dict[str, frozenset[str]]] = {
            "tools/call": _frozen(tools),
            "prompts/get": _frozen(prompts),
            "resources/read": _frozen(resources),
        }

    def needed(self, method: str, params: Mapping[str, Any]) -> frozenset[str]:
        """The scopes a request of ``method`` with ``params`` needs."""
        field = _TARGET.get(method)
        target = params.get(field) if field is not None else None
        if not isinstance(target, str):
            return frozenset()
        return self._by_method[method].get(target, frozenset())

    async def __call__(self, call: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        needed = self.needed(call.method, call.params)
        if needed:
            granted = getattr(call.principal, "scopes", None)
            if not isinstance(granted, (set, frozenset)) or not needed <= granted:
                raise InsufficientScope(needed)
        return await call_next(call)


def _frozen(table: Mapping[str, Iterable[str]] | None) -> dict[str, frozenset[str]]:
    if table is None:
        return {}
    frozen: dict[str, frozenset[str]] = {}
    for name, scopes in table.items():
        if isinstance(scopes, str):
            raise TypeError(f"the scopes of {name!r} are a list of scope names, e.g. [{scopes!r}]")
        frozen[name] = frozenset(scopes)
    return frozen

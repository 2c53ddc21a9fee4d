"""Composition: ``parent.mount(child, prefix="billing")`` serves a child server's tools,
resources, resource templates and prompts as the parent's own.

Theory of operation. A mount is a live view kept as entries in the parent's registry,
not a relay: for each entry of the child it puts a derived entry (same handler, same
``Signature``, the wire definition renamed) into the parent's dicts, so the parent's one
dispatcher finds and calls the child's handler directly. A call costs what a directly
registered tool costs: no serialization, no second dispatcher, no proxy hop.

- **Names**: tools and prompts become ``<prefix>_<name>``: the separator FastMCP uses
  and the host's ``<server>_<tool>``; ``_`` is in every model provider's tool-name set
  (``^[a-zA-Z0-9_-]{1,64}$``), where the spec's ``.`` is not.
- **URIs**: ``scheme://rest`` becomes ``scheme://<prefix>/rest`` (``scheme:rest``,
  ``scheme:<prefix>/rest``), FastMCP's "path" form; ``unprefix_uri`` reverses it.
  A template must start with a literal scheme for this (``{+base}/x`` cannot be mounted).
- **Live**: the child's registry tells the mount of every change (``Registry.watchers``);
  the mount re-derives that kind and the parent's registry announces it, so
  ``list_changed`` reaches the parent's clients. ``resource_updated`` on the child is
  relayed, prefixed, while the parent runs.
- **Lifespans**: the parent's running holds each child's ``running()`` inside its own
  lifespan, so a child's lifespan starts after the parent's and stops before it.
- **Context**: a mounted handler's ``ctx`` is the parent's request (logs, progress,
  elicitation and sampling reach the parent's caller); ``ctx.server``,
  ``ctx.lifespan_context`` and ``ctx.resource_updated`` are the child's.
- **Conflicts**: an entry of the parent's own, or of an earlier mount, wins; at mount
  time a clash is a ``RegistrationError``, later (the child grew a tool that clashes) a
  warning in the log and the child's entry left out.
- **Not carried**: the child's middleware and config (the parent's apply), completions
  registered on the child after mounting (register them before).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..errors import RegistrationError
from ._bus import Event
from ._context import Context
from ._registry import PromptDef, ResourceDef, TemplateDef, ToolDef, check_tool_name
from ._uri_template import UriTemplate

if TYPE_CHECKING:
    from ._server import Server

__all__ = ["Mount", "prefix_name", "prefix_uri", "unprefix_uri"]

log = logging.getLogger("modelctx.server")

_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(//)?")


def prefix_name(prefix: str | None, name: str) -> str:
    return name if prefix is None else f"{prefix}_{name}"


def prefix_uri(prefix: str | None, uri: str) -> str:
    """``scheme://rest`` as ``scheme://<prefix>/rest``; raises ``RegistrationError`` for a
    URI (or template) that does not start with a literal scheme."""
    if prefix is None:
        return uri
    found = _SCHEME.match(uri)
    if found is None:
        raise RegistrationError(
            f"cannot mount {uri!r} under prefix {prefix!r}: it does not start with a scheme "
            "(scheme://...), where the prefix goes; give it one, or mount without a prefix"
        )
    return f"{uri[: found.end()]}{prefix}/{uri[found.end():]}"


def unprefix_uri(prefix: str | None, uri: str) -> str | None:
    """The child's URI for a prefixed one, or ``None`` if ``uri`` is not under ``prefix``."""
    if prefix is None:
        return uri
    found = _SCHEME.match(uri)
    if found is None or not uri.startswith(f"{prefix}/", found.end()):
        return None
    return uri[: found.end()] + uri[found.end() + len(prefix) + 1 :]


class _MountedContext(Context):
    """The parent's request, seen from a mounted handler: the child is its server."""

    __slots__ = ("_owner",)

    def __init__(self, ctx: Context, owner: Server) -> None:
        super().__init__(ctx._call)
        self._owner = owner

    @property
    def server(self) -> Any:
        return self._owner

    @property
    def lifespan_context(self) -> Any:
        return self._owner.lifespan_context

    def resource_updated(self, uri: str) -> None:
        self._owner.resource_updated(uri)


def _owned_by(fn: Callable[..., Any], is_async: bool, param: str | None, owner: Server) -> Callable[..., Any]:
    """``fn`` receiving a context whose server is ``owner`` (unchanged if it takes none)."""
    if param is None:
        return fn
    if is_async:

        async def run_async(**kwargs: Any) -> Any:
            kwargs[param] = _MountedContext(kwargs[param], owner)
            return await fn(**kwargs)

        return run_async

    def run(**kwargs: Any) -> Any:
        kwargs[param] = _MountedContext(kwargs[param], owner)
        return fn(**kwargs)

    return run


class Mount:
    """One child served by one parent under one prefix (see the module docstring)."""

    def __init__(self, parent: Server, child: Server, prefix: str | None) -> None:
        if prefix is not None and (not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix)):
            raise RegistrationError(
                f"mount prefix {prefix!r} is not valid: 1 to 64 characters of A-Z, a-z, 0-9, "
                "'_', '-' and '.', starting with a letter or digit (or None for no prefix)"
            )
        if child is parent or _reaches(child, parent):
            raise RegistrationError(
                f"cannot mount server {child.name!r} into {parent.name!r}: it already serves "
                f"{parent.name!r}, and a mount cycle would never end"
            )
        self.parent = parent
        self.child = child
        self.prefix = prefix
        self._owned: dict[str, set[str]] = {"tools": set(), "resources": set(), "templates": set(), "prompts": set()}

    def attach(self) -> None:
        """Put the child's entries into the parent and follow the child's changes.
        Raises ``RegistrationError`` naming a clash or a URI that cannot be prefixed (the
        parent is then left as it was)."""
        try:
            for kind in ("tools", "resources", "prompts"):
                self._sync(kind, strict=True)
        except RegistrationError:
            for kind in ("tools", "resources", "prompts"):
                self._drop(kind)
            raise
        self.child.registry.watchers.append(self._on_child_change)

    def _on_child_change(self, kind: str) -> None:
        try:
            self._sync(kind, strict=False)
        except RegistrationError as exc:
            log.warning("mount %r in %r: %s", self.prefix, self.parent.name, exc)

    def _drop(self, kind: str) -> None:
        registry = self.parent.registry
        for name in ("resources", "templates") if kind == "resources" else (kind,):
            items: dict[str, Any] = getattr(registry, name)
            for key in self._owned[name]:
                items.pop(key, None)
            self._owned[name] = set()

    def _sync(self, kind: str, *, strict: bool) -> None:
        """Derive the parent's entries of ``kind`` from the child's again, then announce.
        They keep their place in the parent's order (where the mount first put them)."""
        child = self.child.registry
        if kind == "tools":
            self._replace("tools", [self._tool(t) for t in child.tools.values()], strict)
        elif kind == "prompts":
            self._replace("prompts", [self._prompt(p) for p in child.prompts.values()], strict)
        elif kind == "resources":
            self._replace("resources", [self._resource(r) for r in child.resources.values()], strict)
            self._replace("templates", [self._template(t) for t in child.templates.values()], strict)
        self._adopt_capabilities()
        self.parent.registry.changed(kind)

    def _replace(self, name: str, derived: list[tuple[str, Any]], strict: bool) -> None:
        items: dict[str, Any] = getattr(self.parent.registry, name)
        owned = self._owned[name]
        block: dict[str, Any] = {}
        for key, entry in derived:
            if key in items and key not in owned:
                what = {"tools": "a tool", "prompts": "a prompt"}.get(name, "a resource")
                problem = (
                    f"the parent {self.parent.name!r} already has {what} {key!r}; mount "
                    f"{self.child.name!r} under another prefix, or rename one of them"
                )
                if strict:
                    raise RegistrationError(problem)
                log.warning("mount %r in %r: %s; left out", self.prefix, self.parent.name, problem)
                continue
            block[key] = entry
        accepted = set(block)
        rebuilt: dict[str, Any] = {}
        for key, entry in items.items():
            if key not in owned:
                rebuilt[key] = entry
            elif block:  # the first place this mount held: its entries go there
                rebuilt.update(block)
                block = {}
        rebuilt.update(block)  # a first sync, or one where the mount held nothing yet
        items.clear()
        items.update(rebuilt)
        self._owned[name] = accepted

    def _adopt_capabilities(self) -> None:
        parent, child = self.parent, self.child
        if child._completions:
            parent._completions = True
        if parent._task_store is None and any(t.task != "forbidden" for t in child.registry.tools.values()):
            parent._task_store = parent._default_task_store()

    def _tool(self, tool: ToolDef) -> tuple[str, ToolDef]:
        name = prefix_name(self.prefix, tool.name)
        check_tool_name(name)
        fn = _owned_by(tool.fn, tool.is_async, tool.signature.context_param, self.child)
        return name, dataclasses.replace(tool, name=name, fn=fn, definition={**tool.definition, "name": name})

    def _prompt(self, prompt: PromptDef) -> tuple[str, PromptDef]:
        name = prefix_name(self.prefix, prompt.name)
        fn = _owned_by(prompt.fn, prompt.is_async, prompt.signature.context_param, self.child)
        return name, dataclasses.replace(prompt, name=name, fn=fn, definition={**prompt.definition, "name": name})

    def _resource(self, resource: ResourceDef) -> tuple[str, ResourceDef]:
        uri = prefix_uri(self.prefix, resource.uri)
        fn = _owned_by(resource.fn, resource.is_async, resource.signature.context_param, self.child)
        return uri, dataclasses.replace(resource, uri=uri, fn=fn, definition={**resource.definition, "uri": uri})

    def _template(self, template: TemplateDef) -> tuple[str, TemplateDef]:
        uri = prefix_uri(self.prefix, template.template.template)
        fn = _owned_by(template.fn, template.is_async, template.signature.context_param, self.child)
        return uri, dataclasses.replace(
            template, template=UriTemplate(uri), fn=fn, definition={**template.definition, "uriTemplate": uri}
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Hold the child running (its lifespan) and relay its resource updates."""
        async with self.child.running():
            subscription = self.child.bus.subscribe()
            relay = asyncio.get_running_loop().create_task(
                self._relay_updates(subscription), name=f"updates of mount {self.prefix!r}"
            )
            try:
                yield
            finally:
                relay.cancel()
                subscription.close()

    async def _relay_updates(self, subscription: Any) -> None:
        async for event in subscription:
            if event.kind == "resource" and event.uri is not None:
                self.parent._publish(Event("resource", prefix_uri(self.prefix, event.uri)))


def _reaches(server: Server, target: Server) -> bool:
    """Does ``server`` serve ``target``, through its mounts?"""
    return any(m.child is target or _reaches(m.child, target) for m in server._mounts)

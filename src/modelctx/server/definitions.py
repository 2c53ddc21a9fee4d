"""Registry entries for what another server defined: how a relay serves a remote server's
tools, prompts, resources and resource templates as its own (host/_remote.py mounts one).

Each function takes the definition as the remote listed it (the JSON object of its
``tools/list``, ``prompts/list``, ``resources/list`` or ``resources/templates/list``
entry, listed again by this server as it came) and the coroutine that forwards a
request to the remote, and returns the entry to put in a ``Server``'s registry
(``server.registry.tools[name] = tool_entry(...)``; ``registry.changed(kind)`` announces
it). Arguments are not checked against the definition's schema here: the remote checks
them against its own. Raises ``RegistrationError`` for a name or template this server
cannot serve.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ._context import Context
from ._registry import PromptDef, ResourceDef, TemplateDef, ToolDef
from ._signature import Signature
from ._uri_template import UriTemplate

__all__ = [
    "PromptDef",
    "ResourceDef",
    "TemplateDef",
    "ToolDef",
    "prompt_entry",
    "resource_entry",
    "template_entry",
    "tool_entry",
]


def tool_entry(definition: dict[str, Any], forward: Callable[..., Awaitable[Any]]) -> ToolDef:
    """The tool ``definition["name"]``, served by ``forward(ctx, **arguments)`` (its
    result: what a tool handler returns, a ``ToolResult`` say); listed as ``definition``."""
    tool = ToolDef.build(forward, Context, name=definition["name"], structured_output=False)
    tool.definition = definition
    return tool


def prompt_entry(definition: dict[str, Any], forward: Callable[..., Awaitable[Any]]) -> PromptDef:
    """The prompt ``definition["name"]``, served by ``forward(**arguments)`` (its result:
    ``{"messages": [...]}``)."""
    name = definition["name"]
    return PromptDef(name, forward, Signature(forward, name, Context, "prompt"), definition, True)


def resource_entry(definition: dict[str, Any], read: Callable[[], Awaitable[Any]]) -> ResourceDef:
    """The resource ``definition["uri"]``, read by ``read()`` (its contents, each without
    its ``uri``: the one asked for is added)."""
    uri = definition["uri"]
    signature = Signature(read, uri, Context, "resource")
    return ResourceDef(uri, read, signature, definition, definition.get("mimeType"), True)


def template_entry(definition: dict[str, Any], read: Callable[[str], Awaitable[Any]]) -> TemplateDef:
    """The resource template ``definition["uriTemplate"]``: a URI it matches is read by
    ``read(uri)`` (the template expanded with the URI's variables; contents as for
    ``resource_entry``)."""
    template = UriTemplate(definition["uriTemplate"])

    async def forward(**variables: Any) -> Any:
        return await read(template.expand(variables))

    signature = Signature(forward, template.template, Context, "resource template")
    return TemplateDef(template, forward, signature, definition, definition.get("mimeType"), True)

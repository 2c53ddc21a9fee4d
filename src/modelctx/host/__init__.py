"""The host: many MCP servers joined into one set of tools for a model.

``Host`` (``Host.from_file("mcp.json")``, ``async with``) connects the servers of a
configuration (``HostConfig``, ``ServerSpec``, ``load_config``: the ``mcpServers``
format), names their tools for a model (``namespaced``, ``NameMap``) and keeps each
server running and its lists fresh (``HostServer``).

A person stays in the loop through a ``HostUI`` (``approve``, ``elicit``, ``show``;
``DeclineUI`` when there is no one to ask, ``ScriptedUI`` for tests). Before each call
``Approvals`` applies the configuration's ``ApprovalPolicy`` (allow, ask, deny), asks the
UI (or the ``Asker`` it is handed: a gateway's client) with an ``ApprovalRequest``,
answers a ``Verdict``, and remembers a ``Decision.ALWAYS`` for that asker, pinned to the
tool's definition (``tool_digest``), across runs in an ``ApprovalStore``. The policy also
says which resources and prompts a server offers (``NameFilter`` globs; ``Denied`` for one
it does not). ``AllowAll`` is the hook for a host that wants no approval. ``handlers_for`` answers a server's elicitation,
sampling and roots requests.

``ModelLoop`` runs a ``Conversation`` with a ``Model`` (``AnthropicModel``,
``OpenAIModel``) over the host's tools, yielding ``TextDelta``, ``ToolCallRequested``,
``ToolResultEvent`` and ``Final``; past a ``ToolBudget`` of definitions its ``ToolSearch``
shows the model a search tool in place of every tool. ``Gateway(host)`` serves the joined set again as one
MCP server (``serve_gateway``). The providers and the gateway load on first use: a host
that runs no model imports no model SDK, one that serves nothing no server.
"""

from typing import TYPE_CHECKING, Any

from ._approval import (
    ApprovalConfigError,
    ApprovalPolicy,
    ApprovalRequest,
    Approvals,
    ApprovalStore,
    ApprovalStoreError,
    Asker,
    Decision,
    NameFilter,
    ServerRules,
    Verdict,
    tool_digest,
)
from ._config import HostConfig, HostConfigError, ServerSpec, ToolFilter, load_config
from ._host import AllowAll, ApprovalCheck, Denied, GuardedClient, Host, UnknownName
from ._model import (
    Conversation,
    Final,
    Model,
    ModelError,
    ModelLoop,
    ModelSetupError,
    TextDelta,
    ToolCallRequested,
    ToolResultEvent,
    ToolSet,
)
from ._names import NAME_PATTERN, NameMap, namespaced
from ._server import HostServer, RestartPolicy, ServerUnavailable
from ._tool_search import ToolBudget, ToolSearch
from ._ui import DeclineUI, HostUI, SampleCallback, ScriptedUI, ScriptExhausted, handlers_for

if TYPE_CHECKING:
    from ._anthropic import AnthropicModel
    from ._gateway import Gateway, GatewayUI, serve_gateway
    from ._openai import OpenAIModel
    from ._remote import RemoteServer

# Name -> the module that defines it, imported on first use.
_LAZY = {
    "Gateway": "_gateway",
    "GatewayUI": "_gateway",
    "serve_gateway": "_gateway",
    "AnthropicModel": "_anthropic",
    "OpenAIModel": "_openai",
    "RemoteServer": "_remote",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'modelctx.host' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{module}", __name__), name)


__all__ = [
    "NAME_PATTERN",
    "AllowAll",
    "AnthropicModel",
    "ApprovalCheck",
    "ApprovalConfigError",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalStore",
    "ApprovalStoreError",
    "Approvals",
    "Asker",
    "Conversation",
    "DeclineUI",
    "Decision",
    "Denied",
    "Final",
    "Gateway",
    "GatewayUI",
    "GuardedClient",
    "Host",
    "HostConfig",
    "HostConfigError",
    "HostServer",
    "HostUI",
    "Model",
    "ModelError",
    "ModelLoop",
    "ModelSetupError",
    "NameFilter",
    "NameMap",
    "OpenAIModel",
    "RemoteServer",
    "RestartPolicy",
    "SampleCallback",
    "ScriptExhausted",
    "ScriptedUI",
    "ServerRules",
    "ServerSpec",
    "ServerUnavailable",
    "TextDelta",
    "ToolBudget",
    "ToolCallRequested",
    "ToolFilter",
    "ToolResultEvent",
    "ToolSearch",
    "ToolSet",
    "UnknownName",
    "Verdict",
    "handlers_for",
    "load_config",
    "namespaced",
    "serve_gateway",
    "tool_digest",
]

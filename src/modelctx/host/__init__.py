"""The host: many MCP servers joined into one set of tools for a model.

``Host`` (``Host.from_file("mcp.json")``, ``async with``) connects the servers of a
configuration (``HostConfig``, ``ServerSpec``, ``load_config``: the ``mcpServers``
format), names their tools for a model (``namespaced``, ``NameMap``) and keeps each
server running and its lists fresh (``HostServer``).

A person stays in the loop through a ``HostUI`` (``approve``, ``elicit``, ``show``;
``DeclineUI`` when there is no one to ask, ``ScriptedUI`` for tests). Before each call
``Approvals`` applies the configuration's ``ApprovalPolicy`` (allow, ask, deny), asks the
UI with an ``ApprovalRequest`` and remembers a ``Decision.ALWAYS`` pinned to the tool's
definition (``tool_digest``), across runs in an ``ApprovalStore``. ``AllowAll`` is the
hook for a host that wants no approval. ``handlers_for`` answers a server's elicitation,
sampling and roots requests.
"""

from ._approval import (
    ApprovalConfigError,
    ApprovalPolicy,
    ApprovalRequest,
    Approvals,
    ApprovalStore,
    ApprovalStoreError,
    Decision,
    ServerRules,
    tool_digest,
)
from ._config import HostConfig, HostConfigError, ServerSpec, ToolFilter, load_config
from ._host import AllowAll, ApprovalCheck, Host, UnknownName
from ._names import NAME_PATTERN, NameMap, namespaced
from ._server import HostServer, RestartPolicy, ServerUnavailable
from ._ui import DeclineUI, HostUI, SampleCallback, ScriptedUI, ScriptExhausted, handlers_for

__all__ = [
    "NAME_PATTERN",
    "AllowAll",
    "ApprovalCheck",
    "ApprovalConfigError",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalStore",
    "ApprovalStoreError",
    "Approvals",
    "DeclineUI",
    "Decision",
    "Host",
    "HostConfig",
    "HostConfigError",
    "HostServer",
    "HostUI",
    "NameMap",
    "RestartPolicy",
    "SampleCallback",
    "ScriptExhausted",
    "ScriptedUI",
    "ServerRules",
    "ServerSpec",
    "ServerUnavailable",
    "ToolFilter",
    "UnknownName",
    "handlers_for",
    "load_config",
    "namespaced",
    "tool_digest",
]

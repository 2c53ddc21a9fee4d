"""The host's configuration: the ``mcpServers`` JSON format people already use.

::

    {
      "roots": ["~/projects/site"],
      "approvalStore": "~/.config/modelctx/approvals.json",
      "mcpServers": {
        "weather": {"command": "python", "args": ["weather.py"], "env": {"KEY": "${WEATHER_KEY}"}},
        "docs": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"},
                 "approval": "ask", "tools": {"allow": ["search_*"], "deny": ["*_delete"]},
                 "timeout": 20}
      }
    }

``approvalStore`` (optional): a JSON file that keeps the person's "always allow" answers
across runs (see ``ApprovalStore``); without it they last for the host's life.
``toolSearch`` (optional): past how many tools (``maxTools``, 40) or bytes of their JSON
(``maxBytes``, 32768) the model gets a search tool instead, and which tools it always sees
(``pinned``: globs over the namespaced names); ``false``: never (see ``ToolBudget``).

A server entry is stdio (``command``, optional ``args``/``env``/``cwd``) or HTTP
(``url``, optional ``headers``); ``type`` may say which ("stdio", "http",
"streamable-http", or "sse"). An HTTP ``url`` may be a Streamable HTTP endpoint
(``.../mcp``) or the stream of a server that offers only the HTTP+SSE transport of
2024-11-05 (``.../sse``): the host finds out which; ``transport`` ("sse", or
"streamable-http" / "http") says so and skips the question (``"type": "sse"`` is the
same as ``"transport": "sse"``). Per server: ``approval`` ("allow" | "ask" | "deny", or an object
``{"default": ..., "readOnly": ..., "tools": {"<glob>": ...}}``, see ``ServerRules``;
checked when the configuration is read; unset: ask), ``trusted`` (true: the server's tool
annotations are believed, so its ``readOnlyHint`` tools get the ``readOnly`` level,
"allow" by default; otherwise they are asked about like any other tool, the spec's
"untrusted unless from a trusted server"), ``alwaysScope`` ("client", the default: an
"always allow" holds only for the client that gave it, a gateway client's principal when
it authenticated, else its handshake session or connection, and the terminal chat's one
person; "shared": one "always" for every client, kept in ``approvalStore``), ``tools``
(``allow``/``deny`` lists of shell-style globs over the server's own tool names; deny
wins), ``resources`` and ``prompts`` (the same ``allow``/``deny`` globs, over resource
URIs and URI templates, and over prompt names: what they exclude is left out of the lists
and refused when read or got; a server whose approval is "deny" offers none of its
resources and prompts; "ask" asks nothing for them: reading changes nothing, so what must
not be read is denied by a glob), ``timeout`` (seconds to connect, default 30),
``roots`` (folders offered to this server instead of the top-level ``roots``),
``disabled`` (true: skip it).

An HTTP server protected with OAuth takes ``auth``: ``{"type": "oauth"}`` signs the
person in through the browser (authorization code with PKCE; optional ``scopes`` to ask
for when the server names none, ``clientId`` and ``clientSecret`` of a client registered
beforehand, ``clientMetadataUrl`` (a Client ID Metadata Document), ``clientName``,
``redirectPort``, the loopback port the browser comes back to, default 18418), or
``{"type": "client_credentials", "clientId": ..., "clientSecret": "${VAR}"}`` (or
``"privateKeyFile"`` with ``"signingAlgorithm"``) for a service acting as itself.
Tokens are kept in ``tokenStore`` (top level; default ``~/.config/modelctx/tokens.json``,
written 0600), so the person stays signed in across runs.

``${NAME}`` in ``env``, ``headers`` and the ``auth`` values is replaced by the environment variable
``NAME`` of the host process (``$$`` is a literal ``$``); a variable that is not set is an
error naming the server, the key and the variable, so a secret is never sent empty.

Every mistake is a ``HostConfigError`` naming the server and the key.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import LocalError
from ._approval import ALWAYS_SCOPES, AlwaysScope, ApprovalConfigError, NameFilter, ServerRules
from ._tool_search import ToolBudget

__all__ = ["AuthSpec", "HostConfig", "HostConfigError", "ServerSpec", "ToolFilter", "load_config"]

DEFAULT_TIMEOUT = 30.0
DEFAULT_TOKEN_STORE = "~/.config/modelctx/tokens.json"
#: Seconds a person has to sign in in the browser, on top of a server's ``timeout``.
AUTHORIZATION_WAIT = 300.0

_SERVER_KEYS = frozenset(
    {"type", "command", "args", "env", "cwd", "url", "headers", "approval", "tools", "timeout", "roots",
     "disabled", "description", "auth", "trusted", "alwaysScope", "resources", "prompts", "transport"}
)
_TOP_KEYS = frozenset({"mcpServers", "roots", "approvalStore", "tokenStore", "toolSearch", "$schema"})
_AUTH_KEYS = {
    "oauth": frozenset({"type", "scopes", "clientId", "clientSecret", "clientMetadataUrl", "clientName", "redirectPort"}),
    "client_credentials": frozenset(
        {"type", "scopes", "clientId", "clientSecret", "privateKeyFile", "signingAlgorithm"}
    ),
}
_TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http", "sse": "http"}
#: An HTTP server's transport, as ``HttpClientTransport`` names it ("auto": find out).
Transport = Literal["auto", "streamable", "sse"]
_TRANSPORTS: dict[str, Transport] = {"auto": "auto", "sse": "sse", "streamable-http": "streamable", "http": "streamable"}
_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class HostConfigError(LocalError, ValueError):
    """The host's configuration cannot be used as written; the message names the server
    and the key, and says what is expected."""


#: Which of a server's tools the host offers: ``allow`` globs (empty: every tool), then
#: ``deny`` globs (a match hides the tool, whatever ``allow`` says). The same filter
#: covers resource URIs and prompt names (``NameFilter``).
ToolFilter = NameFilter


@dataclass(frozen=True)
class AuthSpec:
    """How the host authorizes with an HTTP server (its ``"auth"`` block).

    ``kind`` "oauth" (a person signs in in the browser) or "client_credentials" (the
    host as a service); ``scopes`` asked for when the server names none; ``client_id``
    and ``client_secret`` of a pre-registered client; ``client_metadata_url`` (oauth:
    a Client ID Metadata Document URL); ``client_name``; ``redirect_port`` (oauth: the
    loopback port of the redirect URI); ``private_key_file`` and ``signing_algorithm``
    (client_credentials with ``private_key_jwt``)."""

    kind: str
    scopes: tuple[str, ...] = ()
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_metadata_url: str | None = None
    client_name: str = "modelctx"
    redirect_port: int = 18418
    private_key_file: str | None = None
    signing_algorithm: str = "ES256"

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.redirect_port}/callback"


@dataclass(frozen=True)
class ServerSpec:
    """One configured server. Exactly one of ``command`` (stdio) and ``url`` (HTTP) is set."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    approval: str | Mapping[str, Any] | None = None
    tools: ToolFilter = ToolFilter()
    timeout: float = DEFAULT_TIMEOUT
    roots: tuple[str, ...] | None = None
    auth: AuthSpec | None = None
    #: Its tool annotations are believed (``readOnlyHint`` tools get the ``readOnly`` level).
    trusted: bool = False
    #: "client": an "always" holds for the client that gave it; "shared": for every one.
    always_scope: AlwaysScope = "client"
    resources: NameFilter = NameFilter()
    prompts: NameFilter = NameFilter()
    #: An HTTP server's transport: "auto" (find out), "streamable" or "sse" (2024-11-05).
    transport: Transport = "auto"

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise HostConfigError(
                f"server {self.name!r}: give either 'command' (a stdio server) or 'url' (an HTTP server)"
            )
        if self.transport not in ("auto", "streamable", "sse"):
            raise HostConfigError(
                f"server {self.name!r}: transport must be 'auto', 'streamable' or 'sse', not {self.transport!r}"
            )
        if self.command is not None and self.transport != "auto":
            raise HostConfigError(f"server {self.name!r}: transport {self.transport!r} is for an HTTP server ('url')")
        # A setting the approval policy cannot use fails here, with the server named, not
        # at the first call of one of its tools.
        try:
            ServerRules.parse(self.approval, server=self.name, always_scope=self.always_scope)
        except ApprovalConfigError as exc:
            raise HostConfigError(str(exc)) from None

    @property
    def connect_timeout(self) -> float:
        """Seconds to connect: ``timeout``, plus the time to sign in when that may be asked."""
        signs_in = self.auth is not None and self.auth.kind == "oauth"
        return self.timeout + (AUTHORIZATION_WAIT if signs_in else 0.0)

    @property
    def kind(self) -> str:
        """"stdio" or "http"."""
        return "stdio" if self.command is not None else "http"

    @property
    def identity(self) -> str:
        """What the server is, for people and for remembered approvals: its command line or URL."""
        if self.url is not None:
            return self.url
        import shlex

        return shlex.join([str(self.command), *self.args])


@dataclass(frozen=True)
class HostConfig:
    """Every configured server by name, the folders offered to them as roots, the
    file that keeps "always allow" answers (``None``: they last for the host's life), and
    the file that keeps OAuth tokens (``token_store``; ``None``: the default path)."""

    servers: Mapping[str, ServerSpec] = field(default_factory=dict)
    roots: tuple[str, ...] = ()
    approval_store: str | None = None
    token_store: str | None = None
    #: When the model is shown a search tool instead of every tool (``"toolSearch"``, see ``ToolBudget``).
    tool_search: ToolBudget = field(default_factory=ToolBudget)

    @classmethod
    def from_dict(cls, data: object, *, environ: Mapping[str, str] | None = None) -> HostConfig:
        """A configuration from its JSON object; raises ``HostConfigError``."""
        env = os.environ if environ is None else environ
        if not isinstance(data, dict):
            raise HostConfigError(f"the configuration must be a JSON object, not {type(data).__name__}")
        unknown = sorted(set(data) - _TOP_KEYS)
        if unknown:
            raise HostConfigError(
                f"unknown top-level key {unknown[0]!r}; the keys are 'mcpServers', 'roots', 'approvalStore', "
                "'tokenStore' and 'toolSearch'"
            )
        servers = data.get("mcpServers", {})
        if not isinstance(servers, dict):
            raise HostConfigError("'mcpServers' must be an object: server name to its settings")
        specs: dict[str, ServerSpec] = {}
        for name, entry in servers.items():
            spec = _server_spec(name, entry, env)
            if spec is not None:
                specs[name] = spec
        store = data.get("approvalStore")
        if store is not None and (not isinstance(store, str) or not store):
            raise HostConfigError(f"'approvalStore' must be the path of a JSON file, not {store!r}")
        tokens = data.get("tokenStore")
        if tokens is not None and (not isinstance(tokens, str) or not tokens):
            raise HostConfigError(f"'tokenStore' must be the path of a JSON file, not {tokens!r}")
        try:
            budget = ToolBudget.from_config(data.get("toolSearch"))
        except ValueError as exc:
            raise HostConfigError(str(exc)) from None
        return cls(
            specs,
            _paths("'roots'", data.get("roots", [])),
            os.path.expanduser(store) if store else None,
            os.path.expanduser(tokens) if tokens else None,
            budget,
        )


def load_config(path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None) -> HostConfig:
    """Read a configuration file; raises ``HostConfigError`` naming the file and the problem."""
    where = os.fspath(path)
    try:
        text = Path(where).read_text("utf-8")
    except OSError as exc:
        raise HostConfigError(f"cannot read the configuration {where}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HostConfigError(f"{where} is not valid JSON: {exc}") from None
    except RecursionError:
        raise HostConfigError(f"{where} is nested too deeply to be a configuration") from None
    try:
        return HostConfig.from_dict(data, environ=environ)
    except HostConfigError as exc:
        raise HostConfigError(f"{where}: {exc}") from None


def _server_spec(name: object, entry: object, env: Mapping[str, str]) -> ServerSpec | None:
    if not isinstance(name, str) or not name:
        raise HostConfigError(f"a server name must be a non-empty string, not {name!r}")
    where = f"server {name!r}"
    if not isinstance(entry, dict):
        raise HostConfigError(f"{where}: its settings must be an object, not {type(entry).__name__}")
    unknown = sorted(set(entry) - _SERVER_KEYS)
    if unknown:
        raise HostConfigError(
            f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(sorted(_SERVER_KEYS))}"
        )
    if entry.get("disabled") is True:
        return None
    kind = _kind(where, entry)
    common: dict[str, Any] = {
        "approval": entry.get("approval"),  # ServerSpec checks it
        "tools": _tool_filter(where, entry.get("tools")),
        "resources": _tool_filter(where, entry.get("resources"), "resources"),
        "prompts": _tool_filter(where, entry.get("prompts"), "prompts"),
        "trusted": _flag(where, "trusted", entry.get("trusted", False)),
        "always_scope": _always_scope(where, entry.get("alwaysScope", "client")),
        "timeout": _timeout(where, entry.get("timeout", DEFAULT_TIMEOUT)),
        "roots": _paths(f"{where}: 'roots'", entry["roots"]) if "roots" in entry else None,
    }
    if kind == "stdio":
        return ServerSpec(
            name,
            command=_string(where, "command", entry.get("command")),
            args=tuple(_strings(where, "args", entry.get("args", []))),
            env=_expanded(where, "env", entry.get("env", {}), env),
            cwd=_string(where, "cwd", entry["cwd"]) if "cwd" in entry else None,
            **common,
        )
    headers = _expanded(where, "headers", entry.get("headers", {}), env)
    auth = _auth_spec(where, entry["auth"], env) if "auth" in entry else None
    if auth is not None and any(key.lower() == "authorization" for key in headers):
        raise HostConfigError(
            f"{where}: 'auth' obtains the Authorization header itself; remove 'headers.Authorization' "
            "(or 'auth', to send a fixed token)"
        )
    transport = _transport(where, entry)
    return ServerSpec(name, url=_url(where, entry.get("url")), headers=headers, auth=auth, transport=transport, **common)


def _transport(where: str, entry: dict[str, Any]) -> Transport:
    """An HTTP entry's transport: its ``transport`` key, or "sse" for ``"type": "sse"``."""
    declared = entry.get("transport", "auto")
    if not isinstance(declared, str) or declared not in _TRANSPORTS:
        raise HostConfigError(
            f"{where}: 'transport' must be 'sse' (the older HTTP+SSE transport, a url such as "
            f"http://127.0.0.1:8000/sse), 'streamable-http' or 'http' (Streamable HTTP), or 'auto' "
            f"(find out, the default), not {declared!r}"
        )
    transport = _TRANSPORTS[declared]
    if entry.get("type") == "sse":
        if transport == "streamable":
            raise HostConfigError(
                f"{where}: 'type' is 'sse' but 'transport' is {declared!r}; keep the one that is true of the server"
            )
        transport = "sse"
    return transport


def _auth_spec(where: str, value: object, env: Mapping[str, str]) -> AuthSpec:
    kinds = " or ".join(repr(k) for k in _AUTH_KEYS)
    if not isinstance(value, dict):
        raise HostConfigError(f"{where}: 'auth' must be an object such as {{\"type\": \"oauth\"}}, not {value!r}")
    kind = value.get("type")
    if kind not in _AUTH_KEYS:
        raise HostConfigError(f"{where}: 'auth.type' must be {kinds}, not {kind!r}")
    unknown = sorted(set(value) - _AUTH_KEYS[kind])
    if unknown:
        raise HostConfigError(
            f"{where}: unknown key 'auth.{unknown[0]}' for {kind!r}; the keys are {', '.join(sorted(_AUTH_KEYS[kind]))}"
        )
    texts = {k: v for k, v in value.items() if k not in ("type", "scopes", "redirectPort")}
    if not all(isinstance(v, str) and v for v in texts.values()):
        bad = next(k for k, v in texts.items() if not (isinstance(v, str) and v))
        raise HostConfigError(f"{where}: 'auth.{bad}' must be a non-empty string, not {texts[bad]!r}")
    strings = _expanded(where, "auth", texts, env)
    scopes = tuple(_strings(where, "auth.scopes", value.get("scopes", [])))
    if any(not scope or " " in scope for scope in scopes):
        raise HostConfigError(f"{where}: 'auth.scopes' must be scope names without spaces, not {list(scopes)!r}")
    port = value.get("redirectPort", 18418)
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise HostConfigError(f"{where}: 'auth.redirectPort' must be a port number (1-65535), not {port!r}")
    spec = AuthSpec(
        kind,
        scopes=scopes,
        client_id=strings.get("clientId"),
        client_secret=strings.get("clientSecret"),
        client_metadata_url=strings.get("clientMetadataUrl"),
        client_name=strings.get("clientName", "modelctx"),
        redirect_port=port,
        private_key_file=os.path.expanduser(strings["privateKeyFile"]) if "privateKeyFile" in strings else None,
        signing_algorithm=strings.get("signingAlgorithm", "ES256"),
    )
    _check_auth(where, spec)
    return spec


def _check_auth(where: str, spec: AuthSpec) -> None:
    if spec.client_secret is not None and spec.client_id is None:
        raise HostConfigError(f"{where}: 'auth.clientSecret' needs the 'auth.clientId' it belongs to")
    if spec.client_metadata_url is not None and not spec.client_metadata_url.startswith("https://"):
        raise HostConfigError(
            f"{where}: 'auth.clientMetadataUrl' must be an https:// URL (it is the client id), "
            f"not {spec.client_metadata_url!r}"
        )
    if spec.kind == "client_credentials":
        if spec.client_id is None:
            raise HostConfigError(f"{where}: client_credentials needs 'auth.clientId'")
        if (spec.client_secret is None) == (spec.private_key_file is None):
            raise HostConfigError(
                f"{where}: client_credentials needs 'auth.clientSecret' (e.g. \"${{NOTES_SECRET}}\") "
                "or 'auth.privateKeyFile', one of them"
            )


def _kind(where: str, entry: dict[str, Any]) -> str:
    declared = entry.get("type")
    if declared is not None and declared not in _TYPES:
        raise HostConfigError(f"{where}: 'type' must be one of {', '.join(map(repr, _TYPES))}, not {declared!r}")
    if "command" in entry and "url" in entry:
        raise HostConfigError(f"{where}: give either 'command' (stdio) or 'url' (HTTP), not both")
    kind = _TYPES.get(declared) if isinstance(declared, str) else None
    kind = kind or ("http" if "url" in entry else "stdio" if "command" in entry else None)
    if kind is None:
        raise HostConfigError(
            f"{where}: needs 'command' (a program to run on stdio, with optional 'args') or "
            "'url' (an HTTP endpoint such as http://127.0.0.1:8000/mcp)"
        )
    if kind == "stdio" and "command" not in entry:
        raise HostConfigError(f"{where}: a stdio server needs 'command' (the program to run)")
    if kind == "http" and "url" not in entry:
        raise HostConfigError(f"{where}: an HTTP server needs 'url' (e.g. http://127.0.0.1:8000/mcp)")
    stray = [key for key in (("args", "env", "cwd") if kind == "http" else ("headers", "auth", "transport")) if key in entry]
    if stray:
        raise HostConfigError(f"{where}: {stray[0]!r} does not apply to a {kind} server")
    return kind


def _string(where: str, key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise HostConfigError(f"{where}: {key!r} must be a non-empty string, not {value!r}")
    return value


def _strings(where: str, key: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise HostConfigError(f"{where}: {key!r} must be a list of strings, not {value!r}")
    return list(value)


def _url(where: str, value: object) -> str:
    url = _string(where, "url", value)
    if not url.startswith(("http://", "https://")):
        raise HostConfigError(f"{where}: 'url' must start with http:// or https://, not {url!r}")
    return url


def _expanded(where: str, key: str, value: object, env: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise HostConfigError(f"{where}: {key!r} must be an object of strings, not {value!r}")

    def expand(item: str, text: str) -> str:
        def one(match: re.Match[str]) -> str:
            variable = match.group(1)
            if variable is None:
                return "$"
            if variable not in env:
                raise HostConfigError(
                    f"{where}: {key}.{item} uses ${{{variable}}}, which is not set in the environment"
                )
            return env[variable]

        return _VARIABLE.sub(one, text)

    return {item: expand(item, text) for item, text in value.items()}


def _tool_filter(where: str, value: object, key: str = "tools") -> NameFilter:
    if value is None:
        return NameFilter()
    if not isinstance(value, dict):
        raise HostConfigError(f"{where}: {key!r} must be an object with 'allow' and/or 'deny' globs")
    unknown = sorted(set(value) - {"allow", "deny"})
    if unknown:
        raise HostConfigError(f"{where}: unknown key '{key}.{unknown[0]}'; the keys are 'allow' and 'deny'")
    return NameFilter(
        tuple(_strings(where, f"{key}.allow", value.get("allow", []))),
        tuple(_strings(where, f"{key}.deny", value.get("deny", []))),
    )


def _flag(where: str, key: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise HostConfigError(f"{where}: {key!r} must be true or false, not {value!r}")
    return value


def _always_scope(where: str, value: object) -> AlwaysScope:
    if value not in ALWAYS_SCOPES:
        raise HostConfigError(
            f"{where}: 'alwaysScope' must be 'client' (an \"always\" holds for the client that gave it) "
            f"or 'shared' (for every client), not {value!r}"
        )
    scope: AlwaysScope = value
    return scope


def _timeout(where: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise HostConfigError(f"{where}: 'timeout' must be a positive number of seconds, not {value!r}")
    return float(value)


def _paths(where: str, value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise HostConfigError(f"{where} must be a list of folder paths, not {value!r}")
    return tuple(os.path.expanduser(item) for item in value)

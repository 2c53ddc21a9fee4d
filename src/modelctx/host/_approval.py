"""Human in the loop: which tool calls run, which are asked about, which never happen.

::

    approvals = Approvals(ApprovalPolicy.from_config(config), ui, store="~/.config/modelctx/approvals.json")
    host = Host(config, approvals=approvals, ui=ui)
    # the same, as the host builds it by default:
    host = Host(config, ui=ui, approval_store="~/.config/modelctx/approvals.json")

Theory of operation. Before each tool call the host asks ``Approvals.check(server, tool,
arguments, asker=...)``, which returns a ``Verdict`` (allowed or not, why, and the scope an
"always" answer was remembered under). The ``ApprovalPolicy`` gives the tool a level from
the configuration:

- ``deny``: the call never reaches the server (and ``hidden`` tells the host to leave the
  tool out of what a model sees);
- ``allow``: the call goes on without asking;
- ``ask``: the ``HostUI`` is shown an ``ApprovalRequest`` (the server, its identity, the
  tool, its annotations, the full arguments, and why it asks) and answers with a
  ``Decision``: ``ALLOW_ONCE``, ``ALWAYS`` or ``DENY``.

Who is asked is handed in: an ``Asker`` (``approve(request)`` and its ``scope``), by
default the host's ``HostUI`` (one person: scope ``""``). ``ALWAYS`` is remembered for
that scope only, so a gateway's clients (each its own scope: its principal, handshake
session or connection) never approve calls for one another; a server configured with
``"alwaysScope": "shared"`` keeps one "always" for every asker, and the store across
runs holds only those of the shared scope.

``ALWAYS`` is remembered bound to the server's identity (its command line or URL, so a
different program under the same name is asked about afresh), the tool's name, and the
tool's definition digest (``tool_digest``). This is *pinning*: when a server later
changes the definition of a tool the person approved (``list_changed`` is the usual
vector: a harmless description swapped for one that instructs the model), the digest no
longer matches and the person is asked again, told which fields changed.

Annotations are the server's claims: a client MUST treat them as untrusted unless the
server is trusted (server/tools.mdx, "Tool Annotations"). So ``readOnlyHint: true`` gives
a tool the server's ``readOnly`` level only on a server configured ``"trusted": true``;
elsewhere the hint can only make a tool stricter (a ``readOnly`` level stricter than the
default), never looser. Tools allowed because of the hint are pinned for the run: a
changed definition behind it is asked about too. Tools
the configuration allows outright are not pinned: the person trusted the server as a
whole.

``ApprovalStore`` keeps ``ALWAYS`` decisions in a JSON file across runs, written
atomically with mode 0600; a file that is corrupt, or that others may write (they could
plant approvals), is reported through ``HostUI.show`` and ignored.

Resources and prompts. ``ApprovalPolicy.permits(server, kind, name)`` says whether a
server's resource (by URI; templates by their URI template) or prompt (by its own name)
is offered at all: not when the server's default level is ``deny``, nor when the server's
``"resources"``/``"prompts"`` globs exclude it. There is no question for them: reading a
resource or getting a prompt sends nothing to a tool and changes nothing, so "ask" means
allowed, and what must not be read is denied by a glob (or the whole server).
"""

from __future__ import annotations

import asyncio
import enum
import fnmatch
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

from ..errors import LocalError

if TYPE_CHECKING:
    from ..protocol.types.v2026_07_28 import Tool, ToolAnnotations
    from ._ui import HostUI

__all__ = [
    "ALWAYS_SCOPES",
    "ApprovalConfigError",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalStore",
    "ApprovalStoreError",
    "Approvals",
    "Asker",
    "Decision",
    "Level",
    "NameFilter",
    "ServerRules",
    "Verdict",
    "server_identity",
    "tool_digest",
]

log = logging.getLogger("modelctx.host")

Level = Literal["allow", "ask", "deny"]
LEVELS: tuple[Level, ...] = ("allow", "ask", "deny")
_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}
AlwaysScope = Literal["client", "shared"]
ALWAYS_SCOPES: tuple[AlwaysScope, ...] = ("client", "shared")
#: The scope of the host's own person (a terminal chat, a host with one ``HostUI``).
HOST_SCOPE = ""
#: The fields a definition digest covers, by their wire names.
PINNED_FIELDS = ("name", "description", "inputSchema", "outputSchema")
STORE_VERSION = 1
_DIGEST_CACHE_SIZE = 4096
#: "Always" answers kept for single askers (gateway clients) at once; the oldest go first.
MAX_SCOPED = 10_000


class ApprovalConfigError(LocalError, ValueError):
    """An ``approval`` setting cannot be used as written; the message names the server
    and the key, and says what is expected."""


class ApprovalStoreError(LocalError):
    """The approvals file cannot be used; its approvals are ignored (the message says
    why and what to do). ``corrupt``: the file is there but is not a store."""

    def __init__(self, message: str, *, corrupt: bool = False) -> None:
        super().__init__(message)
        self.corrupt = corrupt


class Decision(enum.Enum):
    """What the person answered to an ``ApprovalRequest``."""

    ALLOW_ONCE = "allow_once"
    ALWAYS = "always"
    DENY = "deny"


@dataclass(frozen=True)
class ApprovalRequest:
    """One question to the person: may this call run?

    ``server``: the configured name; ``identity``: what the server is (its command line
    or URL); ``tool``: the server's own definition (original name); ``annotations``: its
    hints (untrusted: the server's word); ``arguments``: exactly what would be sent.
    ``why`` is "new" (no remembered approval) or "definition changed" (an approved
    definition changed since); then ``changed`` names the fields ("description",
    "inputSchema", ...) and ``previous`` holds the approved definition when this run
    saw it (a store across runs keeps digests only).
    """

    server: str
    identity: str
    tool: Tool
    arguments: dict[str, Any]
    why: Literal["new", "definition changed"] = "new"
    changed: tuple[str, ...] = ()
    previous: Tool | None = None

    @property
    def annotations(self) -> ToolAnnotations | None:
        annotations = self.tool.annotations
        return None if annotations is msgspec.UNSET else annotations

    def describe(self) -> str:
        """The request in a few lines of plain text, for a log or a terminal."""
        lines = [f"{self.server} ({self.identity}) wants to run {self.tool.name!r}"]
        if self.why == "definition changed":
            lines.append(f"its definition changed since it was approved: {', '.join(self.changed)}")
        description = self.tool.description
        if isinstance(description, str):
            lines.append(f"description: {description}")
        if self.annotations is not None:
            lines.append(f"annotations: {json.dumps(msgspec.to_builtins(self.annotations), sort_keys=True)}")
        lines.append(f"arguments: {json.dumps(self.arguments, sort_keys=True, default=str)}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What ``Approvals.check`` decided about one call.

    ``allowed``: the call may go on (a ``Verdict`` is truthy exactly then, so ``if await
    approvals.check(...)`` reads as before); ``reason``: why, in words for the caller
    ("the configuration denies it", "the person denied it", ...); ``decision``: the
    answer when someone was asked, else None; ``scope``: the scope an ``ALWAYS`` answer
    was remembered under, or that remembered it earlier (``""``: the host's person or
    every asker; None: nothing remembered)."""

    allowed: bool
    reason: str
    decision: Decision | None = None
    scope: str | None = None

    def __bool__(self) -> bool:
        return self.allowed


# The verdicts most calls get, made once (a frozen dataclass costs about a microsecond to build).
_ALWAYS = "it was allowed always"
_DENIED_BY_CONFIG = Verdict(False, "the configuration denies it")
_ALLOWED_BY_CONFIG = Verdict(True, "the configuration allows it")
_READ_ONLY = Verdict(True, "a trusted server says it is read-only")
_ALWAYS_SHARED = Verdict(True, _ALWAYS, scope="")


class Asker(Protocol):
    """Who answers an approval question: ``approve`` (as ``HostUI.approve``), and the
    ``scope`` its ``ALWAYS`` answers hold for (``""``: the host's one person; a gateway
    client's principal, session or connection; None: no stable identity, so an
    ``ALWAYS`` is taken as allow once). ``approve`` may answer a refusing ``Verdict``
    instead of ``Decision.DENY`` to say why, when it was not the person's own answer
    (the client cannot be asked, ...)."""

    @property
    def scope(self) -> str | None: ...

    async def approve(self, request: ApprovalRequest) -> Decision | Verdict: ...


class _HostAsker:
    """The host's ``HostUI`` as an ``Asker``: one person, one scope."""

    __slots__ = ("ui",)
    scope = HOST_SCOPE

    def __init__(self, ui: HostUI) -> None:
        self.ui = ui

    async def approve(self, request: ApprovalRequest) -> Decision:
        return await self.ui.approve(request)


# -- who a server is -----------------------------------------------------------------------------
class _SpecLike(Protocol):
    @property
    def identity(self) -> str: ...

    @property
    def approval(self) -> str | Mapping[str, Any] | None: ...


class ServerLike(Protocol):
    """What approval reads of a host's server (``HostServer``): its configured name and
    its spec (``None`` for a client the host adopted rather than started)."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> _SpecLike | None: ...


def server_identity(server: ServerLike) -> str | None:
    """The server's identity (its command line or URL), or None when the host did not
    start it and cannot tell (approvals are then remembered for this run only)."""
    return server.spec.identity if server.spec is not None else None


# -- the digest ------------------------------------------------------------------------------------
def _pinned_values(tool: Tool) -> dict[str, Any]:
    wire = msgspec.to_builtins(tool)
    return {key: wire.get(key) for key in PINNED_FIELDS}


def _canonical(value: Any) -> bytes:
    # Sorted keys, no spaces, UTF-8 as is: the same definition gives the same bytes
    # whatever order the server wrote its schema's keys in.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def tool_digest(tool: Tool) -> str:
    """SHA-256 (hex) of the canonical JSON of the tool's name, description, inputSchema
    and outputSchema (an absent field is ``null``).

    Annotations are left out on purpose. They are hints the spec tells clients to
    treat as untrusted (server/tools.mdx), shown to the person but not what the model
    is told nor what the tool is asked to do; a retitled tool would otherwise be asked
    about again for nothing. Their one effect on approval, ``readOnlyHint``, is read
    by the policy at every call, never remembered.
    """
    return hashlib.sha256(_canonical(_pinned_values(tool))).hexdigest()


def _field_digests(tool: Tool) -> dict[str, str]:
    return {key: hashlib.sha256(_canonical(value)).hexdigest() for key, value in _pinned_values(tool).items()}


@dataclass(frozen=True)
class _Pin:
    """An approved definition: its digest, a digest per field (to say what changed),
    and the definition itself when this run saw it."""

    digest: str
    fields: Mapping[str, str]
    tool: Tool | None = None

    @classmethod
    def of(cls, tool: Tool) -> _Pin:
        return cls(tool_digest(tool), _field_digests(tool), tool)

    def changed(self, tool: Tool) -> tuple[str, ...]:
        now = _field_digests(tool)
        return tuple(key for key in PINNED_FIELDS if self.fields.get(key) != now[key]) or PINNED_FIELDS


# -- the policy ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NameFilter:
    """Which names (tool names, resource URIs, prompt names) a server offers: ``allow``
    globs (empty: every one), then ``deny`` globs (a match excludes it, whatever
    ``allow`` says). Shell-style, case-sensitive (``fnmatch.fnmatchcase``)."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    def permits(self, name: str) -> bool:
        if self.allow and not any(fnmatch.fnmatchcase(name, glob) for glob in self.allow):
            return False
        return not any(fnmatch.fnmatchcase(name, glob) for glob in self.deny)


Kind = Literal["tool", "resource", "prompt"]


@dataclass(frozen=True)
class ServerRules:
    """One server's approval settings.

    ``tools``: globs over the server's own tool names to a level; ``read_only``: the level
    of tools annotated ``readOnlyHint: true`` (honoured when ``trusted``; otherwise only
    when it is stricter than ``default``); ``default``: every other tool. Read from
    the configuration's ``"approval"``: a level (``"ask"``), or an object
    ``{"default": "ask", "readOnly": "allow", "tools": {"<glob>": "allow"|"ask"|"deny"}}``.

    From the server's other keys: ``trusted`` (``"trusted": true``: its annotations are
    believed), ``always_scope`` (``"alwaysScope"``: "client", an "always" holds for the
    asker who gave it; "shared", for every asker), ``resources`` and ``prompts``
    (``{"allow": [...], "deny": [...]}`` globs over resource URIs, template URIs and
    prompt names: see ``permits``).
    """

    default: Level = "ask"
    read_only: Level = "allow"
    tools: Mapping[str, Level] = field(default_factory=dict)
    trusted: bool = False
    always_scope: AlwaysScope = "client"
    resources: NameFilter = NameFilter()
    prompts: NameFilter = NameFilter()

    @classmethod
    def parse(
        cls,
        value: object,
        *,
        server: str = "?",
        fallback: Level = "ask",
        trusted: bool = False,
        always_scope: AlwaysScope = "client",
        resources: NameFilter | None = None,
        prompts: NameFilter | None = None,
    ) -> ServerRules:
        """The rules an ``"approval"`` value says (with the server's other settings as
        given); ``None`` gives ``fallback`` as the default. A server denied as a whole
        denies its read-only tools too, unless ``readOnly`` says otherwise. Raises
        ``ApprovalConfigError``."""
        if always_scope not in ALWAYS_SCOPES:
            raise ApprovalConfigError(
                f"server {server!r}: 'alwaysScope' must be 'client' or 'shared', not {always_scope!r}"
            )
        rules = cls._parse_approval(value, server, fallback)
        return cls(
            rules.default,
            rules.read_only,
            rules.tools,
            trusted=trusted,
            always_scope=always_scope,
            resources=resources or NameFilter(),
            prompts=prompts or NameFilter(),
        )

    @classmethod
    def _parse_approval(cls, value: object, server: str, fallback: Level) -> ServerRules:
        where = f"server {server!r}: 'approval'"
        if value is None:
            return cls(default=fallback, read_only="deny" if fallback == "deny" else "allow")
        if isinstance(value, str):
            default = _level(where, value)
            return cls(default=default, read_only="deny" if default == "deny" else "allow")
        if not isinstance(value, Mapping):
            raise ApprovalConfigError(f"{where} must be {_LEVEL_WORDS} or an object, not {value!r}")
        unknown = sorted(set(value) - {"default", "readOnly", "tools"})
        if unknown:
            raise ApprovalConfigError(
                f"{where}: unknown key {unknown[0]!r}; the keys are 'default', 'readOnly' and 'tools'"
            )
        default = _level(f"{where}.default", value.get("default", fallback))
        read_only = _level(f"{where}.readOnly", value.get("readOnly", "deny" if default == "deny" else "allow"))
        tools = value.get("tools", {})
        if not isinstance(tools, Mapping) or not all(isinstance(glob, str) and glob for glob in tools):
            raise ApprovalConfigError(f"{where}.tools must be an object: a tool name or glob to a level")
        return cls(default, read_only, {glob: _level(f"{where}.tools[{glob!r}]", lvl) for glob, lvl in tools.items()})

    def resolve(self, tool: Tool) -> tuple[Level, str]:
        """The tool's level and where it came from: "tool" (a glob), "readOnlyHint" or
        "server". The hint counts on a trusted server; on another only when its level is
        the stricter (an untrusted server's claim never loosens the policy)."""
        by_glob = self._by_glob(tool.name)
        if by_glob is not None:
            return by_glob, "tool"
        annotations = tool.annotations
        if annotations is not msgspec.UNSET and annotations.read_only_hint is True:
            if self.trusted or _STRICTNESS[self.read_only] > _STRICTNESS[self.default]:
                return self.read_only, "readOnlyHint"
        return self.default, "server"

    def permits(self, kind: Kind, name: str) -> bool:
        """Whether the server offers its resource (``name`` a URI, or a template's URI
        template) or prompt (its own name) at all: not when the server is denied as a
        whole (its default level), nor when its globs for that kind exclude it. Tools
        are ``resolve``'s (a tool is never refused here)."""
        if kind == "tool":
            return True
        if self.default == "deny":
            return False
        return (self.resources if kind == "resource" else self.prompts).permits(name)

    def _by_glob(self, name: str) -> Level | None:
        # An exact name wins; then the longest matching glob (the most specific); two
        # equally long ones: the stricter. So the answer never depends on key order.
        if name in self.tools:
            return self.tools[name]
        matches = [
            (len(glob), _STRICTNESS[lvl], lvl) for glob, lvl in self.tools.items() if fnmatch.fnmatchcase(name, glob)
        ]
        return max(matches)[2] if matches else None


_LEVEL_WORDS = "'allow', 'ask' or 'deny'"


def _level(where: str, value: object) -> Level:
    if value not in LEVELS:
        raise ApprovalConfigError(f"{where} must be {_LEVEL_WORDS}, not {value!r}")
    return value


class _ConfigLike(Protocol):
    @property
    def servers(self) -> Mapping[str, _SpecLike]: ...


class ApprovalPolicy:
    """Per server and per tool: allow, ask or deny.

    Precedence, most specific first: a tool's glob in the server's ``"tools"`` >
    ``readOnlyHint: true`` on a ``trusted`` server (the server's ``"readOnly"`` level;
    "allow" unless the server is denied as a whole) > the server's default > ``default``
    here ("ask"). Resources and prompts: ``permits``.

    ``servers``: a server name to its ``"approval"`` value (or ``ServerRules``). A server
    not named here is read from its spec's ``approval`` when it has one (servers added
    at run time), else gets ``default``.
    """

    def __init__(self, servers: Mapping[str, object] | None = None, *, default: Level = "ask") -> None:
        self.default: Level = _level("the policy's default", default)
        self._rules: dict[str, ServerRules] = {
            name: value if isinstance(value, ServerRules) else ServerRules.parse(value, server=name, fallback=default)
            for name, value in (servers or {}).items()
        }
        self._from_specs: dict[tuple[str, int], tuple[_SpecLike, ServerRules]] = {}

    @classmethod
    def from_config(cls, config: _ConfigLike, *, default: Level = "ask") -> ApprovalPolicy:
        """The policy of a ``HostConfig``: each server's ``"approval"``. Raises
        ``ApprovalConfigError`` for a setting that cannot be used."""
        return cls(
            {name: _rules_of(name, spec, default) for name, spec in config.servers.items()}, default=default
        )

    def rules(self, server: ServerLike | str) -> ServerRules:
        """The rules of ``server`` (a host's server, or a name)."""
        name = server if isinstance(server, str) else server.name
        if name in self._rules:
            return self._rules[name]
        spec = None if isinstance(server, str) else server.spec
        if spec is None:
            return ServerRules.parse(None, fallback=self.default)
        # Parsed once per spec object (specs are frozen; the entry holds the spec, so its
        # id cannot be reused while it is cached).
        cached = self._from_specs.get((name, id(spec)))
        if cached is not None and cached[0] is spec:
            return cached[1]
        if len(self._from_specs) >= _DIGEST_CACHE_SIZE:
            self._from_specs.clear()
        rules = _rules_of(name, spec, self.default)
        self._from_specs[(name, id(spec))] = (spec, rules)
        return rules

    def level(self, server: ServerLike | str, tool: Tool) -> Level:
        """ "allow", "ask" or "deny" for calls of ``tool`` (the server's own definition)."""
        return self.rules(server).resolve(tool)[0]

    def hidden(self, server: ServerLike | str, tool: Tool) -> bool:
        """True when every call of the tool would be denied: a host leaves it out of the
        tools a model sees."""
        return self.level(server, tool) == "deny"

    def permits(self, server: ServerLike | str, kind: Kind, name: str) -> bool:
        """Whether ``server`` offers the resource or prompt ``name`` (``ServerRules.permits``):
        a host leaves one it does not out of its lists and refuses to read or get it."""
        return self.rules(server).permits(kind, name)


def _settings(spec: _SpecLike) -> dict[str, Any]:
    # The server keys beside "approval" that the rules hold (a spec-like object from
    # before they existed has none: an untrusted server, client scope, no globs).
    return {
        "trusted": getattr(spec, "trusted", False) is True,
        "always_scope": getattr(spec, "always_scope", "client"),
        "resources": getattr(spec, "resources", None),
        "prompts": getattr(spec, "prompts", None),
    }


def _rules_of(name: str, spec: _SpecLike, default: Level) -> ServerRules:
    return ServerRules.parse(spec.approval, server=name, fallback=default, **_settings(spec))


# -- remembering -----------------------------------------------------------------------------------
_Key = tuple[str, str]  # (server identity, tool name)


class ApprovalStore:
    """``ALWAYS`` decisions in a JSON file, across runs.

    ``{"version": 1, "always": [{"server": identity, "tool": name, "digest": hex,
    "fields": {field: hex}}]}``. ``save`` writes a temporary file in the same folder and
    renames it over the old one (a crash leaves the old file or the new, never half of
    one), mode 0600: the file says what may run without asking.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()

    def load(self) -> dict[_Key, _Pin]:
        """The remembered approvals (none when there is no file yet). Raises
        ``ApprovalStoreError`` for a file that cannot be read, is not a store, or that
        others may write (they could plant approvals)."""
        try:
            info = self.path.stat()
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise ApprovalStoreError(f"cannot read the approvals file {self.path}: {exc}") from None
        if os.name == "posix" and info.st_mode & 0o022:
            raise ApprovalStoreError(
                f"the approvals file {self.path} may be written by other users (mode "
                f"{info.st_mode & 0o777:o}); fix it with: chmod 600 {self.path}"
            )
        try:
            return _decode_store(text)
        except ValueError as exc:
            raise ApprovalStoreError(
                f"the approvals file {self.path} is not a modelctx approvals file ({exc}); the next "
                "'always' replaces it, keeping the old one beside it as .corrupt",
                corrupt=True,
            ) from None

    def save(self, pins: Mapping[_Key, _Pin], *, keep_corrupt: bool = False) -> None:
        """Write ``pins`` atomically, mode 0600. ``keep_corrupt``: first move the file
        there to ``<name>.corrupt`` (it could not be read: a person may want it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if keep_corrupt and self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".corrupt"))
        entries = [
            {"server": server, "tool": tool, "digest": pin.digest, "fields": dict(pin.fields)}
            for (server, tool), pin in sorted(pins.items())
        ]
        data = json.dumps({"version": STORE_VERSION, "always": entries}, indent=2, ensure_ascii=False)
        handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                os.fchmod(out.fileno(), 0o600)
                out.write(data + "\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def _decode_store(text: str) -> dict[_Key, _Pin]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    except RecursionError:  # nested deeper than the decoder goes: not a store either
        raise ValueError("nested too deeply to be JSON a store holds") from None
    if not isinstance(data, dict) or data.get("version") != STORE_VERSION or not isinstance(data.get("always"), list):
        raise ValueError(f'expected {{"version": {STORE_VERSION}, "always": [...]}}')
    pins: dict[_Key, _Pin] = {}
    for index, entry in enumerate(data["always"]):
        fields = entry.get("fields") if isinstance(entry, dict) else None
        if not (
            isinstance(entry, dict)
            and all(isinstance(entry.get(key), str) for key in ("server", "tool", "digest"))
            and isinstance(fields, dict)
            and all(isinstance(value, str) for value in fields.values())
        ):
            raise ValueError(f"always[{index}] needs string 'server', 'tool', 'digest' and an object 'fields'")
        pins[(entry["server"], entry["tool"])] = _Pin(entry["digest"], fields)
    return pins


# -- the check -------------------------------------------------------------------------------------
class Approvals:
    """The host's approval hook: ``check(server, tool, arguments, asker=) -> Verdict``.

    ``policy`` decides first; ``ask`` goes to the ``asker`` (default: ``ui.approve``).
    ``store``: a path (or an ``ApprovalStore``) that keeps the shared scope's ``ALWAYS``
    across runs; without one they last for this object's life. ``ask_timeout``: seconds
    a question may stay unanswered before it counts as ``DENY`` (a person who walked
    away approves nothing).
    """

    def __init__(
        self,
        policy: ApprovalPolicy,
        ui: HostUI,
        store: ApprovalStore | str | os.PathLike[str] | None = None,
        *,
        ask_timeout: float = 300.0,
    ) -> None:
        self.policy = policy
        self.ui = ui
        self.store = store if isinstance(store, ApprovalStore) or store is None else ApprovalStore(store)
        self.ask_timeout = ask_timeout
        self._always: dict[_Key, _Pin] = {}  # identity-bound, saved to the store
        self._session: dict[_Key, _Pin] = {}  # servers without an identity: this run only
        # Scoped to one asker (a gateway client): (scope, key), this run only, oldest first.
        self._scoped: dict[tuple[str, _Key], _Pin] = {}
        self._seen: dict[_Key, _Pin] = {}  # the last definition a person approved, this run
        self._hinted: dict[_Key, _Pin] = {}  # read-only tools: the definition first allowed
        self._locks: dict[tuple[str, _Key], asyncio.Lock] = {}
        self._digests: dict[int, tuple[Tool, str]] = {}
        self._loaded = False
        self._store_corrupt = False
        self._saving = asyncio.Lock()

    async def load(self) -> None:
        """Read the store (once; ``check`` does it on first use). A problem with the file
        is shown to the person and logged; its approvals are then ignored."""
        if self._loaded:
            return
        self._loaded = True
        if self.store is None:
            return
        try:
            pins = await asyncio.to_thread(self.store.load)
        except ApprovalStoreError as exc:
            self._store_corrupt = exc.corrupt
            await self._report(f"{exc}; its approvals are ignored")
            return
        for key, pin in pins.items():
            self._always.setdefault(key, pin)

    async def _report(self, problem: str) -> None:
        log.warning("%s", problem)
        await self.ui.show(problem)

    def hidden(self, server: ServerLike, tool: Tool) -> bool:
        """True when the policy denies every call of ``tool``: a host leaves it out of the
        tools a model sees (``ApprovalPolicy.hidden``)."""
        return self.policy.hidden(server, tool)

    def permits(self, server: ServerLike, kind: Kind, name: str) -> bool:
        """Whether the host offers ``server``'s resource or prompt ``name`` (``ApprovalPolicy.permits``)."""
        return self.policy.permits(server, kind, name)

    async def check(
        self, server: ServerLike, tool: Tool, arguments: dict[str, Any], *, asker: Asker | None = None
    ) -> Verdict:
        """May this call go on? A ``Verdict``, truthy when it may; when it may not, the
        call must not reach the server. ``asker``: who answers an "ask" (default: this
        object's ``ui``, the host's one person); its ``scope`` is what an "always" it
        gives holds for, unless the server's ``alwaysScope`` is "shared"."""
        await self.load()
        rules = self.policy.rules(server)
        level, source = rules.resolve(tool)
        if level == "deny":
            return _DENIED_BY_CONFIG
        if level == "allow" and source != "readOnlyHint":
            return _ALLOWED_BY_CONFIG
        scope = HOST_SCOPE if asker is None or rules.always_scope == "shared" else asker.scope
        who: Asker = asker if asker is not None else _HostAsker(self.ui)
        identity = server_identity(server)
        key = (identity if identity is not None else f"unidentified:{server.name}", tool.name)
        if scope is None:  # nothing is remembered for it: no question to wait on together
            return await self._check_pinned(server, identity, key, tool, arguments, who, scope, ask=level == "ask")
        if len(self._locks) >= MAX_SCOPED:
            self._locks = {held: lock for held, lock in self._locks.items() if lock.locked()}
        async with self._locks.setdefault((scope, key), asyncio.Lock()):
            return await self._check_pinned(server, identity, key, tool, arguments, who, scope, ask=level == "ask")

    def _remembered(self, scope: str | None, identity: str | None, key: _Key) -> _Pin | None:
        if scope is None:
            return None
        if scope != HOST_SCOPE:
            return self._scoped.get((scope, key))
        return self._always.get(key) if identity is not None else self._session.get(key)

    async def _check_pinned(
        self,
        server: ServerLike,
        identity: str | None,
        key: _Key,
        tool: Tool,
        arguments: dict[str, Any],
        asker: Asker,
        scope: str | None,
        *,
        ask: bool,
    ) -> Verdict:
        digest = self._digest(tool)
        remembered = self._remembered(scope, identity, key)
        if remembered is not None and remembered.digest == digest:
            return _ALWAYS_SHARED if scope == HOST_SCOPE else Verdict(True, _ALWAYS, scope=scope)
        if not ask and remembered is None:
            # Allowed by readOnlyHint (a trusted server): the definition first allowed is pinned for the run.
            hinted = self._hinted.get(key)
            if hinted is None:
                self._hinted[key] = _Pin.of(tool)
                return _READ_ONLY
            if hinted.digest == digest:
                return _READ_ONLY
        earlier = remembered or (self._seen.get(key) if ask else self._hinted.get(key))
        changed = earlier is not None and earlier.digest != digest
        request = ApprovalRequest(
            server.name,
            identity or f"(a client the host did not start: {server.name})",
            tool,
            dict(arguments),
            why="definition changed" if changed else "new",
            changed=earlier.changed(tool) if earlier is not None and changed else (),
            previous=earlier.tool if earlier is not None and changed else None,
        )
        decision, refusal = await self._ask(asker, request)
        if decision is Decision.DENY:
            return Verdict(False, refusal or "it was not approved", decision)
        pin = _Pin.of(tool)
        self._seen[key] = pin
        if decision is not Decision.ALWAYS:
            return Verdict(True, "it was allowed once", decision)
        if scope is None:
            return Verdict(True, "'always' was taken as allow once: the asker has no identity to remember it for", decision)
        await self._remember(scope, identity, key, pin)
        return Verdict(True, _ALWAYS, decision, scope)

    def _digest(self, tool: Tool) -> str:
        # A host hands the same Tool object to every call until the list changes: a
        # digest (about 12 us over a small schema) is computed once per object. The
        # entry holds the tool, so its id cannot be reused while it is cached.
        cached = self._digests.get(id(tool))
        if cached is not None and cached[0] is tool:
            return cached[1]
        if len(self._digests) >= _DIGEST_CACHE_SIZE:
            self._digests.clear()
        digest = tool_digest(tool)
        self._digests[id(tool)] = (tool, digest)
        return digest

    async def _ask(self, asker: Asker, request: ApprovalRequest) -> tuple[Decision, str | None]:
        """The asker's decision, and when it denied for a reason of its own (a refusing
        ``Verdict``: the client cannot be asked, ...), that reason."""
        try:
            answer = await asyncio.wait_for(asker.approve(request), self.ask_timeout)
        except TimeoutError:
            log.warning("no answer within %gs to: %s; denied", self.ask_timeout, request.describe())
            return Decision.DENY, f"no answer within {self.ask_timeout:g}s"
        if isinstance(answer, Verdict) and not answer.allowed:
            return Decision.DENY, answer.reason
        if not isinstance(answer, Decision):
            raise LocalError(
                f"HostUI.approve returned {answer!r}; it must return a Decision "
                "(Decision.ALLOW_ONCE, Decision.ALWAYS or Decision.DENY)"
            )
        return answer, None

    async def remembered(self) -> list[_Key]:
        """The ``ALWAYS`` answers in force, sorted: ``(server identity, tool name)``, those of
        earlier runs (from the store) and this one's. A server the host did not start has
        ``unidentified:<name>`` for identity (its answers last for this run only)."""
        await self.load()
        return sorted({*self._always, *self._session})

    async def forget(self, identity: str, tool: str) -> bool:
        """Withdraw the ``ALWAYS`` answer for ``tool`` of the server ``identity`` (as
        ``remembered`` lists it): its next call is asked about again. The store is
        rewritten at once. False when there was no such answer."""
        await self.load()
        key = (identity, tool)
        stored = self._always.pop(key, None) is not None
        this_run = self._session.pop(key, None) is not None
        scoped = [entry for entry in self._scoped if entry[1] == key]
        for entry in scoped:
            del self._scoped[entry]
        this_run = this_run or bool(scoped)
        self._seen.pop(key, None)
        if stored:
            await self._save()
        return stored or this_run

    async def _remember(self, scope: str, identity: str | None, key: _Key, pin: _Pin) -> None:
        if scope != HOST_SCOPE:
            # One asker's: this run only (a session or connection id means nothing in the
            # next), at most MAX_SCOPED of them, the oldest forgotten first.
            self._scoped.pop((scope, key), None)
            while len(self._scoped) >= MAX_SCOPED:
                del self._scoped[next(iter(self._scoped))]
            self._scoped[(scope, key)] = pin
            return
        if identity is None:
            self._session[key] = pin
            return
        self._always[key] = pin
        await self._save()

    async def _save(self) -> None:
        if self.store is None:
            return
        async with self._saving:  # one writer at a time: the last save holds every pin
            snapshot = dict(self._always)
            try:
                await asyncio.to_thread(self.store.save, snapshot, keep_corrupt=self._store_corrupt)
            except OSError as exc:
                # The person decided; failing to write it down must not undo the call.
                await self._report(f"could not save the approvals to {self.store.path}: {exc}; the change holds for this run")
                return
            self._store_corrupt = False

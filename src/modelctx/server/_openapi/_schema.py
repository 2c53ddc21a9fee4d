"""OpenAPI schemas as JSON Schema 2020-12: local ``$ref``s resolved, cycles kept as ``$defs``.

Theory: a ``$ref`` is inlined where it is used, so a model reads each tool's arguments in
one piece. A ``$ref`` met again while it is being inlined (``Node.children: [Node]``) is a
cycle: that use stays a ``{"$ref": "#/$defs/Node"}`` and ``Node`` is converted once more,
into the schema's ``$defs``, with the same rule (its own uses of itself point back into
``$defs``). Inlining copies: a schema whose references fan out (``A`` uses ``B`` twice,
``B`` uses ``C`` twice, ...) would grow exponentially, so one that passes ``INLINE_NODES``
or ``MAX_DEPTH`` while inlining is converted again with every reference kept as a ``$ref``
into ``$defs``, each definition converted once: linear in the document's size. Only local references (``#/...``) are followed: a spec that points at another
document (``other.yaml#/X``, ``https://...``) is refused, since fetching it would let a
spec reach any URL from the machine that loads it; bundle such a spec into one file first.

OpenAPI 3.0 schemas are a dialect of their own: ``nullable: true`` becomes a ``"null"``
type, boolean ``exclusiveMinimum``/``exclusiveMaximum`` become the numbers 2020-12 wants.
Every conversion counts the nodes it builds against a budget for the whole document, so
what even ``$defs`` cannot keep small (a YAML alias bomb: shared objects, not references)
is refused instead of expanding exponentially.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from ...errors import RegistrationError

__all__ = ["INLINE_NODES", "MAX_DEPTH", "MAX_NODES", "Document", "Schemas"]

MAX_DEPTH = 64  # nesting of one converted schema (inlined references included)
MAX_NODES = 200_000  # schema nodes built from one document, in all
INLINE_NODES = 4_000  # one tool's schemas, inlined; past it, references stay $refs
_MAX_HOPS = 32  # a $ref to a $ref to ...: a chain this long is a loop
_T = TypeVar("_T")


def _unescape(token: str) -> str:
    # RFC 6901: "~1" is "/", "~0" is "~", in that order.
    return token.replace("~1", "/").replace("~0", "~")


class Document:
    """One OpenAPI document, for resolving its references and converting its schemas."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        version = str(spec.get("openapi", ""))
        self.v30 = version.startswith("3.0")
        self.nodes = 0

    def resolve(self, node: Any, where: str) -> Any:
        """``node`` with its ``$ref`` chain followed (a parameter, a body, a response).

        Raises ``RegistrationError`` for a remote or dangling reference, or a loop."""
        seen = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            node = self.target(node["$ref"], where)
            seen += 1
            if seen > _MAX_HOPS:
                raise RegistrationError(f"OpenAPI {where}: $ref chain longer than {_MAX_HOPS} (a loop?)")
        return node

    def target(self, ref: str, where: str) -> Any:
        """What the local reference ``ref`` points at. Raises ``RegistrationError``."""
        if not ref.startswith("#"):
            raise RegistrationError(
                f"OpenAPI {where}: $ref {ref[:200]!r} points outside this document; only local "
                "references (#/...) are followed, never files or URLs: bundle the spec into one "
                "document first (e.g. `redocly bundle`)"
            )
        node: Any = self.spec
        for token in ref[1:].split("/")[1:] if ref != "#" else []:
            key = _unescape(token)
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise RegistrationError(f"OpenAPI {where}: $ref {ref[:200]!r} points at nothing in the document")
        return node

    def schema(self, node: Any, where: str) -> dict[str, Any]:
        """``node`` (an OpenAPI schema) as a self-contained JSON Schema 2020-12.

        Cycles end in ``$defs`` at the top of the result. Raises ``RegistrationError``."""

        def build(schemas: Schemas) -> dict[str, Any]:
            result = schemas.convert(node)
            defs = schemas.defs()
            return {**result, "$defs": defs} if defs else result

        return self.build(build, where)

    def build(self, build: Callable[[Schemas], _T], where: str) -> _T:
        """``build(schemas)``, inlining references; again with ``$ref``s kept if inlining
        grows past ``INLINE_NODES`` or ``MAX_DEPTH``. ``build`` converts the parts of one
        schema (a tool's arguments) with ``schemas.convert`` and puts ``schemas.defs()`` at
        its root. Raises ``RegistrationError``."""
        inlining = Schemas(self, where, inline=True)
        try:
            result = build(inlining)
        except _Expanding:
            return build(Schemas(self, where, inline=False))
        self.nodes += inlining.built
        self.check(where)
        return result

    def check(self, where: str) -> None:
        if self.nodes > MAX_NODES:
            raise RegistrationError(
                f"OpenAPI {where}: the document's schemas expand to more than {MAX_NODES:,} nodes "
                "(a YAML alias bomb, or a huge spec); exclude operations with route_maps or simplify the spec"
            )


class _Expanding(Exception):
    """Inlining passed its budget: convert again with references kept."""


class Schemas:
    """One top-level schema's conversion: the ``$defs`` it points into are collected here."""

    def __init__(self, document: Document, where: str, *, inline: bool = True) -> None:
        self.document = document
        self.where = where
        self.inline = inline
        self.built = 0  # nodes, while inlining (added to the document's count on success)
        self._names: dict[str, str] = {}  # a $ref kept -> its name under $defs
        self._defs: dict[str, Any] = {}

    def convert(self, node: Any) -> dict[str, Any]:
        """One part, converted; ``True`` (anything) is ``{}``. Raises ``RegistrationError``."""
        result = self._convert(node, (), 0)
        if isinstance(result, bool):
            return {} if result else {"not": {}}
        return dict(result)

    def defs(self) -> dict[str, Any]:
        """The ``$defs`` the parts converted so far point into (empty without cycles)."""
        # Converting one definition may find another cycle: repeat until none is new.
        while True:
            pending = [ref for ref in self._names if self._names[ref] not in self._defs]
            if not pending:
                return self._defs
            for ref in pending:
                name = self._names[ref]
                self._defs[name] = None  # reserved, so a cycle through it is not pending again
                self._defs[name] = self._convert(self.document.target(ref, self.where), (ref,), 0)

    def def_name(self, ref: str) -> str:
        if ref not in self._names:
            base = re.sub(r"[^A-Za-z0-9_.-]", "_", _unescape(ref.rsplit("/", 1)[-1])) or "schema"
            name, n = base, 2
            while name in self._names.values():
                name, n = f"{base}_{n}", n + 1
            self._names[ref] = name
        return self._names[ref]

    def count(self, depth: int) -> None:
        if self.inline:
            self.built += 1
            if self.built > INLINE_NODES or depth > MAX_DEPTH:
                raise _Expanding
            return
        self.document.nodes += 1
        self.document.check(self.where)
        if depth > MAX_DEPTH:
            raise RegistrationError(
                f"OpenAPI {self.where}: a schema nests deeper than {MAX_DEPTH} levels; "
                "exclude the operation with route_maps or simplify the spec"
            )

    def _convert(self, node: Any, stack: tuple[str, ...], depth: int) -> Any:
        self.count(depth)
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            raise RegistrationError(f"OpenAPI {self.where}: a schema must be an object, not {type(node).__name__}")
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in stack or not self.inline:
                return {"$ref": f"#/$defs/{self.def_name(ref)}"}
            if len(stack) > _MAX_HOPS * 4:
                raise RegistrationError(f"OpenAPI {self.where}: references nest deeper than {_MAX_HOPS * 4}")
            inlined = self._convert(self.document.target(ref, self.where), (*stack, ref), depth + 1)
            # 3.1 allows keywords beside $ref; keep a description or title given there.
            extra = {k: node[k] for k in ("description", "title") if k in node}
            if extra and isinstance(inlined, dict):
                return {**inlined, **extra}
            return inlined
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"):
                if isinstance(value, dict):
                    out[key] = {k: self._convert(v, stack, depth + 1) for k, v in value.items()}
            elif key in ("items", "additionalProperties", "not", "contains", "propertyNames",
                         "if", "then", "else", "unevaluatedItems", "unevaluatedProperties"):
                if isinstance(value, list):  # draft-4 tuple items
                    out["prefixItems"] = [self._convert(v, stack, depth + 1) for v in value]
                else:
                    out[key] = self._convert(value, stack, depth + 1)
            elif key in ("allOf", "anyOf", "oneOf", "prefixItems"):
                if isinstance(value, list):
                    out[key] = [self._convert(v, stack, depth + 1) for v in value]
            elif key in ("discriminator", "xml", "externalDocs", "nullable") or key.startswith("x-"):
                continue  # OpenAPI-only keywords and extensions: no meaning for validation
            else:
                out[key] = value
        if self.document.v30:
            _from_30(node, out)
        return out


def _from_30(node: dict[str, Any], out: dict[str, Any]) -> None:
    """The OpenAPI 3.0 keywords whose meaning differs from JSON Schema 2020-12."""
    if node.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            out["type"] = [*kind, "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        flag = out.get(exclusive)
        if isinstance(flag, bool):
            del out[exclusive]
            if flag and bound in out:
                out[exclusive] = out.pop(bound)

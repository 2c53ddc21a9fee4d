"""RFC 6570 URI templates: parse once, expand values, match a URI back to values.

Every operator of RFC 6570 level 4 is supported, in expansion and in matching:
``{x}`` simple, ``{+x}`` reserved, ``{#x}`` fragment, ``{.x}`` label, ``{/x}`` path
segment, ``{;x}`` path parameter, ``{?x,y}`` query, ``{&x}`` query continuation;
the prefix modifier ``{x:3}`` and the explode modifier ``{x*}``. The operators RFC
6570 reserves for the future (``= , ! @ |``) and every malformed template are refused
when the template is built, with the position and what is wrong.

Matching is the inverse of expansion, as far as a URI can be read back:

- A variable of ``{x}``/``{+x}`` must be present and not empty (it is what tells the
  template's resources apart); every other operator's variables may be absent, as
  undefined variables are in expansion, and then are missing from the result.
- ``{?...}``/``{&...}`` (and ``{;...}``) read name=value pairs in any order; pairs
  for names the template does not have are ignored, ``+`` reads as a space.
- Values come back percent-decoded as ``str``; an exploded variable (``{/x*}``,
  ``{?x*}``...) comes back as a ``list[str]``. An exploded associative array cannot
  be told apart from a list in a URI, so matching reads it as a list.
- Where a URI has several readings, the first is taken: values of ``{x}``/``{+x}``
  (and the other positional operators) as short as will do, an exploded path or
  label and the query as long as will do, an optional part taken when it can be.
  Matching takes time linear in the URI (``_uri_reach``): a peer chooses it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, unquote_plus

from ..errors import RegistrationError
from ._uri_reach import Lit, Opt, Run, Step, match_steps

__all__ = ["UriTemplate"]


@dataclass(frozen=True)
class _Operator:
    """RFC 6570 Appendix A: how one operator expands."""

    first: str  # written before the first defined value
    sep: str  # written between values
    named: bool  # name=value pairs
    ifemp: str  # written after the name when the value is empty
    reserved: bool  # reserved characters pass unencoded


_OPERATORS = {
    "": _Operator("", ",", False, "", False),
    "+": _Operator("", ",", False, "", True),
    "#": _Operator("#", ",", False, "", True),
    ".": _Operator(".", ".", False, "", False),
    "/": _Operator("/", "/", False, "", False),
    ";": _Operator(";", ";", True, "", False),
    "?": _Operator("?", "&", True, "=", False),
    "&": _Operator("&", "&", True, "=", False),
}
_FUTURE_OPERATORS = "=,!@|"  # RFC 6570 §2.2: reserved for future extensions
_VARNAME = re.compile(r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*")
_UNRESERVED = "-._~"
_RESERVED = ":/?#[]@!$&'()*+,;="


@dataclass(frozen=True)
class _Var:
    name: str
    prefix: int | None  # {x:3}
    explode: bool  # {x*}


@dataclass(frozen=True)
class _Expression:
    operator: str
    variables: tuple[_Var, ...]


class UriTemplate:
    """A parsed RFC 6570 template. Raises ``RegistrationError`` if ``template`` is malformed."""

    def __init__(self, template: str) -> None:
        self.template = template
        self._parts = _parse(template)
        _refuse_runs(template, self._parts)
        names = [v.name for part in self._parts if isinstance(part, _Expression) for v in part.variables]
        self.variables: list[str] = list(dict.fromkeys(names))  # a name may appear twice
        self._steps, self._readers = _compile(self._parts)

    def expand(self, values: Mapping[str, Any]) -> str:
        """The URI for ``values`` (str, numbers, lists, dicts; ``None`` means undefined)."""
        out: list[str] = []
        for part in self._parts:
            out.append(part if isinstance(part, str) else _expand(part, values))
        return "".join(out)

    def match(self, uri: str) -> dict[str, str | list[str]] | None:
        """The variables of ``uri`` if it fits the template, else ``None``.

        Time linear in ``len(uri)`` for a given template (``_uri_reach``): a peer
        chooses the URI, and no backtracking is done.
        """
        spans = match_steps(self._steps, uri)
        if spans is None:
            return None
        return self._read({group: uri[start:end] for group, (start, end) in spans.items()})

    def _read(self, texts: Mapping[str, str]) -> dict[str, str | list[str]] | None:
        """The variables that the text each step read says, or ``None`` if they disagree."""
        values: dict[str, str | list[str]] = {}
        for group, reader in self._readers.items():
            text = texts.get(group)
            if text is not None and not reader.read(text, values):
                return None
        for name in [n for n in values if n.startswith(_PREFIX_KEY)]:
            # {var:3} read alone stands for var; beside {var} it must agree with it.
            short, full = values.pop(name), values.get(name[len(_PREFIX_KEY) :])
            if full is None:
                values[name[len(_PREFIX_KEY) :]] = short
            elif not (isinstance(full, str) and isinstance(short, str) and full.startswith(short)):
                return None
        return values

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"


# -- parsing ------------------------------------------------------------------------------
def _parse(template: str) -> list[str | _Expression]:
    parts: list[str | _Expression] = []
    pos = 0
    while pos < len(template):
        open_at = template.find("{", pos)
        close_at = template.find("}", pos)
        if close_at != -1 and (open_at == -1 or close_at < open_at):
            raise _error(template, f"'}}' at position {close_at} closes no '{{'")
        if open_at == -1:
            parts.append(template[pos:])
            break
        if open_at > pos:
            parts.append(template[pos:open_at])
        nested = template.find("{", open_at + 1)
        if close_at == -1 or (nested != -1 and nested < close_at):
            raise _error(template, f"the brace '{{' at position {open_at} is never closed")
        expression = _parse_expression(template, template[open_at + 1 : close_at], open_at)
        parts.append(expression)
        pos = close_at + 1
    return parts


def _parse_expression(template: str, body: str, at: int) -> _Expression:
    if not body:
        raise _error(template, f"the expression at position {at} is empty")
    if body[0] in _FUTURE_OPERATORS:
        raise _error(
            template,
            f"the operator {body[0]!r} at position {at} is reserved by RFC 6570 for future "
            "use; the operators are + # . / ; ? &",
        )
    operator = body[0] if body[0] in _OPERATORS else ""
    specs = body[len(operator) :].split(",")
    return _Expression(operator, tuple(_parse_var(template, spec, at) for spec in specs))


def _parse_var(template: str, spec: str, at: int) -> _Var:
    name, explode, prefix = spec, False, None
    if spec.endswith("*"):
        name, explode = spec[:-1], True
    elif ":" in spec:
        name, _, length = spec.partition(":")
        if not (length.isdigit() and length[0] != "0" and len(length) <= 4):
            raise _error(
                template, f"the prefix {spec!r} at position {at} needs a length of 1 to 9999"
            )
        prefix = int(length)
    if not _VARNAME.fullmatch(name):
        raise _error(
            template,
            f"{name!r} (at position {at}) is not a variable name: letters, digits, '_', "
            "'.' inside, or %-encoded characters",
        )
    return _Var(name, prefix, explode)


# Expressions with no leading character of their own: read back from a URI, nothing
# marks where one value ends and the next begins.
_UNMARKED = ("", "+")


def _refuse_runs(template: str, parts: list[str | _Expression]) -> None:
    """Refuse three or more unmarked expressions in a row (``{a}{b}{c}``).

    Such a template has no one reading of a URI: matching would read each value but
    the last as one character (``abcdef``: a=a, b=b, c=cdef), which no author means,
    so registration says so and how to fix it. Matching no longer needs the rule (it
    is linear in the URI whatever the template, ``_uri_reach``); two in a row stay
    allowed, as RFC 6570's own ``{+path}{var}`` writes them.
    """
    run = 0
    for part in parts:
        run = run + 1 if isinstance(part, _Expression) and part.operator in _UNMARKED else 0
        if run == 3:
            raise RegistrationError(
                f"URI template {template!r} has three or more expressions in a row with "
                "nothing between them, so a URI cannot say where one value ends: put a "
                "literal (such as '/') between them"
            )


def _error(template: str, what: str) -> RegistrationError:
    return RegistrationError(f"URI template {template!r} is malformed: {what}")


# -- expansion (RFC 6570 §3.2) ----------------------------------------------------------
_TRIPLET_OR_TEXT = re.compile(r"%[0-9A-Fa-f]{2}|[^%]+|%")


def _encode(value: str, reserved: bool) -> str:
    if not reserved:
        return quote(value, safe=_UNRESERVED)
    # Reserved expansion (+ and #) keeps reserved characters and existing %XX triplets.
    return "".join(
        piece if len(piece) == 3 and piece[0] == "%" else quote(piece, safe=_RESERVED + _UNRESERVED)
        for piece in _TRIPLET_OR_TEXT.findall(value)
    )


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _expand(expression: _Expression, values: Mapping[str, Any]) -> str:
    op = _OPERATORS[expression.operator]
    pieces: list[str] = []
    for var in expression.variables:
        value = values.get(var.name)
        if value is None or (isinstance(value, (list, tuple, dict)) and not value):
            continue  # undefined: RFC 6570 §2.3
        pieces.append(_expand_var(op, var, value))
    return op.first + op.sep.join(pieces) if pieces else ""


def _expand_var(op: _Operator, var: _Var, value: Any) -> str:
    name = var.name
    if not isinstance(value, (list, tuple, dict)):
        text = _text(value)
        if var.prefix is not None:
            text = text[: var.prefix]
        encoded = _encode(text, op.reserved)
        if op.named:
            return f"{name}{op.ifemp}" if not text else f"{name}={encoded}"
        return encoded
    pairs = list(value.items()) if isinstance(value, dict) else None
    if not var.explode:
        items = (
            [x for k, v in pairs for x in (k, v)] if pairs is not None else list(value)
        )
        joined = ",".join(_encode(_text(x), op.reserved) for x in items)
        return f"{name}={joined}" if op.named else joined
    named = pairs if pairs is not None else [(name, x) for x in value] if op.named else None
    if named is None:
        return op.sep.join(_encode(_text(x), op.reserved) for x in value)
    return op.sep.join(
        f"{_encode(_text(k), op.reserved)}={_encode(_text(v), op.reserved)}"
        if _text(v) or not op.named
        else f"{_encode(_text(k), op.reserved)}{op.ifemp}"
        for k, v in named
    )


# -- matching ----------------------------------------------------------------------------
class _Reader:
    """Turns the text one step read into variable values."""

    def __init__(
        self,
        names: tuple[str, ...],
        exploded: frozenset[str],
        mode: str,
        op: str,
        limit: int | None = None,
    ) -> None:
        self.names = names
        self.exploded = exploded
        self.mode = mode  # "one": a single variable; "pairs": name=value pairs
        self.op = op
        self.limit = limit  # {var:n}: at most n characters, counted after decoding

    def read(self, text: str, values: dict[str, str | list[str]]) -> bool:
        """Add what ``text`` says to ``values``; False if it contradicts them."""
        if self.mode == "pairs":
            return self._read_pairs(text, values)
        name = self.names[0]
        value: str | list[str]
        if name in self.exploded:
            value = [unquote(item) for item in text.split(_OPERATORS[self.op].sep)]
        else:
            value = unquote(text)
            if self.limit is not None and len(value) > self.limit:
                return False
        return _store(values, name, value)

    def _read_pairs(self, text: str, values: dict[str, str | list[str]]) -> bool:
        sep = ";" if self.op == ";" else "&"
        decode = unquote if self.op == ";" else unquote_plus
        for pair in text.split(sep):
            if not pair:
                continue
            raw_name, has_value, raw_value = pair.partition("=")
            name = decode(raw_name)
            if name not in self.names:
                if self.op == ";":
                    return False  # a path parameter the template does not have
                continue  # an extra query parameter: ignored
            value = decode(raw_value) if has_value else ""
            if name in self.exploded:
                existing = values.setdefault(name, [])
                if isinstance(existing, list):
                    existing.append(value)
            elif not _store(values, name, value):
                return False
        return True


_PREFIX_KEY = "\0prefix:"  # where a {var:n} reading waits to be compared with {var}


def _store(values: dict[str, str | list[str]], name: str, value: str | list[str]) -> bool:
    """Set ``name``; a name that appears twice in a template must read the same twice."""
    previous = values.setdefault(name, value)
    return previous == value


# What a value of each operator may contain when read back: every character but those
# that end it. "/", "?", "#" and ";" end any value of {x}, {.x} and {/x} (expansion
# percent-encodes them inside a value); between variables of one expression, the
# operator's separator ends a value too, and the label operator's "." always does.
_ENDS_VALUE = frozenset("/?#;")


def _compile(parts: list[str | _Expression]) -> tuple[tuple[Step, ...], dict[str, _Reader]]:
    """The template as ``_uri_reach`` steps, and what reads each named step's text.

    The steps are those of the regex this module used to build, preference included
    (a value of {x} or {+x} as short as will do, an exploded path or label, a query and
    path parameters as long as will do), so a URI reads back as it always did.
    """
    steps: list[Step] = []
    readers: dict[str, _Reader] = {}
    query_names = tuple(
        v.name for p in parts if isinstance(p, _Expression) and p.operator in ("?", "&") for v in p.variables
    )
    query_exploded = frozenset(
        v.name for p in parts if isinstance(p, _Expression) and p.operator in ("?", "&") for v in p.variables if v.explode
    )
    for part in parts:
        if isinstance(part, str):
            steps.append(Lit(part))
            continue
        group = f"g{len(readers)}"
        op = part.operator
        exploded = frozenset(v.name for v in part.variables if v.explode)
        if op in ("?", "&"):
            # "?" then name=value pairs up to the fragment, or nothing at all.
            steps.append(Opt((Lit(op), Run(frozenset("#"), name=group))))
            readers[group] = _Reader(query_names, query_exploded, "pairs", op)
        elif op == ";":
            # ";name=value" pairs, as many as there are: nothing, or ";" and a run
            # that may hold further ";".
            steps.append(Opt((Lit(";"), Run(_ENDS_VALUE - {";"})), name=group))
            readers[group] = _Reader(tuple(v.name for v in part.variables), exploded, "pairs", op)
        else:
            steps.extend(_positional(part, group, readers))
    return tuple(steps), readers


def _positional(expression: _Expression, group: str, readers: dict[str, _Reader]) -> list[Step]:
    """The steps of a ``{x}``, ``{+x}``, ``{#x}``, ``{.x}`` or ``{/x}`` expression."""
    op = expression.operator
    spec = _OPERATORS[op]
    steps: list[Step] = []
    for index, var in enumerate(expression.variables):
        name = f"{group}_{index}"
        excluded = _excluded(op, var, single=len(expression.variables) == 1)
        # Only the first variable of {x} and {+x} is required: anything else may be undefined.
        required = op in ("", "+") and index == 0
        # An exploded path or label reads every segment it can ("/a/b/c": one list);
        # any other value as few characters as will do.
        whole = var.explode and op in (".", "/")
        value = Run(excluded, shortest=not whole, at_least_one=required, name=name)
        lead = Lit(spec.first if index == 0 else spec.sep)
        steps.extend((lead, value) if required else (Opt((lead, value)),))
        key = var.name if var.prefix is None else _PREFIX_KEY + var.name
        readers[name] = _Reader((key,), frozenset([key]) if var.explode else frozenset(), "one", op, var.prefix)
    return steps


def _excluded(op: str, var: _Var, single: bool) -> frozenset[str] | None:
    """The characters a value of ``var`` cannot hold (``None``: it can hold any)."""
    if op in ("+", "#"):
        return None if single else frozenset(",")  # "," parts the values of {+x,y}
    excluded = _ENDS_VALUE | ({"."} if op == "." else set())
    if not single and not (var.explode and op == ""):
        excluded |= {","}  # "a,b,c" in {x} alone is one value (a list, not exploded)
    if var.explode and op in (".", "/"):
        excluded -= {_OPERATORS[op].sep}  # the separator parts the items of one list
    return excluded

"""Constraints written in ``Annotated`` types, rewritten as ``msgspec.Meta``.

msgspec describes and enforces ``msgspec.Meta`` and silently ignores every other
``Annotated`` extra, so the constraints of annotated_types (``Gt``, ``Len``,
``Interval`` ...) and of pydantic (``Field(gt=0, pattern=...)``) would vanish from
both the schema and the validation. ``to_msgspec`` rewrites a type, at any depth of
``list``/``dict``/unions, so that each becomes the ``Meta`` that means the same.
A ``Predicate`` has no JSON Schema form: at the top of a parameter's type it is kept
aside and checked after conversion; deeper it is refused.

Neither library is imported here: their classes are looked up in ``sys.modules``,
which holds them whenever one of their objects exists.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args, get_origin

import msgspec

from ..errors import RegistrationError

__all__ = ["refuse_hidden_constraints", "to_msgspec"]

# annotated_types class name -> the msgspec.Meta keyword (the attribute has that name too,
# except where noted in _ATTR).
_META_KEY = {
    "Gt": "gt",
    "Ge": "ge",
    "Lt": "lt",
    "Le": "le",
    "MultipleOf": "multiple_of",
    "MinLen": "min_length",
    "MaxLen": "max_length",
}
# pydantic's own metadata (``_PydanticGeneralMetadata``): the keys msgspec can express,
# and those that change nothing here (msgspec is always strict).
_PYDANTIC_KEYS = {"pattern": "pattern"}
_PYDANTIC_IGNORED = {"strict"}


def to_msgspec(tp: Any, where: str, predicates: list[Callable[[Any], bool]] | None = None) -> Any:
    """``tp`` with every annotated_types/pydantic constraint as ``msgspec.Meta``.

    ``where`` names the parameter in error messages. ``predicates`` collects the
    ``Predicate`` functions found at the top level (``None``: none are allowed).
    Raises ``RegistrationError`` for a constraint that cannot be expressed.
    """
    origin = get_origin(tp)
    if origin is Annotated:
        base, *extras = get_args(tp)
        meta: dict[str, Any] = {}
        kept: list[Any] = []
        for extra in extras:
            _collect(extra, meta, kept, where, predicates)
        base = to_msgspec(base, where, None)
        if meta:
            kept.append(msgspec.Meta(**meta))
        return Annotated[(base, *kept)] if kept else base
    args = get_args(tp)
    if not args or origin is Literal:
        return tp
    rebuilt = tuple(a if a is Ellipsis or isinstance(a, list) else to_msgspec(a, where, None) for a in args)
    if all(new is old for new, old in zip(rebuilt, args, strict=True)):
        return tp
    if origin in (typing.Union, types.UnionType):
        return typing.Union[rebuilt]  # noqa: UP007 - built from a tuple of members
    copy_with = getattr(tp, "copy_with", None)  # typing.List[int] and friends
    return copy_with(rebuilt) if copy_with is not None else origin[rebuilt]


def _collect(
    extra: Any,
    meta: dict[str, Any],
    kept: list[Any],
    where: str,
    predicates: list[Callable[[Any], bool]] | None,
) -> None:
    """Fold one ``Annotated`` extra into ``meta`` (or ``kept``, or ``predicates``)."""
    annotated_types = sys.modules.get("annotated_types")
    pydantic_fields = sys.modules.get("pydantic.fields")
    if isinstance(extra, msgspec.Meta):
        kept.append(extra)
    elif isinstance(extra, str):
        meta["description"] = extra  # Annotated[str, "what it is"]
    elif pydantic_fields is not None and isinstance(extra, pydantic_fields.FieldInfo):
        for key in ("title", "description", "examples"):
            value = getattr(extra, key, None)
            if value is not None:
                meta[key] = value
        for item in extra.metadata:
            _collect(item, meta, kept, where, predicates)
    elif annotated_types is not None and isinstance(extra, annotated_types.GroupedMetadata):
        for item in extra:  # Interval, Len, pydantic's StringConstraints ...
            _collect(item, meta, kept, where, predicates)
    elif type(extra).__module__.partition(".")[0] == "pydantic":
        _collect_pydantic(extra, meta, where)  # Strict, AllowInfNan, pattern= ...
    elif annotated_types is not None and isinstance(extra, annotated_types.BaseMetadata):
        _collect_annotated_type(extra, meta, where, predicates)
    elif type(extra).__name__ in ("Doc", "DocInfo") and hasattr(extra, "documentation"):
        meta["description"] = extra.documentation  # annotated_types.doc("...")
    # Any other extra is a marker for some other tool: left alone, as msgspec does.


def _collect_pydantic(extra: Any, meta: dict[str, Any], where: str) -> None:
    """pydantic's own metadata objects: each attribute is one constraint."""
    for key, value in vars(extra).items():
        if value is None:
            continue  # not set (StringConstraints lists every option)
        if key in _PYDANTIC_KEYS:
            meta[_PYDANTIC_KEYS[key]] = value
        elif key not in _PYDANTIC_IGNORED:
            raise RegistrationError(
                f"{where}: the pydantic constraint {key}={value!r} cannot be checked here; "
                "use gt/ge/lt/le/multiple_of/min_length/max_length/pattern"
            )


def _collect_annotated_type(
    extra: Any,
    meta: dict[str, Any],
    where: str,
    predicates: list[Callable[[Any], bool]] | None,
) -> None:
    name = type(extra).__name__
    if name in _META_KEY:
        meta[_META_KEY[name]] = getattr(extra, _META_KEY[name])
    elif name == "Predicate":
        if predicates is None:
            raise RegistrationError(
                f"{where}: a Predicate can only constrain the parameter itself, not a value "
                "nested inside its type (it has no JSON Schema form to carry it there)"
            )
        predicates.append(extra.func)
    elif name == "Timezone" and extra.tz in (None, ...):
        meta["tz"] = extra.tz is ...
    else:
        raise RegistrationError(
            f"{where}: the constraint {extra!r} is not supported; use Gt, Ge, Lt, Le, "
            "MultipleOf, MinLen, MaxLen, Len, Interval, Predicate or Timezone(...)/Timezone(None)"
        )


def refuse_hidden_constraints(tp: Any, where: str) -> None:
    """Raise ``RegistrationError`` if a dataclass, TypedDict or Struct inside ``tp`` has a
    field constrained with annotated_types or pydantic.

    msgspec reads those classes' fields itself and would skip such constraints without
    a word; ``to_msgspec`` cannot rewrite a class the handler expects to receive.
    """
    _walk(tp, where, set())


def _walk(tp: Any, where: str, seen: set[int]) -> None:
    if get_origin(tp) is Annotated:
        base, *_ = get_args(tp)
        _walk(base, where, seen)
        return
    for arg in get_args(tp):
        if get_origin(tp) is not Literal and arg is not Ellipsis and not isinstance(arg, list):
            _walk(arg, where, seen)
    if not isinstance(tp, type) or id(tp) in seen or not _has_fields(tp):
        return
    seen.add(id(tp))
    try:
        fields = typing.get_type_hints(tp, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable hints: msgspec reports those itself
        return
    for field, field_type in fields.items():
        foreign = _foreign_extra(field_type)
        if foreign is not None:
            raise RegistrationError(
                f"{where}: field {tp.__qualname__}.{field} is constrained with {foreign!r}, which "
                f"is not checked inside a {_kind(tp)}; write it as msgspec.Meta(...) there, "
                "or constrain a parameter of the tool itself"
            )
        _walk(field_type, where, seen)


def _has_fields(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) or typing.is_typeddict(cls) or issubclass(cls, msgspec.Struct)


def _kind(cls: type) -> str:
    return "TypedDict" if typing.is_typeddict(cls) else "msgspec Struct" if issubclass(cls, msgspec.Struct) else "dataclass"


def _foreign_extra(tp: Any) -> Any:
    """The first annotated_types/pydantic extra anywhere in ``tp`` (not inside classes)."""
    if get_origin(tp) is Annotated:
        base, *extras = get_args(tp)
        for extra in extras:
            module = type(extra).__module__.partition(".")[0]
            if module in ("annotated_types", "pydantic") or type(extra).__name__ in ("Doc", "DocInfo"):
                return extra
        return _foreign_extra(base)
    if get_origin(tp) is Literal:
        return None
    for arg in get_args(tp):
        found = _foreign_extra(arg)
        if found is not None:
            return found
    return None

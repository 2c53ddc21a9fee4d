"""JSON Schema checks for what servers send (``outputSchema``), loaded only when used.

Schemas are used as given: any 2020-12 keyword, no rewriting, and ``$ref`` to a
network URI is never fetched (basic/index.mdx, JSON Schema Usage): the validator's
registry has no retrieval, so such a reference fails to resolve instead.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import msgspec

__all__ = ["validate"]


@lru_cache(maxsize=256)
def _validator(schema_json: bytes) -> Any:
    import jsonschema  # type: ignore[import-untyped, unused-ignore]  # stubs are optional

    schema = msgspec.json.decode(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


def validate(instance: Any, schema: dict[str, Any]) -> str | None:
    """``None`` when ``instance`` matches ``schema``, else what is wrong, in one line."""
    try:
        validator = _validator(msgspec.json.encode(schema, order="sorted"))
        error = next(iter(validator.iter_errors(instance)), None)
    except Exception as exc:  # noqa: BLE001 - an unresolvable $ref, an unknown dialect, a broken schema
        return f"the schema cannot be used ({type(exc).__name__}: {exc})"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"at {where}: {error.message}"

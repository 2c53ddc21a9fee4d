"""Content blocks a tool or prompt returns, and the conversion of plain values to them.

A tool returns whatever is natural: ``str`` becomes a text block; ``Image``, ``Audio``,
``ResourceLink``, ``EmbeddedResource`` become their blocks; a list of those becomes
several blocks; ``ToolResult`` gives full control. Structured values (dataclasses,
TypedDicts, dicts, numbers, lists of data) become ``structuredContent`` and, for older
clients, the same JSON in a text block (server/tools.mdx, Structured Content).
"""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import msgspec

__all__ = [
    "Audio",
    "EmbeddedResource",
    "Image",
    "ResourceLink",
    "Text",
    "ToolResult",
    "is_content",
    "to_content_blocks",
]


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode()


def _with_extras(
    block: dict[str, Any], annotations: dict[str, Any] | None, meta: dict[str, Any] | None
) -> dict[str, Any]:
    if annotations:
        block["annotations"] = annotations
    if meta:
        block["_meta"] = meta
    return block


@dataclass(frozen=True)
class Text:
    text: str
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None

    def to_block(self) -> dict[str, Any]:
        return _with_extras({"type": "text", "text": self.text}, self.annotations, self.meta)


@dataclass(frozen=True)
class _Media:
    data: bytes | str  # raw bytes, or base64 text already encoded
    mime_type: str
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    kind = "image"

    @classmethod
    def from_file(cls, path: str | Path, mime_type: str | None = None, **kw: Any) -> Self:
        path = Path(path)
        mime = mime_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return cls(path.read_bytes(), mime, **kw)

    def to_block(self) -> dict[str, Any]:
        block = {"type": self.kind, "data": _b64(self.data), "mimeType": self.mime_type}
        return _with_extras(block, self.annotations, self.meta)


class Image(_Media):
    """An image content block; ``data`` is bytes (encoded for you) or base64 text."""

    kind = "image"


class Audio(_Media):
    """An audio content block; ``data`` is bytes (encoded for you) or base64 text."""

    kind = "audio"


@dataclass(frozen=True)
class ResourceLink:
    """A link to a resource the client may read (not necessarily listed)."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None

    def to_block(self) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        for key, value in (
            ("title", self.title),
            ("description", self.description),
            ("mimeType", self.mime_type),
            ("size", self.size),
        ):
            if value is not None:
                block[key] = value
        return _with_extras(block, self.annotations, self.meta)


@dataclass(frozen=True)
class EmbeddedResource:
    """A resource's contents inside a result: ``text`` or ``blob`` (bytes or base64)."""

    uri: str
    text: str | None = None
    blob: bytes | str | None = None
    mime_type: str | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None

    def contents(self) -> dict[str, Any]:
        contents: dict[str, Any] = {"uri": self.uri}
        if self.mime_type:
            contents["mimeType"] = self.mime_type
        if self.blob is not None:
            contents["blob"] = _b64(self.blob)
        else:
            contents["text"] = self.text or ""
        return contents

    def to_block(self) -> dict[str, Any]:
        block = {"type": "resource", "resource": self.contents()}
        return _with_extras(block, self.annotations, self.meta)


@dataclass(frozen=True)
class ToolResult:
    """Full control over a tool's result: blocks, structured content and ``isError``."""

    content: list[Any] = field(default_factory=list)
    structured: Any = msgspec.UNSET
    is_error: bool = False
    meta: dict[str, Any] | None = None


_CONTENT_TYPES = (Text, _Media, ResourceLink, EmbeddedResource)


def is_content(value: Any) -> bool:
    """Is ``value`` something that maps to content blocks rather than to data?"""
    if isinstance(value, (str, *_CONTENT_TYPES)):
        return True
    if isinstance(value, (list, tuple)) and value:
        return all(isinstance(v, (str, *_CONTENT_TYPES)) for v in value)
    return False


def to_content_blocks(value: Any) -> list[dict[str, Any]]:
    """Blocks for ``value`` (None → no blocks; data → its JSON as text)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if isinstance(value, _CONTENT_TYPES):
        return [value.to_block()]
    if isinstance(value, (list, tuple)) and is_content(value):
        blocks: list[dict[str, Any]] = []
        for item in value:
            blocks.extend(to_content_blocks(item))
        return blocks
    if isinstance(value, dict) and value.get("type") in _BLOCK_TYPES:
        return [value]  # a block written by hand as a dict
    if isinstance(value, (list, tuple)) and value and all(_is_block(v) for v in value):
        return list(value)  # blocks written by hand, or relayed as another server sent them
    return [{"type": "text", "text": msgspec.json.encode(to_jsonable(value)).decode()}]


_BLOCK_TYPES = frozenset({"text", "image", "audio", "resource_link", "resource"})


def _is_block(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in _BLOCK_TYPES


def to_jsonable(value: Any) -> Any:
    """Plain JSON data for dataclasses, Structs, TypedDicts, enums, pydantic models."""
    if hasattr(value, "model_dump") and callable(value.model_dump):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return msgspec.to_builtins(value)

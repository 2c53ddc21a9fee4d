"""Reading an OpenAPI document: a dict, a JSON or YAML file, or an http(s) URL.

A spec is input like any other: its size is bounded before it is parsed (a URL is read as
a stream and cut off), YAML is read with ``safe_load`` (no Python objects), and nesting too
deep for the parsers is refused by name rather than as a ``RecursionError``.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

from ...errors import RegistrationError

__all__ = ["MAX_SPEC_BYTES", "load_spec"]

MAX_SPEC_BYTES = 16 * 1024 * 1024


def load_spec(spec: dict[str, Any] | str | os.PathLike[str], timeout: float) -> dict[str, Any]:
    """The document as a dict, checked to be OpenAPI 3.x. Raises ``RegistrationError``."""
    if isinstance(spec, dict):
        document = spec
        where = "the spec dict"
    elif isinstance(spec, str) and spec.startswith(("http://", "https://")):
        document = _parse(_download(spec, timeout), spec)
        where = spec
    elif isinstance(spec, (str, os.PathLike)):
        path = Path(spec)
        try:
            size = path.stat().st_size
            if size > MAX_SPEC_BYTES:
                raise RegistrationError(f"OpenAPI spec {path} is {size:,} bytes, over the {MAX_SPEC_BYTES:,} limit")
            data = path.read_bytes()[: MAX_SPEC_BYTES + 1]
        except OSError as exc:
            raise RegistrationError(f"cannot read the OpenAPI spec {path}: {exc.strerror or exc}") from None
        document = _parse(data, str(path))
        where = str(path)
    else:
        raise RegistrationError(
            f"from_openapi takes the spec as a dict, a file path or an http(s) URL, not {type(spec).__name__}"
        )
    version = document.get("openapi") if isinstance(document, dict) else None
    if not isinstance(version, str) or not version.startswith("3."):
        swagger = isinstance(document, dict) and "swagger" in document
        hint = " (a Swagger 2.0 document: convert it to OpenAPI 3 first)" if swagger else ""
        raise RegistrationError(f"{where} is not an OpenAPI 3.x document: no 'openapi: 3.x' field{hint}")
    if not isinstance(document.get("paths", {}), dict):
        raise RegistrationError(f"{where}: 'paths' must be an object")
    return document


def _download(url: str, timeout: float) -> bytes:
    import httpx

    body = bytearray()
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False) as client:
            with client.stream("GET", url, headers={"Accept": "application/json, application/yaml"}) as answer:
                if answer.status_code != 200:
                    raise RegistrationError(f"fetching the OpenAPI spec {url} answered {answer.status_code}")
                for chunk in answer.iter_bytes():
                    body += chunk
                    if len(body) > MAX_SPEC_BYTES:
                        raise RegistrationError(f"the OpenAPI spec at {url} is over {MAX_SPEC_BYTES:,} bytes")
    except httpx.HTTPError as exc:
        raise RegistrationError(f"cannot fetch the OpenAPI spec {url}: {type(exc).__name__}") from None
    return bytes(body)


def _parse(data: bytes, where: str) -> dict[str, Any]:
    if len(data) > MAX_SPEC_BYTES:
        raise RegistrationError(f"OpenAPI spec {where} is over the {MAX_SPEC_BYTES:,} byte limit")
    text = data.decode("utf-8", errors="replace")
    if text.lstrip().startswith("{"):
        try:
            document = json.loads(text)
        except RecursionError:
            raise RegistrationError(f"OpenAPI spec {where} nests too deeply to read") from None
        except ValueError as exc:  # json.JSONDecodeError
            raise RegistrationError(f"OpenAPI spec {where} is not valid JSON: {exc}") from None
    else:
        try:
            # PyYAML ships no type stubs; safe_load builds only plain data, never objects.
            yaml: Any = importlib.import_module("yaml")
        except ImportError:
            raise RegistrationError(
                f"OpenAPI spec {where} is YAML, and PyYAML is not installed: pip install 'modelctx[openapi]' "
                "(or pass the spec as JSON or a dict)"
            ) from None
        try:
            document = yaml.safe_load(text)
        except RecursionError:
            raise RegistrationError(f"OpenAPI spec {where} nests too deeply to read") from None
        except Exception as exc:  # noqa: BLE001 - yaml.YAMLError and its kin
            raise RegistrationError(f"OpenAPI spec {where} is not valid YAML: {str(exc)[:300]}") from None
    if not isinstance(document, dict):
        raise RegistrationError(f"OpenAPI spec {where} is not an object")
    return document

"""RFC 6570 URI templates, as far as resource templates need them: match a URI.

Supported expressions: ``{var}`` (one path segment), ``{+var}`` and ``{#var}``
(reserved: may contain ``/``), ``{/var}`` and ``{.var}`` (prefixed), ``{?a,b}`` and
``{&a,b}`` (query parameters, each optional). Explode (``*``) on ``{/var*}`` and
``{+var*}`` matches several segments. Values come back percent-decoded.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote

__all__ = ["UriTemplate"]

_EXPR = re.compile(r"\{([+#./;?&]?)([^{}]+)\}")


class UriTemplate:
    def __init__(self, template: str) -> None:
        self.template = template
        self.variables: list[str] = []
        self._query_vars: list[str] = []
        pattern = ["^"]
        pos = 0
        for match in _EXPR.finditer(template):
            pattern.append(re.escape(template[pos : match.start()]))
            pos = match.end()
            op, names = match.group(1), match.group(2)
            parts = [n.strip() for n in names.split(",")]
            clean = [p.rstrip("*").split(":")[0] for p in parts]
            explode = any(p.endswith("*") for p in parts)
            if op in ("?", "&"):
                self._query_vars.extend(clean)
                self.variables.extend(clean)
                pattern.append(r"(?:[?&](?P<__query>[^#]*))?")
                continue
            for index, name in enumerate(clean):
                if not name.isidentifier():
                    raise ValueError(f"URI template {template!r}: variable {name!r} is not a name")
                self.variables.append(name)
                sep = {"": ",", "+": ",", "#": ",", "/": "/", ".": "."}.get(op, ",")
                prefix = {"#": "#", "/": "/", ".": r"\."}.get(op, "") if index == 0 else re.escape(sep)
                if op in ("+", "#") or (explode and op == "/"):
                    body = r".+?" if op in ("+", "#") else r"[^?#]+?"
                else:
                    body = r"[^/?#,.]+" if op == "." else r"[^/?#,]+"
                pattern.append(f"{prefix}(?P<{name}>{body})")
        pattern.append(re.escape(template[pos:]))
        pattern.append("$")
        self._regex = re.compile("".join(pattern))

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` if it fits the template, else ``None``."""
        found = self._regex.match(uri)
        if found is None:
            return None
        values = {
            k: unquote(v) for k, v in found.groupdict().items() if v is not None and k != "__query"
        }
        query = found.groupdict().get("__query")
        if query:
            for key, value in parse_qsl(query, keep_blank_values=True):
                if key in self._query_vars:
                    values[key] = value
        return values

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"

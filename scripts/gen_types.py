#!/usr/bin/env python3
"""Generate msgspec wire types from the MCP JSON schemas.

Usage::

    python scripts/gen_types.py [--spec-dir DIR] [--out-dir DIR]

Reads ``schema-<revision>.json`` for every revision in ``REVISIONS`` from the
spec folder (default: ``<repo>/../shared/spec``, or ``$MODELCTX_SPEC_DIR``)
and writes one module per revision, ``v<revision with underscores>.py``, to
the output folder (default: ``src/modelctx/protocol/types``).

Only the standard library is used; the output depends only on the schema
files, so running the generator twice gives byte-identical modules.

Mapping rules (JSON Schema -> Python):

* object with ``properties`` -> ``msgspec.Struct`` (kw_only, omit_defaults,
  frozen).  Wire names that are not valid snake_case identifiers are mapped
  with ``rename`` (``inputSchema`` -> ``input_schema``, ``_meta`` -> ``meta``,
  ``$schema`` -> ``schema``).  Optional fields are ``T | msgspec.UnsetType``
  with default ``msgspec.UNSET``, so "absent" differs from ``None``.
* object that is open (``additionalProperties`` other than ``false``, or a
  ``*MetaObject`` definition, whose TypeScript index signature the JSON export
  drops) or that has no properties -> ``dict[str, T]``.  A Struct would
  silently drop the extra keys.
* ``allOf`` -> properties merged into one Struct (open only if every part is).
* ``const``/``enum`` -> ``Literal[...]``; ``anyOf``/``oneOf`` -> ``X | Y``.
* Several Structs in one union need a msgspec tag: when every member has a
  required string ``const`` property with distinct values (``type``,
  ``method``, ...), that property becomes the Struct's ``tag_field``/``tag``
  (exposed as a ``ClassVar`` so ``obj.type`` still works).  Otherwise the
  union falls back to ``dict[str, Any]`` (or ``Any``) with a comment.
  Structs with a required ``type``/``method`` const are tagged even outside
  unions, so the constant is filled in on encode.
* Recursive aliases (``JSONValue``/``JSONObject``/``JSONArray``) -> ``Any``,
  ``dict[str, Any]``, ``list[Any]``.
* ``number`` -> ``int | float`` (keeps integers exact on a round trip).
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REVISIONS = ("2026-07-28", "2025-11-25", "2025-06-18")

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "src" / "modelctx" / "protocol" / "types"

# Names used inside annotations; a field with one of these names would shadow
# it while msgspec evaluates the (string) annotations in the class namespace.
_RESERVED_ATTRS = {
    "Any", "ClassVar", "Literal", "msgspec", "str", "int", "float", "bool",
    "dict", "list", "None",
}
# Preferred tag fields, in order, when several const properties discriminate.
_TAG_PREFERENCE = ("type", "method")
# Structs outside any union get tagged only on these const properties.
_AUTO_TAG_FIELDS = ("method", "type")
# Properties holding arbitrary JSON Schema documents: always a dict, even where
# the schema lists a few keys (a Struct would drop "$defs", "description" ...).
_JSON_SCHEMA_PROPERTIES = ("inputSchema", "outputSchema")


def default_spec_dir() -> Path:
    rel = REPO_ROOT.parent / "shared" / "spec"
    if rel.is_dir():
        return rel
    env = os.environ.get("MODELCTX_SPEC_DIR")
    if env:
        return Path(env)
    return rel


def module_name(revision: str) -> str:
    return "v" + revision.replace("-", "_")


# --------------------------------------------------------------------------
# Small helpers


def first_paragraph(text: str | None) -> str:
    if not text:
        return ""
    para = re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0]
    return "\n".join(line.rstrip() for line in para.splitlines()).strip()


def snake_case(wire: str) -> str:
    s = re.sub(r"[^0-9A-Za-z]+", "_", wire)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = s.lower().strip("_")
    s = re.sub(r"_+", "_", s)
    if not s:
        s = "field"
    if s[0].isdigit():
        s = "f_" + s
    if keyword.iskeyword(s) or s in _RESERVED_ATTRS:
        s += "_"
    return s


def pascal_case(wire: str) -> str:
    parts = re.split(r"[^0-9A-Za-z]+", wire)
    out = "".join(p[:1].upper() + p[1:] for p in parts if p)
    return out or "Anon"


def py_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return "None"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value)


def docstring(text: str, indent: str) -> list[str]:
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = text.splitlines() or [""]
    if text.endswith('"'):
        lines[-1] += " "
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    out = [f'{indent}"""{lines[0]}']
    out += [f"{indent}{ln}" if ln else "" for ln in lines[1:]]
    out.append(f'{indent}"""')
    return out


def comment(text: str, indent: str = "") -> list[str]:
    return [f"{indent}# {ln}".rstrip() for ln in text.splitlines()]


# --------------------------------------------------------------------------
# Intermediate representation


@dataclass
class Field:
    wire: str
    attr: str
    type_expr: str
    required: bool


@dataclass
class StructSpec:
    name: str
    doc: str
    schema: dict
    fields: list[Field] = field(default_factory=list)
    tag_field: str | None = None
    tag_value: Any = None
    notes: list[str] = field(default_factory=list)
    parent: str | None = None  # for inline (hoisted) structs: schema path
    owner: str | None = None  # for inline structs: the Struct that uses it


@dataclass
class AliasSpec:
    name: str
    expr: str
    doc: str
    deps: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


class Generator:
    def __init__(self, schema: dict, source_name: str) -> None:
        self.source_name = source_name
        if "$defs" in schema:
            self.defs: dict[str, dict] = schema["$defs"]
            self.ref_prefix = "#/$defs/"
        else:
            self.defs = schema["definitions"]
            self.ref_prefix = "#/definitions/"
        self.structs: dict[str, StructSpec] = {}
        self.struct_order: list[str] = []
        self.aliases: dict[str, AliasSpec] = {}
        self.used_names: set[str] = set(self.defs)
        self.union_fallbacks: list[str] = []
        self._owner: str | None = None  # Struct whose fields are being rendered
        self._alias_cycle: set[str] = self._find_alias_cycles()

    # -- schema navigation --------------------------------------------------

    def ref_name(self, ref: str) -> str:
        if not ref.startswith(self.ref_prefix):
            raise ValueError(f"unsupported $ref {ref!r}")
        return ref[len(self.ref_prefix):]

    def merged_object(self, node: dict) -> dict | None:
        """Flatten ``$ref``/``allOf`` into one object schema, or None."""
        if "$ref" in node and len(set(node) - {"$ref", "description"}) == 0:
            return self.merged_object(self.defs[self.ref_name(node["$ref"])])
        if "allOf" in node:
            props: dict = {}
            required: list[str] = []
            open_parts = []
            for part in node["allOf"]:
                m = self.merged_object(part)
                if m is None:
                    return None
                for k, v in m.get("properties", {}).items():
                    props[k] = self._merge_prop(props.get(k), v)
                required += [r for r in m.get("required", []) if r not in required]
                open_parts.append(self.is_open(m) or not m.get("properties"))
            merged = {"type": "object", "properties": props, "required": required}
            if open_parts and all(open_parts):
                merged["additionalProperties"] = {}
            if "description" in node:
                merged["description"] = node["description"]
            return merged
        if node.get("type") == "object" or "properties" in node:
            return node
        return None

    def _merge_prop(self, old: dict | None, new: dict) -> dict:
        if old is None:
            return new
        # A narrowing override (``{"const": -32020, "type": "integer"}`` on top
        # of ``Error.code``) wins; keep the base description.
        merged = dict(new)
        if "description" not in merged and "description" in old:
            merged["description"] = old["description"]
        return merged

    def is_open(self, obj: dict, name: str | None = None) -> bool:
        if name is not None and name.endswith("MetaObject"):
            return True
        ap = obj.get("additionalProperties", False)
        return ap is not False

    def struct_candidate(self, obj: dict, name: str | None = None) -> bool:
        return bool(obj.get("properties")) and not self.is_open(obj, name)

    def def_is_struct(self, name: str) -> bool:
        d = self.defs[name]
        if "$ref" in d:
            return False
        m = self.merged_object(d)
        return m is not None and self.struct_candidate(m, name)

    def _find_alias_cycles(self) -> set[str]:
        """Definitions that are not Structs and refer to themselves through
        other non-Struct definitions (JSONValue <-> JSONObject ...)."""
        graph: dict[str, set[str]] = {}
        for name, d in self.defs.items():
            if self.def_is_struct(name):
                continue
            refs: set[str] = set()
            self._collect_refs(d, refs)
            graph[name] = {r for r in refs if r in self.defs and not self.def_is_struct(r)}
        cyclic: set[str] = set()
        for start in graph:
            stack, seen = list(graph[start]), set()
            while stack:
                n = stack.pop()
                if n == start:
                    cyclic.add(start)
                    break
                if n in seen:
                    continue
                seen.add(n)
                stack.extend(graph.get(n, ()))
        return cyclic

    def _collect_refs(self, node: Any, out: set[str]) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                out.add(self.ref_name(node["$ref"]))
            for k, v in node.items():
                if k == "properties" and isinstance(v, dict):
                    for pv in v.values():
                        self._collect_refs(pv, out)
                elif k != "$ref":
                    self._collect_refs(v, out)
        elif isinstance(node, list):
            for x in node:
                self._collect_refs(x, out)

    # -- naming --------------------------------------------------------------

    def fresh_name(self, base: str) -> str:
        name = base
        i = 2
        while name in self.used_names:
            name = f"{base}{i}"
            i += 1
        self.used_names.add(name)
        return name

    # -- building ------------------------------------------------------------

    def build(self) -> None:
        # Pass 1: create every Struct spec (defs first, so names are stable).
        for name, d in self.defs.items():
            if self.def_is_struct(name):
                m = self.merged_object(d)
                assert m is not None
                self.add_struct(name, m, d.get("description"))
        # Pass 2: field types of Structs (may hoist inline Structs, which are
        # appended to struct_order and processed by this same loop).
        i = 0
        while i < len(self.struct_order):
            self.build_fields(self.structs[self.struct_order[i]])
            i += 1
        # Pass 3: aliases for the remaining definitions.
        for name, d in self.defs.items():
            if name in self.structs:
                continue
            deps: set[str] = set()
            notes: list[str] = []
            self._owner = None
            expr = self.render_alias_def(name, d, deps, notes)
            self.aliases[name] = AliasSpec(
                name, expr, first_paragraph(d.get("description")), deps, notes
            )
        # Inline structs hoisted while rendering aliases.
        while i < len(self.struct_order):
            self.build_fields(self.structs[self.struct_order[i]])
            i += 1
        # Pass 4: convenience tags outside unions.
        for sname in self.struct_order:
            spec = self.structs[sname]
            if spec.tag_field is not None:
                continue
            consts = self.string_consts(spec)
            for fname in _AUTO_TAG_FIELDS:
                if fname in consts:
                    spec.tag_field, spec.tag_value = fname, consts[fname]
                    break

    def add_struct(self, name: str, obj: dict, description: str | None,
                   parent: str | None = None) -> StructSpec:
        spec = StructSpec(name, first_paragraph(description or obj.get("description")),
                          obj, parent=parent)
        self.structs[name] = spec
        self.struct_order.append(name)
        return spec

    def build_fields(self, spec: StructSpec) -> None:
        props: dict = spec.schema.get("properties", {})
        required = set(spec.schema.get("required", []))
        attrs: set[str] = set()
        for wire, prop in props.items():
            attr = snake_case(wire)
            while attr in attrs:
                attr += "_"
            attrs.add(attr)
            hint = spec.name + pascal_case(wire)
            self._owner = spec.name
            where = f"{spec.name}.{wire}"
            if wire in _JSON_SCHEMA_PROPERTIES and self.merged_object(prop) is not None:
                expr = "dict[str, Any]"
                spec.notes.append(f"{where}: a JSON Schema document, kept as a dict.")
            else:
                expr = self.render(prop, hint, set(), spec.notes, where)
            spec.fields.append(Field(wire, attr, expr, wire in required))

    # -- type rendering -------------------------------------------------------

    def render_alias_def(self, name: str, d: dict, deps: set[str], notes: list[str]) -> str:
        if name in self._alias_cycle:
            kind = d.get("type")
            if kind == "object":
                expr = "dict[str, Any]"
            elif kind == "array":
                expr = "list[Any]"
            else:
                expr = "Any"
            notes.append(
                f"Recursive JSON type; msgspec cannot express recursive aliases on "
                f"Python 3.11, so this is {expr} (any JSON decodes)."
            )
            return expr
        m = self.merged_object(d) if "$ref" not in d else None
        if m is not None and m.get("properties") and self.is_open(m, name):
            notes.append(
                "Open object (extra keys allowed); known keys: "
                + ", ".join(sorted(m["properties"])) + "."
            )
        return self.render(d, name, deps, notes, name, top=True)

    def render(self, node: Any, hint: str, deps: set[str], notes: list[str],
               where: str, top: bool = False) -> str:
        if node is True or node == {} or node is None:
            return "Any"
        if not isinstance(node, dict):
            return "Any"
        if "$ref" in node:
            target = self.ref_name(node["$ref"])
            deps.add(target)
            return target
        if "const" in node:
            return f"Literal[{py_literal(node['const'])}]"
        if "enum" in node:
            return "Literal[" + ", ".join(py_literal(v) for v in node["enum"]) + "]"
        if "anyOf" in node or "oneOf" in node:
            return self.render_union(node.get("anyOf") or node.get("oneOf"), hint,
                                     deps, notes, where)
        if "allOf" in node:
            m = self.merged_object(node)
            if m is None:
                notes.append(f"{where}: allOf of non-objects; typed as Any.")
                return "Any"
            node = m
        t = node.get("type")
        if isinstance(t, list):
            parts = []
            for one in t:
                sub = dict(node)
                sub["type"] = one
                parts.append(self.render(sub, hint, deps, notes, where))
            return self.join_union(parts)
        if t == "string":
            return "str"
        if t == "integer":
            return "int"
        if t == "number":
            return "int | float"
        if t == "boolean":
            return "bool"
        if t == "null":
            return "None"
        if t == "array":
            items = node.get("items")
            if isinstance(items, list):  # tuple form (draft-07)
                return "list[Any]"
            return f"list[{self.render(items, hint + 'Item', deps, notes, where + '[]')}]"
        if t == "object" or "properties" in node or "additionalProperties" in node:
            if self.struct_candidate(node) and not top:
                name = self.fresh_name(hint)
                spec = self.add_struct(name, node, node.get("description"), parent=where)
                spec.owner = self._owner
                deps.add(name)
                return name
            if node.get("properties") and not top:
                notes.append(
                    f"{where}: open object (extra keys allowed), typed as a dict; "
                    "known keys: " + ", ".join(sorted(node["properties"])) + "."
                )
            ap = node.get("additionalProperties", True)
            if ap is True or ap == {} or ap is False:
                return "dict[str, Any]"
            return f"dict[str, {self.render(ap, hint + 'Value', deps, notes, where + '{}')}]"
        return "Any"

    @staticmethod
    def join_union(parts: list[str]) -> str:
        seen: list[str] = []
        for p in parts:
            if p not in seen:
                seen.append(p)
        if "Any" in seen:
            return "Any"
        return " | ".join(seen)

    def flatten_union(self, members: list) -> list:
        """Expand ``$ref`` members that point at union definitions."""
        out = []
        for m in members:
            if isinstance(m, dict) and "$ref" in m and len(m) == 1:
                target = self.defs[self.ref_name(m["$ref"])]
                inner = target.get("anyOf") or target.get("oneOf")
                if inner is not None and self.ref_name(m["$ref"]) not in self._alias_cycle:
                    out.extend(self.flatten_union(inner))
                    continue
            out.append(m)
        return out

    def render_union(self, members: list, hint: str, deps: set[str], notes: list[str],
                     where: str) -> str:
        members = self.flatten_union(members)
        struct_members: list[str] = []
        others: list[dict] = []
        for m in members:
            if isinstance(m, dict) and "$ref" in m and self.def_is_struct(self.ref_name(m["$ref"])):
                struct_members.append(self.ref_name(m["$ref"]))
            else:
                others.append(m)  # scalars, arrays, open/inline objects, dict aliases
        object_like_others = [
            m for m in others if isinstance(m, dict) and self.merged_object(m) is not None
        ]
        if len(struct_members) <= 1 and len(struct_members) + len(object_like_others) <= 1:
            parts = [self.render(m, hint, deps, notes, where) for m in members]
            return self.join_union(parts)
        if struct_members and not object_like_others:
            tag = self.choose_tag(struct_members)
            if tag is not None:
                for s in struct_members:
                    spec = self.structs[s]
                    spec.tag_field, spec.tag_value = tag, self.string_consts(spec)[tag]
                parts = [self.render(m, hint, deps, notes, where) for m in members]
                return self.join_union(parts)
        # Fallback: no discriminator msgspec can use.
        names = ", ".join(
            self.ref_name(m["$ref"]) if isinstance(m, dict) and "$ref" in m
            else f"<inline {m.get('type', 'schema') if isinstance(m, dict) else 'schema'}>"
            for m in members
        )
        arrays = [m for m in others if isinstance(m, dict) and m.get("type") == "array"]
        scalars = [m for m in others if m not in object_like_others and m not in arrays]
        fallback = "dict[str, Any]" if not arrays and not scalars else "Any"
        notes.append(
            f"{where}: union of {names} has no tag msgspec can use "
            f"(no shared required const property); typed as {fallback}."
        )
        self.union_fallbacks.append(where)
        return fallback

    @staticmethod
    def string_consts(spec: StructSpec) -> dict[str, str]:
        """Required properties of a Struct that are string constants."""
        required = set(spec.schema.get("required", []))
        return {
            wire: prop["const"]
            for wire, prop in spec.schema.get("properties", {}).items()
            if wire in required and isinstance(prop, dict)
            and isinstance(prop.get("const"), str)
        }

    def choose_tag(self, struct_names: list[str]) -> str | None:
        specs = [self.structs[s] for s in struct_names]
        already = {s.tag_field for s in specs if s.tag_field is not None}
        if len(already) > 1:
            return None
        consts = [self.string_consts(spec) for spec in specs]
        common = set(consts[0]).intersection(*consts[1:])
        candidates = [
            c for c in sorted(common)
            if len({cs[c] for cs in consts}) == len(consts)
        ]
        if already:
            (a,) = already
            return a if a in candidates else None
        for pref in _TAG_PREFERENCE:
            if pref in candidates:
                return pref
        return candidates[0] if candidates else None

    # -- emitting -------------------------------------------------------------

    def emit(self, revision: str) -> str:
        out: list[str] = [
            f"# Generated by scripts/gen_types.py from {self.source_name}; do not edit.",
            f'"""MCP wire types for protocol revision {revision}.',
            "",
            "One msgspec Struct per object definition of the JSON schema (frozen,",
            "keyword-only; optional fields default to ``msgspec.UNSET`` so an absent",
            "field differs from ``null``).  Tagged Structs carry their discriminating",
            "constant (``type``/``method``) as ``tag_field``: it is written on encode",
            "and readable as a class attribute.  Unions that msgspec cannot tell apart",
            "and open objects are plain ``dict[str, Any]``; see the comments.",
            '"""',
            "",
            "from __future__ import annotations",
            "",
            "from typing import Any, ClassVar, Literal",
            "",
            "import msgspec",
            "",
        ]
        # Aliases that do not depend on Structs go first, the rest last, each
        # group in dependency order.
        struct_names = set(self.structs)

        def depends_on_struct(name: str, seen: set[str]) -> bool:
            if name in seen:
                return False
            seen.add(name)
            for d in self.aliases[name].deps:
                if d in struct_names:
                    return True
                if d in self.aliases and depends_on_struct(d, seen):
                    return True
            return False

        early = [n for n in self.aliases if not depends_on_struct(n, set())]
        late = [n for n in self.aliases if n not in early]
        out += ["", "# " + "-" * 74, "# Scalar and container aliases", ""]
        for name in self.topo(early):
            out += self.emit_alias(self.aliases[name])
        out += ["", "# " + "-" * 74, "# Structs (inline objects come right before their user)", ""]
        owned: dict[str | None, list[str]] = {}
        for name in self.struct_order:
            owned.setdefault(self.structs[name].owner, []).append(name)

        def emit_with_children(name: str) -> None:
            for child in owned.get(name, []):
                emit_with_children(child)
            out.extend(self.emit_struct(self.structs[name]))

        for name in owned.get(None, []):
            emit_with_children(name)
        out += ["# " + "-" * 74, "# Unions and aliases of Structs", ""]
        for name in self.topo(late):
            out += self.emit_alias(self.aliases[name])
        while out and out[-1] == "":
            out.pop()
        return "\n".join(out) + "\n"

    def topo(self, names: list[str]) -> list[str]:
        pending = set(names)
        done: list[str] = []
        visiting: set[str] = set()

        def visit(n: str) -> None:
            if n not in pending or n in done:
                return
            if n in visiting:
                return
            visiting.add(n)
            for d in sorted(self.aliases[n].deps):
                visit(d)
            done.append(n)

        for n in names:
            visit(n)
        return done

    def emit_alias(self, spec: AliasSpec) -> list[str]:
        lines: list[str] = []
        if spec.doc:
            lines += comment(spec.doc)
        for note in spec.notes:
            lines += comment("NOTE: " + note)
        line = f"{spec.name} = {spec.expr}"
        parts = spec.expr.split(" | ")
        if len(line) > 88 and len(parts) > 1 and all("[" not in p for p in parts):
            lines.append(f"{spec.name} = (")
            lines.append(f"    {parts[0]}")
            lines += [f"    | {p}" for p in parts[1:]]
            lines.append(")")
        else:
            lines.append(line)
        lines.append("")
        return lines

    def emit_struct(self, spec: StructSpec) -> list[str]:
        rename = {f.attr: f.wire for f in spec.fields if f.attr != f.wire}
        kwargs = ["kw_only=True", "omit_defaults=True", "frozen=True"]
        if spec.tag_field is not None:
            kwargs.append(f"tag_field={json.dumps(spec.tag_field)}")
            kwargs.append(f"tag={py_literal(spec.tag_value)}")
        lines = [f"class {spec.name}(", "    msgspec.Struct,"]
        lines += [f"    {kw}," for kw in kwargs]
        if rename:
            items = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in rename.items()]
            one_line = f"    rename={{{', '.join(items)}}},"
            if len(one_line) <= 88:
                lines.append(one_line)
            else:
                lines.append("    rename={")
                lines += [f"        {item}," for item in items]
                lines.append("    },")
        lines.append("):")
        doc = spec.doc or (f"Inline object at ``{spec.parent}``." if spec.parent else spec.name)
        lines += docstring(doc, "    ")
        for note in spec.notes:
            lines += comment("NOTE: " + note, "    ")
        lines.append("")
        for f in spec.fields:
            if spec.tag_field is not None and f.wire == spec.tag_field:
                lines.append(f"    {f.attr}: ClassVar[{f.type_expr}] = {py_literal(spec.tag_value)}")
            elif f.required:
                lines.append(f"    {f.attr}: {f.type_expr}")
            else:
                lines.append(f"    {f.attr}: {f.type_expr} | msgspec.UnsetType = msgspec.UNSET")
        lines += ["", ""]
        return lines


def generate(schema_path: Path, revision: str) -> tuple[str, Generator]:
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    gen = Generator(schema, schema_path.name)
    gen.build()
    return gen.emit(revision), gen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec-dir", type=Path, default=None)
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    spec_dir: Path = args.spec_dir or default_spec_dir()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for revision in REVISIONS:
        src = spec_dir / f"schema-{revision}.json"
        text, gen = generate(src, revision)
        dest = args.out_dir / f"{module_name(revision)}.py"
        dest.write_text(text, encoding="utf-8", newline="\n")
        if not args.quiet:
            print(
                f"{dest}: {len(gen.structs)} Structs, {len(gen.aliases)} aliases, "
                f"{len(gen.union_fallbacks)} untagged unions",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

// Forms built from a JSON Schema (a tool's inputSchema, an elicitation's requestedSchema).
// buildForm(schema) returns {element, read}: read() gives the value to send, or throws a
// FormError after marking every field that is missing or malformed.

import { el } from "./render.js";

export class FormError extends Error {}

// Local references only (#/$defs/X, #/definitions/X): what generated schemas use.
function resolve(schema, root) {
  let seen = 0;
  while (schema && typeof schema.$ref === "string" && schema.$ref.startsWith("#/") && seen++ < 32) {
    let target = root;
    for (const part of schema.$ref.slice(2).split("/")) target = target?.[part.replace(/~1/g, "/").replace(/~0/g, "~")];
    // A referenced type's title names the type, not this field: keep the field's own.
    schema = { ...without(target || {}, "title"), ...Object.fromEntries(Object.entries(schema).filter(([k]) => k !== "$ref")) };
  }
  // Optional[X] is anyOf [X, null]: show X, an empty field means "leave it out".
  if (schema && Array.isArray(schema.anyOf)) {
    const options = schema.anyOf.filter((s) => s.type !== "null");
    if (options.length === 1) schema = { ...resolve(options[0], root), ...without(schema, "anyOf") };
  }
  return schema || {};
}

function without(object, key) {
  const copy = { ...object };
  delete copy[key];
  return copy;
}

function typeOf(schema) {
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  if (type) return type;
  if (schema.properties) return "object";
  if (Array.isArray(schema.enum) || Array.isArray(schema.oneOf)) return "enum";
  return "json";
}

function choices(schema) {
  if (Array.isArray(schema.enum)) {
    const names = schema.enumNames || [];
    return schema.enum.map((value, i) => ({ value, title: names[i] ?? String(value) }));
  }
  const list = schema.oneOf || schema.anyOf;
  if (Array.isArray(list) && list.every((s) => "const" in s)) {
    return list.map((s) => ({ value: s.const, title: s.title ?? String(s.const) }));
  }
  return null;
}

function labelFor(name, schema, required) {
  const title = el("span", {}, el("span", { class: required ? "required" : "name", text: schema.title || name }));
  if (schema.description) title.append(" ", el("span", { class: "description", text: schema.description }));
  return title;
}

function fail(input, message) {
  input.classList.add("invalid");
  input.setCustomValidity?.(message);
  const note = el("div", { class: "field-error", text: message });
  input.after(note);
  throw new FormError(message);
}

function clear(input) {
  input.classList.remove("invalid");
  input.setCustomValidity?.("");
  if (input.nextElementSibling?.classList.contains("field-error")) input.nextElementSibling.remove();
}

const MISSING = Symbol("missing");

// One field: returns {element, read}; read() gives the value, MISSING when empty.
function field(name, schema, root, required, path) {
  schema = resolve(schema, root);
  const type = typeOf(schema);
  const id = "f-" + path.join("-");
  const options = choices(schema);
  if (type === "object" && schema.properties) return objectField(name, schema, root, required, path);
  let input;
  let read;
  if (options) {
    input = el("select", { id, name: path.join("."), required });
    if (!required || schema.default === undefined) input.append(el("option", { value: "", text: "—" }));
    options.forEach((choice, i) => input.append(el("option", { value: String(i), text: choice.title })));
    const initial = options.findIndex((c) => JSON.stringify(c.value) === JSON.stringify(schema.default));
    if (initial >= 0) input.value = String(initial);
    read = () => (input.value === "" ? MISSING : options[Number(input.value)].value);
  } else if (type === "boolean") {
    input = el("input", { id, type: "checkbox", name: path.join(".") });
    input.checked = schema.default === true;
    read = () => input.checked;
  } else if (type === "number" || type === "integer") {
    input = el("input", { id, type: "number", name: path.join("."), step: type === "integer" ? "1" : "any",
      min: schema.minimum, max: schema.maximum, required });
    if (schema.default !== undefined) input.value = String(schema.default);
    read = () => {
      if (input.value.trim() === "") return MISSING;
      const value = Number(input.value);
      if (!Number.isFinite(value)) fail(input, "not a number");
      if (type === "integer" && !Number.isInteger(value)) fail(input, "must be a whole number");
      return value;
    };
  } else if (type === "string") {
    const long = (schema.maxLength ?? 0) > 200 || schema.format === "textarea";
    input = el(long ? "textarea" : "input", { id, type: long ? undefined : "text", name: path.join("."),
      placeholder: schema.format, required });
    if (schema.default !== undefined) input.value = String(schema.default);
    read = () => (input.value === "" ? MISSING : input.value);
  } else {
    // Arrays and anything else: JSON text.
    input = el("textarea", { id, name: path.join("."), rows: 3, placeholder: type === "array" ? "[ … ] (JSON)" : "JSON",
      required });
    if (schema.default !== undefined) input.value = JSON.stringify(schema.default);
    read = () => {
      if (input.value.trim() === "") return MISSING;
      try { return JSON.parse(input.value); } catch (e) { return fail(input, "not valid JSON: " + e.message); }
    };
  }
  const label = el("label", { for: id }, labelFor(name, schema, required), input);
  return {
    element: label,
    read() {
      clear(input);
      const value = read();
      if (value === MISSING && required) fail(input, "required");
      return value;
    },
  };
}

function objectField(name, schema, root, required, path) {
  const set = el("fieldset", { "data-field": path.join(".") });
  if (name !== null) set.append(el("legend", {}, labelFor(name, schema, required)));
  const needed = new Set(schema.required || []);
  const children = Object.entries(schema.properties || {}).map(([key, sub]) => {
    const child = field(key, sub, root, needed.has(key), [...path, key]);
    set.append(child.element);
    return [key, child];
  });
  return {
    element: set,
    read() {
      const value = {};
      let first = null;
      for (const [key, child] of children) {
        try {
          const v = child.read();
          if (v !== MISSING) value[key] = v;
        } catch (e) {
          if (!(e instanceof FormError)) throw e;
          first ??= e;
        }
      }
      if (first) throw first;
      if (!required && name !== null && Object.keys(value).length === 0) return MISSING;
      return value;
    },
  };
}

export function buildForm(schema) {
  const root = schema || {};
  const top = objectField(null, { type: "object", properties: {}, ...resolve(root, root) }, root, true, ["arg"]);
  return {
    element: top.element,
    read() {
      const value = top.read();
      return value === MISSING ? {} : value;
    },
  };
}

// The inspector page: one event stream from the inspector process, a JSON API to act.
// Every URL is relative to the page's, so each request carries the access token in its path.

import { closeView, openView, toolUi } from "./apps.js";
import { buildForm, FormError } from "./form.js";
import { el, json, renderError, renderToolResult, renderReadResult, renderPromptResult } from "./render.js";

const state = { status: {}, lists: {}, selected: null, calls: 0 };
const $ = (id) => document.getElementById(id);

async function post(name, body = {}) {
  const response = await fetch(`api/${name}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const reply = await response.json().catch(() => ({ error: { kind: "local", message: `HTTP ${response.status}` } }));
  return reply;
}

function notice(text, level = "info") {
  const item = el("div", { "data-level": level, text });
  $("notices").prepend(item);
  while ($("notices").children.length > 5) $("notices").lastChild.remove();
  setTimeout(() => item.remove(), 8000);
}

// -- server and status --------------------------------------------------------------------
function showStatus(status) {
  state.status = status;
  const badge = $("status");
  badge.dataset.state = status.state;
  badge.textContent = status.state === "failed" ? "failed to connect" : status.state;
  const info = $("server-info");
  info.replaceChildren();
  const rows = [
    ["Server", status.serverInfo ? `${status.serverInfo.name} ${status.serverInfo.version ?? ""}` : "—"],
    ["Protocol version", status.protocolVersion ?? "—"],
    ["Era", status.era ?? "—"],
    ["Supported versions", (status.supportedVersions || []).join(", ") || "—"],
    ["Instructions", status.instructions ?? "—"],
  ];
  if (status.error) rows.push(["Error", status.error.message]);
  for (const [name, value] of rows) info.append(el("dt", { text: name }), el("dd", { "data-row": name, text: value }));
  $("capabilities").textContent = JSON.stringify(status.capabilities ?? {}, null, 2);
}

// -- lists ------------------------------------------------------------------------------------
const KINDS = {
  tools: { key: (item) => item.name, show: showTool },
  resources: { key: (item) => item.uri, show: showResource },
  resourceTemplates: { key: (item) => item.uriTemplate, show: showTemplate },
  prompts: { key: (item) => item.name, show: showPrompt },
};

function showLists(lists) {
  state.lists = lists;
  for (const [kind, spec] of Object.entries(KINDS)) {
    const list = $(kind);
    list.replaceChildren();
    const items = lists[kind] || [];
    if (items.length === 0) list.append(el("li", { class: "empty", text: "none" }));
    for (const item of items) {
      const key = spec.key(item);
      const button = el("button", { type: "button", "data-kind": kind, "data-key": key, text: item.title || item.name || key });
      if (state.selected && state.selected.kind === kind && state.selected.key === key) button.setAttribute("aria-current", "true");
      button.addEventListener("click", () => select(kind, key));
      list.append(el("li", {}, button));
    }
  }
  // Keep what is open when it still exists; the list changed under it otherwise.
  if (state.selected && !findItem(state.selected.kind, state.selected.key)) {
    $("detail").replaceChildren(el("p", { class: "hint", text: `${state.selected.key} is gone from the server's list.` }));
    state.selected = null;
  }
}

function findItem(kind, key) {
  return (state.lists[kind] || []).find((item) => KINDS[kind].key(item) === key);
}

async function select(kind, key) {
  await closeView();
  state.selected = { kind, key };
  document.querySelectorAll(".items button").forEach((b) =>
    b.toggleAttribute("aria-current", b.dataset.kind === kind && b.dataset.key === key));
  const item = findItem(kind, key);
  if (item) KINDS[kind].show(item);
}

function heading(item, kind) {
  const box = el("div", {}, el("h2", { text: `${item.title || item.name || item.uri || item.uriTemplate}` }));
  box.append(el("small", { text: kind }));
  if (item.description) box.append(el("p", { class: "description", text: item.description }));
  return box;
}

function resultArea() {
  return el("div", { class: "result", id: "result", "aria-live": "polite" });
}

function timing(ms) {
  return el("p", { class: "elapsed", text: `${ms} ms` });
}

async function readResource(uri) {
  const area = $("result") || $("detail").appendChild(resultArea());
  area.replaceChildren(el("p", { text: `reading ${uri} …` }));
  const reply = await post("read", { uri });
  area.replaceChildren(reply.error ? renderError(reply.error) : renderReadResult(reply.result, readResource));
  if (reply.ms !== undefined) area.append(timing(reply.ms));
}

function showTool(tool) {
  const form = buildForm(tool.inputSchema);
  const wrapper = el("form", { id: "tool-form", novalidate: true }, form.element,
    el("button", { type: "submit", id: "call", text: `Call ${tool.name}` }));
  const progress = el("div", { class: "progress", id: "progress" });
  const area = resultArea();
  const ui = toolUi(tool);
  const viewBox = ui ? el("div", { class: "app-view", id: "app-view" }) : "";
  wrapper.addEventListener("submit", async (event) => {
    event.preventDefault();
    let args;
    try {
      args = form.read();
    } catch (e) {
      if (e instanceof FormError) { area.replaceChildren(el("p", { class: "field-error", text: "Fix the marked fields." })); return; }
      throw e;
    }
    const callId = `c${++state.calls}`;
    progress.dataset.callId = callId;
    progress.replaceChildren();
    area.replaceChildren(el("p", { text: "calling …" }));
    // The view loads beside the call (ext-apps: rendered in parallel, fed input then result).
    const view = ui ? await openView({ post, notice, tool, args, container: viewBox }) : null;
    const reply = await post("call", { name: tool.name, arguments: args, callId });
    area.replaceChildren(reply.error ? renderError(reply.error) : renderToolResult(reply.result, readResource));
    if (reply.ms !== undefined) area.append(timing(reply.ms));
    if (view) reply.error ? view.toolCancelled(reply.error.message) : view.toolResult(reply.result);
  });
  const annotations = tool.annotations ? el("details", {}, el("summary", { text: "Annotations" }), json(tool.annotations)) : "";
  const schema = el("details", {}, el("summary", { text: "Input schema" }), json(tool.inputSchema));
  const uiNote = ui ? el("p", { class: "ui-note", text: `Has a view: ${ui} (shown when called)` }) : "";
  $("detail").replaceChildren(heading(tool, "tool"), uiNote, annotations, schema, wrapper, progress, viewBox, area);
}

function showProgress(event) {
  const progress = $("progress");
  if (!progress || progress.dataset.callId !== event.callId) return;
  const bar = el("progress", { value: event.progress, max: event.total ?? undefined });
  const words = `${event.progress}${event.total != null ? ` / ${event.total}` : ""}${event.message ? ` — ${event.message}` : ""}`;
  progress.replaceChildren(bar, " ", el("span", { class: "progress-text", text: words }));
}

function showResource(resource) {
  const button = el("button", { type: "button", id: "read", text: "Read" });
  button.addEventListener("click", () => readResource(resource.uri));
  $("detail").replaceChildren(heading(resource, "resource"), el("p", {}, el("code", { text: resource.uri })), button, resultArea());
}

function templateVariables(template) {
  const names = [];
  for (const [, body] of template.matchAll(/\{([^}]+)\}/g)) {
    for (const part of body.replace(/^[+#./;?&]/, "").split(",")) names.push(part.replace(/[:*].*$/, ""));
  }
  return [...new Set(names)];
}

function expand(template, values) {
  return template.replace(/\{([+#./;?&]?)([^}]+)\}/g, (_, op, body) => {
    const parts = body.split(",").map((p) => p.replace(/[:*].*$/, "")).filter((n) => values[n] !== undefined);
    const encode = op === "+" || op === "#" ? encodeURI : encodeURIComponent;
    if (op === "?" || op === "&") return parts.length ? op + parts.map((n) => `${n}=${encodeURIComponent(values[n])}`).join("&") : "";
    const joined = parts.map((n) => encode(values[n])).join(",");
    return joined ? (op === "+" ? "" : op) + joined : "";
  });
}

function showTemplate(template) {
  const properties = Object.fromEntries(templateVariables(template.uriTemplate).map((n) => [n, { type: "string" }]));
  const form = buildForm({ type: "object", properties, required: Object.keys(properties) });
  const wrapper = el("form", { novalidate: true }, form.element, el("button", { type: "submit", id: "read", text: "Read" }));
  wrapper.addEventListener("submit", (event) => {
    event.preventDefault();
    try { readResource(expand(template.uriTemplate, form.read())); } catch (e) { if (!(e instanceof FormError)) throw e; }
  });
  $("detail").replaceChildren(heading(template, "resource template"), el("p", {}, el("code", { text: template.uriTemplate })), wrapper, resultArea());
}

function showPrompt(prompt) {
  const args = prompt.arguments || [];
  const schema = {
    type: "object",
    properties: Object.fromEntries(args.map((a) => [a.name, { type: "string", title: a.title || a.name, description: a.description }])),
    required: args.filter((a) => a.required).map((a) => a.name),
  };
  const form = buildForm(schema);
  const area = resultArea();
  const wrapper = el("form", { novalidate: true }, form.element, el("button", { type: "submit", id: "get-prompt", text: "Get prompt" }));
  wrapper.addEventListener("submit", async (event) => {
    event.preventDefault();
    let values;
    try { values = form.read(); } catch (e) { if (e instanceof FormError) return; throw e; }
    const reply = await post("prompt", { name: prompt.name, arguments: values });
    area.replaceChildren(reply.error ? renderError(reply.error) : renderPromptResult(reply.result, readResource));
    if (reply.ms !== undefined) area.append(timing(reply.ms));
  });
  $("detail").replaceChildren(heading(prompt, "prompt"), wrapper, area);
}

// -- elicitation ----------------------------------------------------------------------------------
const questions = [];

function webUrl(text) {
  try {
    return ["http:", "https:"].includes(new URL(text).protocol);
  } catch {
    return false;
  }
}

function askNext() {
  const dialog = $("elicitation");
  if (dialog.open || questions.length === 0) return;
  const question = questions[0];
  dialog.replaceChildren();
  dialog.dataset.id = question.id;
  dialog.dataset.mode = question.mode;
  dialog.append(el("h2", { text: "The server asks" }), el("p", { class: "message", text: question.message }));
  let form = null;
  if (question.mode === "url") {
    // Only an http(s) URL becomes a link: a server could name a javascript: or data: URL.
    const link = webUrl(question.url)
      ? el("a", { href: question.url, target: "_blank", rel: "noopener noreferrer", id: "elicitation-url", text: question.url })
      : el("code", { id: "elicitation-url", class: "refused", text: `${question.url} (not an http(s) URL: not opened)` });
    dialog.append(el("p", {}, link),
      el("p", { class: "description", text: "Open the link to continue there; accept once done, or decline." }));
  } else {
    form = buildForm(question.requestedSchema);
    dialog.append(el("form", { id: "elicitation-form", novalidate: true }, form.element));
  }
  const answer = async (action) => {
    let content;
    if (action === "accept" && form) {
      try { content = form.read(); } catch (e) { if (e instanceof FormError) return; throw e; }
    }
    await post("elicitation", { id: question.id, action, content });
  };
  const buttons = el("p", {});
  for (const action of ["accept", "decline", "cancel"]) {
    if (question.mode === "url" && action === "cancel") continue;
    const button = el("button", { type: "button", id: `elicitation-${action}`, text: action[0].toUpperCase() + action.slice(1) });
    button.addEventListener("click", () => answer(action));
    buttons.append(button, " ");
  }
  dialog.append(buttons);
  dialog.addEventListener("cancel", (event) => { event.preventDefault(); answer("cancel"); }, { once: true });
  dialog.showModal();
}

function questionDone(id) {
  const index = questions.findIndex((q) => q.id === id);
  if (index >= 0) questions.splice(index, 1);
  const dialog = $("elicitation");
  if (dialog.open && dialog.dataset.id === id) dialog.close();
  askNext();
}

// -- message log ------------------------------------------------------------------------------
function summary(message) {
  if (message.method) return message.id !== undefined ? `${message.method} #${message.id}` : message.method;
  return `${message.error ? "error" : "result"} #${message.id}`;
}

function logEntry(entry) {
  const m = entry.message;
  const line = el("li", { "data-direction": entry.direction, "data-method": m.method || "", "data-kind": m.method ? (m.id !== undefined ? "request" : "notification") : "response" });
  const head = el("summary", {},
    el("span", { class: "arrow", text: entry.direction === "out" ? "→ " : "← " }),
    el("span", { class: "at", text: `${entry.at_ms.toFixed(1)} ms ` }),
    el("span", { class: "what", text: summary(m) }));
  if (entry.elapsed_ms !== undefined) head.append(el("span", { class: "elapsed", text: ` (${entry.elapsed_ms} ms)` }));
  line.append(el("details", {}, head, json(m)));
  $("log").append(line);
  while ($("log").children.length > 1000) $("log").firstChild.remove();
}

// -- the event stream ----------------------------------------------------------------------------
function onEvent(event) {
  switch (event.type) {
    case "snapshot":
      $("log").replaceChildren();
      event.log.forEach(logEntry);
      showStatus(event.status);
      showLists(event.lists);
      questions.splice(0, questions.length, ...event.elicitations);
      if ($("elicitation").open) $("elicitation").close();
      askNext();
      break;
    case "status":
      if (event.status.state === "connecting") $("log").replaceChildren();
      showStatus(event.status);
      break;
    case "lists":
      showLists(event.lists);
      if (state.selected && event.changed.includes(state.selected.kind)) document.body.dataset.listsChanged = String(Date.now());
      break;
    case "message":
      logEntry(event.entry);
      break;
    case "progress":
      showProgress(event);
      break;
    case "elicitation":
      questions.push(event.elicitation);
      askNext();
      break;
    case "elicitation_done":
      questionDone(event.id);
      break;
    case "notice":
      notice(event.text, event.level);
      break;
  }
}

function connect() {
  const source = new EventSource("api/events");
  source.onmessage = (message) => onEvent(JSON.parse(message.data));
  source.onerror = () => notice("lost the inspector's event stream; retrying", "error");
}

$("reconnect").addEventListener("click", () => post("reconnect"));
$("clear-log").addEventListener("click", () => $("log").replaceChildren());
connect();

// MCP Apps (io.modelcontextprotocol/ui, ext-apps 2026-01-26): a tool's view in a sandboxed
// iframe, and the host's half of the postMessage JSON-RPC bridge.
//
// The iframe has sandbox="allow-scripts" and no allow-same-origin: its origin is opaque, so
// it cannot reach this page's DOM, storage or API. Its document comes from /apps/<id>
// (outside the access token) with a CSP the inspector builds from the view's _meta.ui.csp.
// A message counts only when its source is that iframe's window; what the view asks of the
// server goes through the inspector's app-call / app-read, which allow only tools of this
// server that the app may call (visibility "app").

import { el } from "./render.js";

const PROTOCOL = "2026-01-26";
const MAX_HEIGHT = 2000;
const TEARDOWN_WAIT_MS = 500;
const views = new Set();

export function toolUi(tool) {
  const uri = tool?._meta?.ui?.resourceUri ?? tool?._meta?.["ui/resourceUri"];
  return typeof uri === "string" && uri.startsWith("ui://") ? uri : null;
}

window.addEventListener("message", (event) => {
  for (const view of views) {
    if (event.source === view.frame.contentWindow) { view.receive(event.data); return; }
  }
});

class AppView {
  constructor(post, notice, tool, opened, args) {
    this.post = post;
    this.notice = notice;
    this.tool = tool;
    this.id = opened.view;
    this.approved = opened.csp || {};
    this.args = args;
    this.initialized = false;
    this.inputSent = false;
    this.pending = [];  // host notifications held until the view says it is initialized
    this.answers = new Map();
    this.nextId = 1;
    this.frame = el("iframe", {
      class: "mcp-app", sandbox: "allow-scripts", src: opened.src, title: `view of ${tool.name}`,
      referrerpolicy: "no-referrer", "data-uri": opened.uri, "data-border": String(opened.prefersBorder ?? ""),
    });
  }

  send(message) {
    // An opaque origin cannot be named as a target; the window itself is the address.
    this.frame.contentWindow?.postMessage({ jsonrpc: "2.0", ...message }, "*");
  }

  notify(method, params) {
    if (!this.initialized) { this.pending.push([method, params]); return; }
    if (method === "ui/notifications/tool-result" && !this.inputSent) this.toolInput();
    this.send({ method, params });
  }

  toolInput() {
    this.inputSent = true;
    this.send({ method: "ui/notifications/tool-input", params: { arguments: this.args } });
  }

  toolResult(result) { this.notify("ui/notifications/tool-result", result); }
  toolCancelled(reason) { this.notify("ui/notifications/tool-cancelled", { reason }); }

  async receive(message) {
    if (!message || typeof message !== "object" || message.jsonrpc !== "2.0") return;
    if (message.method === undefined) {  // an answer to a request of ours
      const waiting = this.answers.get(message.id);
      if (waiting) { this.answers.delete(message.id); waiting(message); }
      return;
    }
    if (message.id === undefined) { this.onNotification(message.method, message.params || {}); return; }
    let reply;
    try {
      reply = { result: await this.onRequest(message.method, message.params || {}) };
    } catch (error) {
      reply = { error: { code: error.code ?? -32603, message: String(error.message ?? error) } };
    }
    this.send({ id: message.id, ...reply });
  }

  onNotification(method, params) {
    switch (method) {
      case "ui/notifications/initialized":
        this.initialized = true;
        this.frame.dataset.state = "initialized";
        this.toolInput();
        for (const [m, p] of this.pending.splice(0)) this.notify(m, p);
        break;
      case "ui/notifications/size-changed":
        if (Number.isFinite(params.height)) {
          const height = Math.max(20, Math.min(MAX_HEIGHT, Math.ceil(params.height)));
          this.frame.style.height = `${height}px`;
          this.frame.dataset.height = String(height);
        }
        break;
      case "notifications/message":
        this.notice(`view of ${this.tool.name} (${params.level ?? "info"}): ${JSON.stringify(params.data)}`);
        break;
    }
  }

  async onRequest(method, params) {
    switch (method) {
      case "ui/initialize":
        return this.initializeResult();
      case "ping":
        return {};
      case "tools/call":
        return this.relay("app-call", { view: this.id, name: String(params.name), arguments: params.arguments ?? {} });
      case "resources/read":
        return this.relay("app-read", { view: this.id, uri: String(params.uri) });
      case "ui/open-link": {
        const url = String(params.url);
        if (!/^https?:\/\//i.test(url)) throw { code: -32602, message: "only http(s) links are opened" };
        if (!window.open(url, "_blank", "noopener,noreferrer")) throw { code: -32000, message: "the browser blocked the new tab" };
        return {};
      }
      case "ui/message":
      case "ui/update-model-context":
        // The inspector has no model: show what the view would have sent it.
        this.notice(`view of ${this.tool.name} sent ${method} (no model here): ${JSON.stringify(params).slice(0, 300)}`);
        return {};
      case "ui/request-display-mode":
        return { mode: "inline" };
      default:
        throw { code: -32601, message: `Method not found: ${method} (the inspector's views may use ui/initialize, tools/call, resources/read, ping, ui/*)` };
    }
  }

  async relay(api, body) {
    const reply = await this.post(api, body);
    if (reply.error) throw { code: reply.error.code ?? -32603, message: reply.error.message };
    return reply.result;
  }

  initializeResult() {
    const dark = window.matchMedia?.("(prefers-color-scheme: dark)").matches;
    return {
      protocolVersion: PROTOCOL,
      hostInfo: { name: "modelctx inspector", version: "1" },
      hostCapabilities: {
        serverTools: {}, serverResources: {}, logging: {}, openLinks: {},
        sandbox: { permissions: {}, csp: this.approved },
      },
      hostContext: {
        toolInfo: { tool: this.tool },
        theme: dark ? "dark" : "light",
        displayMode: "inline",
        availableDisplayModes: ["inline"],
        containerDimensions: { maxHeight: MAX_HEIGHT },
        locale: navigator.language,
        timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
        platform: "web",
      },
    };
  }

  // ui/resource-teardown, answered or not within a moment; then the frame goes.
  async teardown(reason) {
    if (this.initialized && this.frame.isConnected) {
      const id = `teardown-${this.nextId++}`;
      const answered = new Promise((resolve) => this.answers.set(id, resolve));
      this.send({ id, method: "ui/resource-teardown", params: { reason } });
      await Promise.race([answered, new Promise((resolve) => setTimeout(resolve, TEARDOWN_WAIT_MS))]);
    }
    views.delete(this);
    this.frame.remove();
  }
}

let current = null;

// Close the view on show (if any); called before the page shows something else.
export async function closeView(reason = "the inspector shows something else") {
  const view = current;
  current = null;
  if (view) await view.teardown(reason);
}

// Open the view of `tool` for a call with `args`, placed in `container`; null (with the
// reason shown in `container`) when it cannot be shown.
export async function openView({ post, notice, tool, args, container }) {
  await closeView("a new call");
  const opened = await post("view", { tool: tool.name });
  if (opened.error) {
    container.replaceChildren(el("p", { class: "field-error", text: `view not shown: ${opened.error.message}` }));
    return null;
  }
  const view = new AppView(post, notice, tool, opened, args);
  views.add(view);
  current = view;
  container.replaceChildren(el("p", { class: "hint", text: `${opened.uri} (MCP Apps view, sandboxed)` }), view.frame);
  return view;
}

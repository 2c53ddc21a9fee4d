"""A server with an MCP Apps view, for the apps tests (server, inspector, chat).

``forecast`` shows its result in the ``ui://weather/board`` view; ``refresh`` is callable
by the view only (visibility ["app"]); ``secret_plan`` by the model only, so a view that
asks the host for it must be refused. The view is a plain HTML page that speaks the
extension's postMessage JSON-RPC and writes what it sees into its own DOM, where the
browser tests read it.
"""

from modelctx import Server
from modelctx.server import UiCsp, UiResource

server = Server("weather-apps", version="1.0.0")

BOARD_HTML = """<!doctype html>
<html><head><meta charset="utf-8"><title>weather board</title></head>
<body>
<h1>weather board</h1>
<p id="phase">starting</p>
<p id="origin"></p>
<p id="parent-access"></p>
<p id="where"></p>
<p id="host"></p>
<p id="input"></p>
<p id="result"></p>
<button id="refresh">Refresh</button> <p id="refreshed"></p>
<button id="forbidden">Ask for the secret plan</button> <p id="forbidden-result"></p>
<button id="grow">Grow</button> <div id="spacer"></div>
<button id="fetch">Fetch</button> <p id="fetch-result"></p>
<script>
(async () => {
  const show = (id, text) => { document.getElementById(id).textContent = text; };
  let next = 1;
  const waiting = new Map();
  const request = (method, params) => new Promise((resolve, reject) => {
    const id = next++;
    waiting.set(id, { resolve, reject });
    parent.postMessage({ jsonrpc: "2.0", id, method, params }, "*");
  });
  const notify = (method, params) => parent.postMessage({ jsonrpc: "2.0", method, params }, "*");
  const sizeChanged = () => notify("ui/notifications/size-changed",
    { width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight });
  window.addEventListener("message", (event) => {
    if (event.source !== parent) return;
    const m = event.data;
    if (m.id !== undefined && m.method === undefined) {
      const w = waiting.get(m.id);
      waiting.delete(m.id);
      if (w) (m.error ? w.reject(m.error) : w.resolve(m.result));
      return;
    }
    if (m.method === "ui/notifications/tool-input") show("input", "input " + JSON.stringify(m.params.arguments));
    if (m.method === "ui/notifications/tool-result") {
      show("result", "result " + m.params.content.map((b) => b.text).join(" "));
      show("phase", "shown");
    }
    if (m.method === "ui/notifications/tool-cancelled") show("result", "cancelled " + m.params.reason);
    if (m.method === "ui/resource-teardown") parent.postMessage({ jsonrpc: "2.0", id: m.id, result: {} }, "*");
  });
  show("origin", "origin " + self.origin);
  try { show("parent-access", "parent readable: " + parent.document.title); }
  catch (e) { show("parent-access", "parent blocked"); }
  show("where", location.href.includes("/api/") ? "under the api" : "own path");
  document.getElementById("refresh").onclick = async () => {
    const answer = await request("tools/call", { name: "refresh", arguments: { city: "Oslo" } });
    show("refreshed", answer.content[0].text);
  };
  document.getElementById("forbidden").onclick = async () => {
    try { await request("tools/call", { name: "secret_plan", arguments: {} }); show("forbidden-result", "called"); }
    catch (e) { show("forbidden-result", "refused: " + e.message); }
  };
  document.getElementById("grow").onclick = () => {
    document.getElementById("spacer").style.height = "600px";
    sizeChanged();
  };
  document.getElementById("fetch").onclick = async () => {
    try { await fetch("https://example.com/"); show("fetch-result", "fetched"); }
    catch (e) { show("fetch-result", "fetch blocked"); }
  };
  const init = await request("ui/initialize",
    { appInfo: { name: "board", version: "1.0.0" }, appCapabilities: {}, protocolVersion: "2026-01-26" });
  show("host", "host " + init.hostInfo.name + " for " + init.hostContext.toolInfo.tool.name);
  notify("ui/notifications/initialized", {});
  show("phase", "initialized");
  sizeChanged();
})();
</script>
</body></html>
"""

board = UiResource(
    "ui://weather/board",
    html=BOARD_HTML,
    name="Weather board",
    description="The forecast as a board.",
    csp=UiCsp(connect_domains=["https://api.weather.example"]),
    prefers_border=True,
)


@server.tool(ui=board)
def forecast(city: str) -> str:
    """The forecast for a city (shown in the board where the host can)."""
    return f"sunny in {city}"


@server.tool(ui=board, ui_visibility=["app"])
def refresh(city: str) -> str:
    """Fresh numbers for the board; only the view calls it."""
    return f"refreshed {city}: 21 C"


@server.tool(ui_visibility=["model"])
def secret_plan() -> str:
    """For the model only: a view may not call it."""
    return "the plan"


# A view whose _meta a server wrote by hand, as a server other than modelctx may: a CSP
# "domain" carrying a directive of its own. The inspector must keep it out of its policy.
@server.resource("ui://weather/hostile", mime_type="text/html;profile=mcp-app")
def hostile_view() -> dict[str, object]:
    csp = {"connectDomains": ["https://ok.weather.example", "https://x.example; script-src *"]}
    return {"text": "<!doctype html><p id='hostile'>hostile view</p>", "_meta": {"ui": {"csp": csp}}}


@server.tool(ui="ui://weather/hostile")
def hostile() -> str:
    """A tool whose view declares a CSP domain with a directive in it."""
    return "hostile"

// How results look: content blocks, structured content, tool errors and JSON-RPC errors.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  node.append(...children);
  return node;
}

export function json(value) {
  return el("pre", { class: "json", text: JSON.stringify(value, null, 2) });
}

// A JSON-RPC error (the request failed) or a local failure (the inspector could not ask).
export function renderError(error) {
  const box = el("div", { class: "rpc-error", "data-kind": error.kind });
  if (error.kind === "jsonrpc") {
    box.append(el("strong", { text: `JSON-RPC error ${error.code}` }), el("p", { text: error.message }));
    if (error.data !== undefined && error.data !== null) box.append(json(error.data));
  } else {
    box.append(el("strong", { text: "Request failed" }), el("p", { text: error.message }));
  }
  return box;
}

function dataUrl(block) {
  return `data:${block.mimeType};base64,${block.data}`;
}

function resourceContents(contents, readResource) {
  const box = el("div", { class: "resource" }, el("code", { text: contents.uri }));
  if (contents.mimeType) box.append(" ", el("small", { text: contents.mimeType }));
  if (typeof contents.text === "string") box.append(el("pre", { text: contents.text }));
  else if (typeof contents.blob === "string") {
    const mime = contents.mimeType || "application/octet-stream";
    if (mime.startsWith("image/")) box.append(el("img", { src: `data:${mime};base64,${contents.blob}`, alt: contents.uri }));
    else if (mime.startsWith("audio/")) box.append(el("audio", { controls: true, src: `data:${mime};base64,${contents.blob}` }));
    else box.append(el("p", { text: `${contents.blob.length} base64 characters of ${mime}` }));
  }
  return box;
}

export function renderBlock(block, readResource) {
  switch (block.type) {
    case "text":
      return el("pre", { class: "text", text: block.text });
    case "image":
      return el("img", { class: "image", src: dataUrl(block), alt: "image result" });
    case "audio":
      return el("audio", { class: "audio", controls: true, src: dataUrl(block) });
    case "resource_link": {
      const open = el("button", { type: "button", text: "Read" });
      open.addEventListener("click", () => readResource(block.uri));
      return el("div", { class: "resource-link" }, "🔗 ", el("code", { text: block.uri }), " ",
        el("span", { text: block.name || "" }), " ", open);
    }
    case "resource":
      return resourceContents(block.resource, readResource);
    default:
      return json(block);
  }
}

export function renderToolResult(result, readResource) {
  const box = el("div", { class: result.isError ? "tool-error" : "tool-result" });
  if (result.isError) box.append(el("strong", { text: "Tool error (isError: true)" }));
  for (const block of result.content || []) box.append(renderBlock(block, readResource));
  if (result.structuredContent !== undefined) {
    box.append(el("h3", { text: "Structured content" }), json(result.structuredContent));
  }
  return box;
}

export function renderReadResult(result, readResource) {
  return el("div", { class: "read-result" }, ...(result.contents || []).map((c) => resourceContents(c, readResource)));
}

export function renderPromptResult(result, readResource) {
  const box = el("div", { class: "prompt-result" });
  if (result.description) box.append(el("p", { text: result.description }));
  for (const message of result.messages || []) {
    box.append(el("h3", { text: message.role }), renderBlock(message.content, readResource));
  }
  return box;
}

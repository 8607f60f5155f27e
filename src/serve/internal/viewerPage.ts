/**
 * The run viewer's page: one self-contained HTML document (inline CSS and script, nothing fetched from elsewhere),
 * reading the server's own routes — `GET /agents`, `GET /runs`, `POST /runs`, and a run's events from
 * `GET /runs/:id/events`, read with `fetch`. On a server with a token the page is opened once as `/?token=<token>`:
 * the server answers with an HttpOnly cookie and the page without the token, and the page's requests carry the cookie.
 * Model text is shown with `textContent`, never as HTML.
 */
export const page = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>valet runs</title>
<style>
  :root { --fg: #1d232a; --muted: #6a737d; --line: #e1e4e8; --accent: #0b5fff; --bad: #c62828; --ok: #1b7f3b; --warn: #a15c00; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: #f7f8fa; }
  header { padding: 10px 18px; background: #fff; border-bottom: 1px solid var(--line); display: flex; gap: 16px; align-items: center; }
  header h1 { font-size: 16px; margin: 0; }
  header form { display: flex; gap: 6px; margin-left: auto; }
  input, select, button { font: inherit; padding: 4px 8px; border: 1px solid var(--line); border-radius: 4px; background: #fff; }
  button { background: var(--accent); color: #fff; border-color: var(--accent); cursor: pointer; }
  main { display: grid; grid-template-columns: 320px 1fr; gap: 0; height: calc(100vh - 50px); }
  #runs { border-right: 1px solid var(--line); overflow: auto; background: #fff; }
  #runs a { display: block; padding: 8px 12px; border-bottom: 1px solid var(--line); color: inherit; text-decoration: none; }
  #runs a.selected { background: #eef3ff; }
  #runs .meta { color: var(--muted); font-size: 12px; }
  .status { font-size: 11px; padding: 1px 6px; border-radius: 8px; border: 1px solid currentColor; }
  .status.running { color: var(--accent); } .status.completed { color: var(--ok); } .status.failed { color: var(--bad); }
  .status.interrupted { color: var(--warn); }
  #detail { overflow: auto; padding: 14px 18px; }
  #detail h2 { font-size: 15px; margin: 0 0 6px; }
  .panels { display: grid; grid-template-columns: minmax(280px, 1fr) 2fr; gap: 16px; align-items: start; }
  section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
  section h3 { font-size: 13px; margin: 0 0 8px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
  ul.tree, ul.tree ul { list-style: none; margin: 0; padding-left: 16px; }
  ul.tree { padding-left: 0; }
  ul.tree li { margin: 3px 0; }
  .session { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
  .counts { color: var(--muted); font-size: 12px; }
  table { width: 100%; border-collapse: collapse; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
  td { border-top: 1px solid var(--line); padding: 3px 6px; vertical-align: top; }
  td.t { color: var(--muted); white-space: nowrap; text-align: right; }
  td.k { white-space: nowrap; font-weight: 600; }
  td.s { white-space: nowrap; color: var(--muted); }
  td.x { white-space: pre-wrap; word-break: break-word; }
  tr.error td { color: var(--bad); }
  #output { white-space: pre-wrap; margin-top: 10px; }
  .empty { color: var(--muted); padding: 20px; }
</style>
</head>
<body>
<header>
  <h1>valet runs</h1>
  <span id="note" class="counts"></span>
  <form id="start">
    <select id="agent" aria-label="agent"></select>
    <input id="input" placeholder="Ask the agent…" size="40" aria-label="input">
    <button type="submit">Start</button>
  </form>
</header>
<main>
  <nav id="runs"><div class="empty">No runs yet.</div></nav>
  <div id="detail"><div class="empty">Select a run, or start one.</div></div>
</main>
<script>
"use strict";
const el = (tag, props, ...children) => {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "class") node.className = value; else if (key === "text") node.textContent = value; else node.setAttribute(key, value);
  }
  for (const child of children) if (child !== undefined && child !== null) node.append(child);
  return node;
};
const api = (path, init) => fetch(path, { credentials: "same-origin", ...init });
const selected = () => (location.hash.match(/^#run=(.+)$/) || [])[1];
const clip = (text) => text.length > 240 ? text.slice(0, 237) + "…" : text;
const statusOf = (run) => run.status === "completed" && run.result && run.result.interrupted ? "interrupted" : run.status;

async function loadAgents() {
  const response = await api("agents");
  if (!response.ok) { document.getElementById("note").textContent = "GET /agents: " + response.status; return; }
  const { agents } = await response.json();
  const select = document.getElementById("agent");
  select.replaceChildren(...agents.map((agent) => el("option", { value: agent.name, text: agent.name + " (" + agent.architecture + ")" })));
}

async function loadRuns() {
  const response = await api("runs");
  if (!response.ok) return;
  const { runs } = await response.json();
  const nav = document.getElementById("runs");
  if (runs.length === 0) { nav.replaceChildren(el("div", { class: "empty", text: "No runs yet." })); return; }
  nav.replaceChildren(...runs.map((run) => el("a", { href: "#run=" + run.runId, class: run.runId === selected() ? "selected" : "", "data-run": run.runId },
    el("div", {}, el("strong", { text: run.agent }), " ", el("span", { class: "status " + statusOf(run), text: statusOf(run) })),
    el("div", { class: "meta", text: new Date(run.createdAt).toLocaleTimeString() + " · " + run.events + " events" }),
    el("div", { class: "meta", text: run.inputPreview.length > 80 ? run.inputPreview.slice(0, 77) + "…" : run.inputPreview }))));
}

document.getElementById("start").addEventListener("submit", async (event) => {
  event.preventDefault();
  const agent = document.getElementById("agent").value;
  const input = document.getElementById("input").value;
  if (!agent || !input) return;
  const response = await api("runs", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ agent, input }) });
  const body = await response.json();
  if (!response.ok) { document.getElementById("note").textContent = body.message || ("HTTP " + response.status); return; }
  location.hash = "#run=" + body.runId;
  loadRuns();
});

/** One run's view: the tree of sessions and the timeline, fed by its events. */
let current = null;
function openRun(runId) {
  if (current) current.abort.abort();
  const abort = new AbortController();
  const state = { abort, runId, root: null, startedAt: 0, sessions: new Map(), rows: new Map() };
  current = state;
  const timeline = el("tbody");
  const tree = el("ul", { class: "tree" });
  const output = el("div", { id: "output" });
  const title = el("h2", { text: "Run " + runId });
  document.getElementById("detail").replaceChildren(title,
    el("div", { class: "panels" },
      el("section", {}, el("h3", { text: "Sessions" }), tree),
      el("section", {}, el("h3", { text: "Timeline" }), el("table", {}, timeline), output)));
  const short = (sessionId) => state.root && sessionId !== state.root ? sessionId.slice(state.root.length + 2) : "root";
  const session = (sessionId) => {
    let s = state.sessions.get(sessionId);
    if (!s) {
      const cut = sessionId.lastIndexOf("__");
      s = { sessionId, parent: cut > 0 ? sessionId.slice(0, cut) : null, agent: "", calls: 0, tokens: 0, started: 0, ended: null, status: "running" };
      state.sessions.set(sessionId, s);
    }
    return s;
  };
  const renderTree = () => {
    const children = new Map();
    for (const s of state.sessions.values()) {
      const key = s.parent && state.sessions.has(s.parent) ? s.parent : "";
      if (!children.has(key)) children.set(key, []);
      children.get(key).push(s);
    }
    const render = (s) => el("li", { "data-session": s.sessionId },
      el("span", { class: "session", text: short(s.sessionId) }), " ",
      el("strong", { text: s.agent }), " ",
      el("span", { class: "status " + s.status, text: s.status }), " ",
      el("span", { class: "counts", text: s.calls + " calls · " + s.tokens + " tokens" + (s.ended !== null ? " · " + (s.ended - s.started) + " ms" : "") }),
      (children.get(s.sessionId) || []).length ? el("ul", {}, ...children.get(s.sessionId).map(render)) : undefined);
    tree.replaceChildren(...(children.get("") || []).map(render));
  };
  const row = (event, kind, text, cls) => {
    const tr = el("tr", cls ? { class: cls } : {},
      el("td", { class: "t", text: "+" + Math.max(0, event.timestamp - state.startedAt) + " ms" }),
      el("td", { class: "s", text: short(event.sessionId) }),
      el("td", { class: "k", text: kind }),
      el("td", { class: "x", text }));
    timeline.append(tr);
    return tr;
  };
  const onEvent = (event) => {
    if (event._tag === "RunStarted" && state.root === null) { state.root = event.sessionId; state.startedAt = event.timestamp; }
    const s = session(event.sessionId);
    switch (event._tag) {
      case "RunStarted": s.agent = event.agent; s.started = event.timestamp; row(event, "run started", event.agent + " (" + event.architecture + "): " + clip(event.prompt)); break;
      case "ModelCalled": s.calls++; state.rows.set(event.sessionId + " " + event.step, row(event, "model call", event.step + " …")); break;
      case "TextDelta": {
        const r = state.rows.get(event.sessionId + " " + event.step);
        if (r) { const cell = r.lastChild; cell.textContent = (cell.dataset.text = (cell.dataset.text || "") + event.text); }
        break;
      }
      case "ModelReplied": {
        s.tokens += event.usage.totalTokens;
        const r = state.rows.get(event.sessionId + " " + event.step);
        const calls = event.toolCalls.map((call) => call.name + "(" + call.arguments + ")").join(", ");
        const text = event.step + " · " + event.latencyMs + " ms · " + event.usage.totalTokens + " tokens: " + (calls || event.text);
        if (r) r.lastChild.textContent = text; else row(event, "model replied", text);
        break;
      }
      case "ToolCalled": row(event, "tool", event.name + "(" + event.arguments + ")"); break;
      case "ToolReturned": row(event, event.isError ? "tool error" : "tool result", event.name + " → " + event.content, event.isError ? "error" : ""); break;
      case "SubRunStarted": session(event.childSessionId).agent = event.agent; break;
      case "Progress": row(event, "progress", event.name + " " + JSON.stringify(event.data)); break;
      case "BudgetWarning": row(event, "budget", event.limit + " at " + event.used + " of " + event.max, "error"); break;
      case "ContextCompacted": row(event, "compacted", event.strategy + ": " + event.tokensBefore + " → " + event.tokensAfter + " tokens of " + event.contextWindow); break;
      case "RunCompleted": {
        s.ended = event.timestamp;
        s.status = event.result.interrupted ? "interrupted" : "completed";
        // A session's own result counts its sub-sessions' calls and tokens too.
        s.calls = event.result.modelCalls;
        s.tokens = event.result.usage.totalTokens;
        if (event.sessionId === state.root) {
          row(event, "run completed", (event.result.interrupted ? "interrupted (" + event.result.interruptionReason + ") · " : "") + event.result.modelCalls + " calls · " + event.result.usage.totalTokens + " tokens");
          output.replaceChildren(el("strong", { text: "Output: " }), document.createTextNode(event.result.output));
          title.textContent = "Run " + runId + " — " + s.status;
        }
        break;
      }
    }
    renderTree();
  };
  const onError = (error) => {
    row({ timestamp: state.startedAt, sessionId: state.root || "" }, "error", (error._tag || "Error") + ": " + (error.message || ""), "error");
    for (const s of state.sessions.values()) if (s.status === "running") s.status = "failed";
    title.textContent = "Run " + runId + " — failed";
    renderTree();
  };
  readEvents(runId, abort.signal, onEvent, onError).catch(() => {});
}

/** Reads a run's SSE events with fetch, parsing the frames by hand. */
async function readEvents(runId, signal, onEvent, onError) {
  const response = await api("runs/" + encodeURIComponent(runId) + "/events", { signal });
  if (!response.ok) { onError({ _tag: "HTTP " + response.status, message: await response.text() }); return; }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\\n\\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let kind = "message", data = "";
      for (const line of frame.split("\\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data === "") continue;
      const parsed = JSON.parse(data);
      if (kind === "error") onError(parsed); else onEvent(parsed);
    }
  }
  loadRuns();
}

window.addEventListener("hashchange", () => { const id = selected(); if (id) openRun(id); loadRuns(); });
loadAgents();
loadRuns();
setInterval(loadRuns, 3000);
if (selected()) openRun(selected());
</script>
</body>
</html>
`

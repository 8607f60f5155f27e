/**
 * The viewer script's shared part: building elements (text always through `textContent` or an attribute, never
 * parsed as HTML), the page's requests (same origin, the sign-in cookie), the runs list, the start form, and the
 * reader of a run's Server-Sent Events. Plain browser JavaScript in a string: the page has no build step.
 */
export const base = String.raw`
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
const clip = (text, max) => { const n = max || 240; return text.length > n ? text.slice(0, n - 1) + "…" : text; };
const statusOf = (run) => run.status === "completed" && run.result && run.result.interrupted ? "interrupted" : run.status;
/** A duration for people: 840 ms, 1.2 s, 3 min 05 s. */
const duration = (ms) => {
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1).replace(/\.?0+$/, "") + " s";
  const s = Math.round(ms / 1000);
  return Math.floor(s / 60) + " min " + String(s % 60).padStart(2, "0") + " s";
};
/**
 * A model call's tokens: "2306 tokens (2006 in, 1920 cached, 0 cache write, 300 out)"; the cached and cache-write
 * counts only when the server reported them (a missing count is not a 0).
 */
const usageText = (u) => u.totalTokens + " tokens (" + u.inputTokens + " in" +
  (typeof u.cachedInputTokens === "number" ? ", " + u.cachedInputTokens + " cached" : "") +
  (typeof u.cacheWriteTokens === "number" ? ", " + u.cacheWriteTokens + " cache write" : "") + ", " + u.outputTokens + " out)";
/** A cost (the budget's pricing unit) with four significant digits. */
const costText = (cost) => "cost " + +cost.toPrecision(4);
/** JSON text indented for reading; other text as it is. */
const pretty = (text) => { try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; } };
/** The parent of a sub-agent's session id (its id is the parent's plus __<role>_<n>), or null. */
const parentOf = (sessionId) => { const cut = sessionId.lastIndexOf("__"); return cut > 0 ? sessionId.slice(0, cut) : null; };
const roleOf = (sessionId) => { const cut = sessionId.lastIndexOf("__"); return cut > 0 ? sessionId.slice(cut + 2) : null; };

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

/**
 * Reads a run's SSE events with fetch, parsing the frames by hand. onOpen gets the response first (its Date header
 * sets the waterfall's clock against the server's).
 */
async function readEvents(runId, signal, onEvent, onError, onOpen) {
  const response = await api("runs/" + encodeURIComponent(runId) + "/events", { signal });
  if (!response.ok) { onError({ _tag: "HTTP " + response.status, message: await response.text() }); return; }
  if (onOpen) onOpen(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let kind = "message", data = "";
      for (const line of frame.split("\n")) {
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
`

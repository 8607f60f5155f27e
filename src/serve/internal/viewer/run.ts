/**
 * The viewer script's view of one run, fed by its events: its input when given as parts, the requests waiting for a
 * person, the tree of sessions with their status ("waiting" while a call or question of theirs waits for a person),
 * calls and tokens (cached input among them, when servers said), the waterfall, the raw events (a collapsed table:
 * each model reply with its tokens, cost and the model that answered behind a fallback chain; fallbacks and guardrail
 * trips) and the output; then the page's start-up (the open run follows the address's `#run=<id>`).
 */
export const run = String.raw`
let current = null;
function openRun(runId) {
  if (current) { current.abort.abort(); current.waterfall.stop(); }
  const abort = new AbortController();
  const state = { abort, runId, root: null, startedAt: 0, sessions: new Map(), rows: new Map(), answeredBy: new Map(), ended: false, count: 0 };
  const tree = el("ul", { class: "tree" });
  const timeline = el("tbody");
  const summary = el("summary", { text: "Events (0)" });
  const output = el("div", { id: "output" });
  const title = el("h2", { text: "Run " + runId });
  const pendingSection = el("section", { id: "pending" });
  const chart = el("div", { class: "wf", id: "waterfall" });
  const inputSection = el("section", { id: "run-input" });
  inputSection.hidden = true;
  document.getElementById("detail").replaceChildren(title, inputSection, pendingSection,
    el("div", { class: "panels" },
      el("section", {}, el("h3", { text: "Sessions" }), tree),
      el("section", {}, el("h3", { text: "Waterfall" }), chart, output)),
    el("details", { class: "events" }, summary, el("table", {}, timeline)));
  const short = (sessionId) => state.root && sessionId !== state.root && sessionId.startsWith(state.root + "__") ? sessionId.slice(state.root.length + 2) : state.root === sessionId ? "root" : sessionId;
  const status = (what) => { title.textContent = "Run " + runId + " — " + what; };
  // The runs list says "waiting" too, without waiting for its next refresh.
  const waits = makePending(pendingSection, runId, short, (size) => { if (!state.ended) { status(size > 0 ? "waiting" : "running"); loadRuns(); } });
  const waterfall = makeWaterfall(chart, short);
  state.waterfall = waterfall;
  current = state;

  const session = (sessionId) => {
    let s = state.sessions.get(sessionId);
    if (!s) {
      s = { sessionId, parent: parentOf(sessionId), agent: "", calls: 0, tokens: 0, cached: undefined, started: 0, ended: null, status: "running", waits: new Set() };
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
    // A running session with a call or a question waiting for a person is waiting, not running.
    const shownStatus = (s) => s.status === "running" && s.waits.size > 0 ? "waiting" : s.status;
    const render = (s) => el("li", { "data-session": s.sessionId },
      el("span", { class: "session", text: short(s.sessionId) }), " ",
      el("strong", { text: s.agent }), " ",
      el("span", { class: "status " + shownStatus(s), text: shownStatus(s) }), " ",
      el("span", { class: "counts", text: s.calls + " calls · " + s.tokens + " tokens" + (s.cached !== undefined ? " · " + s.cached + " cached" : "") + (s.ended !== null ? " · " + (s.ended - s.started) + " ms" : "") }),
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
    summary.textContent = "Events (" + (++state.count) + ")";
    return tr;
  };
  const onEvent = (event) => {
    if (event._tag === "RunStarted" && state.root === null) { state.root = event.sessionId; state.startedAt = event.timestamp; status("running"); }
    waits.onEvent(event);
    waterfall.onEvent(event);
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
        if (typeof event.usage.cachedInputTokens === "number") s.cached = (s.cached || 0) + event.usage.cachedInputTokens;
        const r = state.rows.get(event.sessionId + " " + event.step);
        const calls = event.toolCalls.map((call) => call.name + "(" + call.arguments + ")").join(", ");
        const answered = state.answeredBy.get(event.sessionId + " " + event.step);
        state.answeredBy.delete(event.sessionId + " " + event.step);
        const text = event.step + " · " + event.latencyMs + " ms · " + usageText(event.usage) +
          (typeof event.cost === "number" ? " · " + costText(event.cost) : "") + (answered ? " · answered by " + answered : "") + ": " + (calls || event.text);
        if (r) r.lastChild.textContent = text; else row(event, "model replied", text);
        break;
      }
      case "ModelFellBack":
        state.answeredBy.set(event.sessionId + " " + event.step, event.to);
        row(event, "fell back", event.step + ": " + event.from + " → " + event.to + " (" + event.reason + ")", "warn");
        break;
      case "ToolCalled": row(event, "tool", event.name + "(" + event.arguments + ")"); break;
      case "ToolReturned": row(event, event.isError ? "tool error" : "tool result", event.name + " → " + event.content, event.isError ? "error" : ""); break;
      case "ApprovalRequested": s.waits.add("a" + event.toolCallId); row(event, "approval asked", event.name + "(" + event.arguments + ") [call " + event.toolCallId + "]"); break;
      case "ApprovalDecided": s.waits.delete("a" + event.toolCallId); row(event, "approval", event.name + " [call " + event.toolCallId + "] " + (event.approved ? "approved" : "rejected" + (event.reason ? ": " + event.reason : "")) + " after " + event.waitedMs + " ms", event.approved ? "" : "error"); break;
      case "QuestionAsked": s.waits.add("q" + event.questionId); row(event, "question", event.questionId + ": " + event.question); break;
      case "QuestionAnswered": s.waits.delete("q" + event.questionId); row(event, "answer", event.questionId + (event.answered ? " answered" : " unanswered: " + (event.reason || "")) + " after " + event.waitedMs + " ms"); break;
      case "SubRunStarted": session(event.childSessionId).agent = event.agent; break;
      case "Progress": row(event, "progress", event.name + " " + JSON.stringify(event.data)); break;
      case "BudgetWarning": row(event, "budget", event.limit + " at " + event.used + " of " + event.max, "error"); break;
      case "ContextCompacted": row(event, "compacted", event.strategy + ": " + event.tokensBefore + " → " + event.tokensAfter + " tokens of " + event.contextWindow); break;
      case "PlanUpdated": row(event, "plan", event.todos.map((todo) => (todo.status === "done" ? "✓ " : todo.status === "in_progress" ? "▶ " : "○ ") + todo.content).join(" · ")); break;
      case "GuardrailTripped": row(event, event.rewritten ? "guardrail rewrote" : "guardrail tripped", event.guardrail + " (" + event.kind + (event.name ? ", " + event.name + " " + event.phase : "") + "): " + event.reason, event.rewritten ? "" : "error"); break;
      case "RunCompleted": {
        s.ended = event.timestamp;
        s.status = event.result.interrupted ? "interrupted" : "completed";
        // A session's own result counts its sub-sessions' calls and tokens too.
        s.calls = event.result.modelCalls;
        s.tokens = event.result.usage.totalTokens;
        if (typeof event.result.usage.cachedInputTokens === "number") s.cached = event.result.usage.cachedInputTokens;
        if (event.sessionId === state.root) {
          row(event, "run completed", (event.result.interrupted ? "interrupted (" + event.result.interruptionReason + ") · " : "") + event.result.modelCalls + " calls · " + event.result.usage.totalTokens + " tokens");
          output.replaceChildren(el("strong", { text: "Output: " }), document.createTextNode(event.result.output));
          state.ended = true;
          waits.clear();
          status(s.status);
        }
        break;
      }
    }
    renderTree();
  };
  const onError = (error) => {
    row({ timestamp: state.startedAt, sessionId: state.root || "" }, "error", (error._tag || "Error") + ": " + (error.message || ""), "error");
    for (const s of state.sessions.values()) if (s.status === "running") s.status = "failed";
    state.ended = true;
    waits.clear();
    waterfall.onError(error);
    status("failed");
    renderTree();
  };
  showInput(runId, inputSection).catch(() => {});
  readEvents(runId, abort.signal, onEvent, onError, waterfall.onOpen).catch(() => {});
}

window.addEventListener("hashchange", () => { const id = selected(); if (id) openRun(id); loadRuns(); });
loadAgents();
loadRuns();
setInterval(loadRuns, 3000);
if (selected()) openRun(selected());
`

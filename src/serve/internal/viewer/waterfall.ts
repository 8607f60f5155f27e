/**
 * The viewer script's waterfall: a run drawn from its events as one row per session (sub-agents indented under
 * their parent), model call, tool call and wait for a person (approval or question, from asked to decided), each a
 * bar on one time axis, and each guardrail trip or rewrite a mark. Hovering a row shows its duration, and for a model
 * call its tokens (the events carry `usage`: input read from and written to a prompt cache when the server said),
 * its cost when the run's budget has `pricing` (`ModelReplied.cost`), and, behind a fallback chain, which model
 * answered and why the ones before it did not (`ModelFellBack`). Bars still open (a run going on) grow with the
 * server's clock, estimated from the events response's `Date` header.
 */
export const waterfall = String.raw`
/** The one tooltip of the page (text only). */
const tooltip = () => {
  let tip = document.getElementById("wf-tip");
  if (!tip) { tip = el("div", { id: "wf-tip", role: "tooltip" }); tip.hidden = true; document.body.append(tip); }
  return tip;
};

function makeWaterfall(container, short) {
  const sessions = new Map();
  const current = new Map();
  const items = [];
  let seq = 0, t0 = null, lastTs = 0, lastSeenAt = Date.now(), skew = null, done = false, drawnDone = false, pending = false, timer = null;
  const axis = el("div", { class: "wf-row wf-axis" }, el("div", { class: "wf-label" }), el("div", { class: "wf-track" }));
  const grid = el("div", { class: "wf-grid" });
  const rows = el("div", { class: "wf-rows" });
  container.replaceChildren(axis, el("div", { class: "wf-body" }, grid, rows));
  tooltip().hidden = true;

  const add = (kind, key, sessionId, label, start, info) => {
    const item = { kind, key, sessionId, label, start, end: null, status: "open", seq: seq++, info: info || {} };
    items.push(item);
    if (key !== null) current.set(key, item);
    return item;
  };
  /** The open row under key, or a new one: an id used again (a model repeating call ids each turn) starts a new row. */
  const open = (kind, key, sessionId, label, start, info) => {
    const item = current.get(key);
    return item && item.end === null ? item : add(kind, key, sessionId, label, start, info);
  };
  const close = (key, end, status, info) => {
    const item = current.get(key);
    if (!item || item.end !== null) return null;
    item.end = Math.max(end, item.start);
    item.status = status;
    Object.assign(item.info, info || {});
    return item;
  };
  const session = (sessionId, at) => {
    let s = sessions.get(sessionId);
    if (!s) {
      const role = roleOf(sessionId);
      s = add("session", null, sessionId, role || "run", at, { role, agent: "", calls: 0, tokens: 0 });
      s.parent = parentOf(sessionId);
      sessions.set(sessionId, s);
    }
    return s;
  };
  // A sub-session by the last part of its id and its agent ("base · writer"), or that part alone when it names the
  // agent already ("critic_1", "worker_clerk_1").
  const label = (s) => {
    const part = roleOf(s.sessionId);
    if (part === null) return s.info.agent || "run";
    return s.info.agent && !part.includes(s.info.agent) ? part + " · " + s.info.agent : part;
  };

  const onEvent = (event) => {
    const ts = event.timestamp;
    if (t0 === null || ts < t0) t0 = ts;
    lastTs = Math.max(lastTs, ts);
    lastSeenAt = Date.now();
    const sid = event.sessionId;
    const s = session(sid, ts);
    const k = (id) => sid + "\u0000" + id;
    switch (event._tag) {
      case "RunStarted": s.start = Math.min(s.start, ts); s.info.agent = event.agent; s.info.architecture = event.architecture; s.label = label(s); break;
      case "SubRunStarted": {
        const child = session(event.childSessionId, ts);
        child.info.agent = event.agent; child.info.role = event.role; child.label = label(child);
        break;
      }
      case "ModelCalled": open("model", "m" + k(event.step), sid, event.step, ts); break;
      case "ModelReplied": {
        const info = { usage: event.usage, cost: event.cost, latencyMs: event.latencyMs, finishReason: event.finishReason, toolCalls: event.toolCalls.length };
        if (!close("m" + k(event.step), ts, "ok", info)) add("model", null, sid, event.step, ts - event.latencyMs, info).end = ts;
        s.info.calls++; s.info.tokens += event.usage.totalTokens;
        break;
      }
      case "ModelFellBack": {
        // Said during the call: the reasons go to its open bar; the last one's "to" answered.
        const item = current.get("m" + k(event.step));
        if (item && item.end === null) (item.info.fallbacks = item.info.fallbacks || []).push({ from: event.from, to: event.to, reason: event.reason });
        break;
      }
      case "GuardrailTripped": {
        // A mark at the moment of the trip (or rewrite), under its session.
        const mark = add("guard", null, sid, "guardrail " + event.guardrail, ts, { kind: event.kind, reason: event.reason, name: event.name, phase: event.phase, toolCallId: event.toolCallId });
        mark.end = ts;
        mark.status = event.rewritten ? "rewritten" : "tripped";
        break;
      }
      case "ToolCalled": open("tool", "t" + k(event.toolCallId), sid, event.name, ts, { id: event.toolCallId, arguments: event.arguments }); break;
      case "ToolReturned":
        close("t" + k(event.toolCallId), ts, event.isError ? "error" : "ok", { content: event.content, isError: event.isError });
        break;
      case "ApprovalRequested":
        open("wait", "a" + k(event.toolCallId), sid, "approval " + event.name, ts, { id: event.toolCallId, arguments: event.arguments });
        break;
      case "ApprovalDecided":
        close("a" + k(event.toolCallId), ts, event.approved ? "approved" : "rejected", { reason: event.reason, edited: event.edited });
        break;
      case "QuestionAsked":
        open("wait", "q" + k(event.questionId), sid, "question " + clip(event.question, 60), ts, { id: event.questionId, question: event.question });
        break;
      case "QuestionAnswered":
        close("q" + k(event.questionId), ts, event.answered ? "answered" : "unanswered", { reason: event.reason });
        break;
      case "SubRunCompleted": {
        const child = session(event.childSessionId, ts);
        if (child.end === null) { child.end = ts; child.status = event.error !== undefined ? "failed" : "completed"; }
        break;
      }
      case "RunCompleted":
        s.end = ts;
        s.status = event.result.interrupted ? "interrupted" : "completed";
        s.info.calls = event.result.modelCalls; s.info.tokens = event.result.usage.totalTokens;
        // The run's own end: drawn at once, whole (the page says "completed" with this event).
        if (s.parent === null || !sessions.has(s.parent)) { finish("ended"); render(); return; }
        break;
    }
    schedule();
  };
  /** The run ended (or failed): what is still open ends at its last event. */
  const finish = (status) => {
    done = true;
    for (const item of items) if (item.end === null) { item.end = lastTs; item.status = status; }
    if (timer !== null) { clearInterval(timer); timer = null; }
  };
  const onError = () => { finish("failed"); render(); };
  /**
   * The server's time now, for the bars still open: at least the last event's time plus what passed since it came,
   * and at least the response's Date (whole seconds, so never ahead of the server) plus what passed since then.
   */
  const now = () => done ? lastTs : Math.max(lastTs + (Date.now() - lastSeenAt), skew !== null ? Date.now() + skew : 0);
  const onOpen = (response) => {
    const date = Date.parse(response.headers.get("date") || "");
    if (!Number.isNaN(date)) skew = date - Date.now();
  };

  const tipOf = (item) => {
    const lines = [];
    const took = (item.end === null ? now() : item.end) - item.start;
    const span = duration(took) + (item.end === null ? " so far" : "");
    if (item.kind === "session") {
      lines.push(label(item) + " — " + item.status, short(item.sessionId), span + " · " + item.info.calls + " model calls · " + item.info.tokens + " tokens");
    } else if (item.kind === "model") {
      lines.push("model call " + item.label + (item.end === null ? " (waiting for the model)" : ""), span);
      const u = item.info.usage;
      if (u) lines.push(usageText(u) + (typeof item.info.cost === "number" ? " · " + costText(item.info.cost) : ""), "finish: " + item.info.finishReason + (item.info.toolCalls ? " · " + item.info.toolCalls + (item.info.toolCalls === 1 ? " tool call" : " tool calls") : ""));
      const fallbacks = item.info.fallbacks || [];
      if (fallbacks.length > 0) {
        lines.push((item.end === null ? "asking " : "answered by ") + fallbacks[fallbacks.length - 1].to);
        for (const f of fallbacks) lines.push(f.from + " did not answer: " + clip(f.reason, 200));
      }
    } else if (item.kind === "guard") {
      lines.push(item.label + " — " + item.status, item.info.kind + (item.info.name ? " · " + item.info.name + " " + item.info.phase + " [call " + item.info.toolCallId + "]" : ""), "reason: " + clip(item.info.reason, 300));
    } else if (item.kind === "tool") {
      lines.push("tool " + item.label + " [call " + item.info.id + "] — " + item.status, span, "arguments: " + clip(item.info.arguments, 300));
      if (item.info.content !== undefined) lines.push("result: " + clip(item.info.content, 300));
    } else {
      lines.push(item.label + " — " + (item.end === null ? "waiting" : item.status), "waited " + span);
      if (item.info.arguments !== undefined) lines.push("arguments: " + clip(item.info.arguments, 300));
      if (item.info.reason) lines.push("reason: " + clip(item.info.reason, 300));
    }
    return lines.join("\n");
  };

  const ticks = (span) => {
    const target = span / 5;
    const power = Math.pow(10, Math.floor(Math.log10(Math.max(target, 1))));
    const step = [1, 2, 5, 10].map((m) => m * power).find((m) => m >= target) || power * 10;
    const out = [];
    for (let at = 0; at <= span + 1e-9; at += step) out.push(at);
    return out;
  };

  const render = () => {
    pending = false;
    // An ended run is drawn once, at its end: a render scheduled by its last events would only draw it again.
    if (drawnDone) return;
    if (done) drawnDone = true;
    if (t0 === null) { rows.replaceChildren(el("div", { class: "empty", text: "No events yet." })); return; }
    let end = now();
    for (const item of items) if (item.end !== null && item.end > end) end = item.end;
    const span = Math.max(end - t0, 1);
    const pct = (at) => ((at - t0) / span * 100).toFixed(3) + "%";
    const marks = ticks(span);
    axis.lastChild.replaceChildren(...marks.map((at) => el("span", { class: "wf-tick", style: "left: " + pct(t0 + at), text: duration(at) })));
    grid.replaceChildren(...marks.map((at) => el("span", { style: "left: " + pct(t0 + at) })));
    // Children of a session, in the order they began: its own calls and waits, and its sub-sessions.
    const under = new Map();
    const top = [];
    for (const item of items) {
      const owner = item.kind === "session" ? (item.parent !== null && sessions.has(item.parent) ? item.parent : null) : item.sessionId;
      if (owner === null) { top.push(item); continue; }
      if (!under.has(owner)) under.set(owner, []);
      under.get(owner).push(item);
    }
    const out = [];
    const draw = (item, depth) => {
      const stop = item.end === null ? end : item.end;
      const bar = el("div", { class: "wf-bar " + item.kind + " " + item.status + (item.end === null ? " open" : "") + (item.info.fallbacks ? " fellback" : ""),
        style: "left: " + pct(item.start) + "; width: " + ((stop - item.start) / span * 100).toFixed(3) + "%" });
      out.push(el("div", { class: "wf-row " + item.kind, "data-kind": item.kind, "data-label": item.label, "data-session": item.sessionId,
        "data-depth": String(depth), "data-tip": tipOf(item) },
        el("div", { class: "wf-label", style: "padding-left: " + (4 + depth * 14) + "px" },
          el("span", { class: "name", text: item.label }), el("span", { class: "dur", text: duration(stop - item.start) })),
        el("div", { class: "wf-track" }, bar)));
      if (item.kind === "session") for (const child of under.get(item.sessionId) || []) draw(child, depth + 1);
    };
    for (const item of top) draw(item, 0);
    rows.replaceChildren(...out);
  };
  /** Renders once for a burst of events; while the run goes on, every half second so open bars grow. */
  const schedule = () => {
    if (!pending) { pending = true; setTimeout(render, 30); }
    if (!done && timer === null) timer = setInterval(schedule, 500);
  };

  rows.addEventListener("mousemove", (event) => {
    const row = event.target.closest(".wf-row");
    const tip = tooltip();
    if (!row) { tip.hidden = true; return; }
    tip.textContent = row.dataset.tip;
    tip.hidden = false;
    tip.style.left = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8) + "px";
    tip.style.top = Math.min(event.clientY + 14, window.innerHeight - tip.offsetHeight - 8) + "px";
  });
  rows.addEventListener("mouseleave", () => { tooltip().hidden = true; });

  return { onEvent, onError, onOpen, stop: () => { done = true; if (timer !== null) clearInterval(timer); timer = null; } };
}
`

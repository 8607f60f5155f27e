/**
 * The viewer script's requests waiting for a person (DESIGN §15): a run's tool calls waiting for approval (the tool,
 * its arguments, its session; Approve, or Reject with an optional reason) and its questions (an answer box: text
 * when the question's schema is a string, JSON otherwise). The list follows the run's events — `ApprovalRequested`
 * and `QuestionAsked` add an entry, `ApprovalDecided` and `QuestionAnswered` remove it, whoever decided (this page,
 * another one, `valet runs decide`, curl). The buttons post to `POST /runs/:id/decisions/:toolCallId` and
 * `POST /runs/:id/answers/:questionId` with the page's cookie; a refusal (400, 404, 409) shows the server's message
 * under the entry, which stays.
 */
export const pending = String.raw`
function makePending(section, runId, short, onChange) {
  const entries = new Map();
  const heading = el("h3", { text: "Waiting for you" });
  const list = el("div", { class: "requests" });
  section.replaceChildren(heading, list);
  section.hidden = true;
  const changed = () => {
    section.hidden = entries.size === 0;
    heading.textContent = "Waiting for you (" + entries.size + ")";
    onChange(entries.size);
  };
  const remove = (key) => { const entry = entries.get(key); if (entry) { entry.node.remove(); entries.delete(key); changed(); } };
  const clear = () => { for (const key of [...entries.keys()]) remove(key); };

  /** Posts a decision or an answer; on success the entry waits for its event to go, on refusal it shows why. */
  const send = async (entry, path, body) => {
    entry.busy(true);
    entry.refusal.textContent = "";
    try {
      const response = await api(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      if (response.ok) { entry.node.classList.add("sent"); return; }
      let message = "HTTP " + response.status;
      try { const answer = await response.json(); if (answer && typeof answer.message === "string") message = answer.message; } catch {}
      entry.refusal.textContent = message;
    } catch (error) {
      entry.refusal.textContent = "not sent: " + (error && error.message ? error.message : String(error));
    }
    entry.busy(false);
  };
  const entryOf = (key, node, controls, refusal) => {
    const entry = { node, refusal, busy: (on) => { for (const control of controls) control.disabled = on; } };
    entries.set(key, entry);
    list.append(node);
    changed();
    return entry;
  };
  const route = (what, id) => "runs/" + encodeURIComponent(runId) + "/" + what + "/" + encodeURIComponent(id);

  const approval = (event) => {
    const key = "a" + event.sessionId + "\u0000" + event.toolCallId;
    if (entries.has(key)) return;
    const reason = el("input", { class: "reason", placeholder: "reason (optional, the model reads it)", "aria-label": "reason" });
    const approve = el("button", { type: "button", class: "approve", text: "Approve" });
    const reject = el("button", { type: "button", class: "reject", text: "Reject" });
    const refusal = el("div", { class: "refusal", role: "alert" });
    const node = el("div", { class: "request approval", "data-call": event.toolCallId, "data-session": event.sessionId },
      el("div", {}, el("strong", { text: event.name }), " ", el("span", { class: "counts", text: "call " + event.toolCallId + " · session " + short(event.sessionId) })),
      el("pre", { class: "args", text: pretty(event.arguments) }),
      el("div", { class: "controls" }, approve, reject, reason),
      refusal);
    const entry = entryOf(key, node, [approve, reject, reason], refusal);
    const path = route("decisions", event.toolCallId);
    approve.addEventListener("click", () => send(entry, path, { approved: true }));
    reject.addEventListener("click", () => {
      const why = reason.value.trim();
      send(entry, path, why === "" ? { approved: false } : { approved: false, reason: why });
    });
  };

  const question = (event) => {
    const key = "q" + event.sessionId + "\u0000" + event.questionId;
    if (entries.has(key)) return;
    const schema = event.schema && typeof event.schema === "object" ? event.schema : {};
    const text = schema.type === "string";
    const box = text
      ? el("input", { class: "answer", "aria-label": "answer", placeholder: "your answer" })
      : el("textarea", { class: "answer", rows: "2", "aria-label": "answer", placeholder: "your answer, as JSON" });
    const answer = el("button", { type: "button", class: "send", text: "Answer" });
    const refusal = el("div", { class: "refusal", role: "alert" });
    const node = el("div", { class: "request question", "data-question": event.questionId, "data-session": event.sessionId },
      el("div", {}, el("strong", { text: "Question" }), " ", el("span", { class: "counts", text: event.questionId + " · session " + short(event.sessionId) })),
      el("pre", { class: "question-text", text: event.question }),
      el("div", { class: "counts", text: !text ? "answer: JSON matching " + clip(JSON.stringify(schema), 200)
        : Array.isArray(schema.enum) ? "answer: one of " + clip(schema.enum.join(", "), 200) : "answer: text" }),
      el("div", { class: "controls" }, box, answer),
      refusal);
    const entry = entryOf(key, node, [box, answer], refusal);
    const path = route("answers", event.questionId);
    const submit = () => {
      if (text) return send(entry, path, { answer: box.value });
      let value;
      try { value = JSON.parse(box.value); } catch (error) { refusal.textContent = "not JSON: " + error.message; return; }
      send(entry, path, { answer: value });
    };
    answer.addEventListener("click", submit);
    if (text) box.addEventListener("keydown", (event) => { if (event.key === "Enter") submit(); });
  };

  const onEvent = (event) => {
    switch (event._tag) {
      case "ApprovalRequested": approval(event); break;
      case "ApprovalDecided": remove("a" + event.sessionId + "\u0000" + event.toolCallId); break;
      case "QuestionAsked": question(event); break;
      case "QuestionAnswered": remove("q" + event.sessionId + "\u0000" + event.questionId); break;
    }
  };
  // clear: the run ended (cancelled, failed) and nothing of it waits any more.
  return { onEvent, clear, size: () => entries.size };
}
`

/**
 * The events an agent run streams. Every event is plain JSON (for SSE, logs and trajectories) and carries the
 * `sessionId` of the agent that emitted it and a `timestamp` from `Clock` (so `TestClock` makes runs
 * deterministic). Sub-agents' events flow into their parent's stream unchanged; a child's session id is its
 * parent's plus `__<role>_<n>`, so a consumer can filter one agent or rebuild the tree.
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { Agent, AgentEvent, ScriptedModel } from "valet"
 *
 * const agent = Agent.make({ name: "greeter", instructions: "Be brief." })
 *
 * // One line per event of the run itself (not its sub-agents'), without the text deltas:
 * // run started, model call react.turn_1, model replied, run completed.
 * const log = Agent.stream(agent, "Say hello").pipe(
 *   Stream.filter((event) => AgentEvent.isRoot(event) && event._tag !== "TextDelta"),
 *   Stream.map(AgentEvent.format),
 *   Stream.runCollect,
 *   Effect.provide(ScriptedModel.layer(["Hello!"]))
 * )
 *
 * // The same events as Server-Sent Events text, for an HTTP response; `sseDecoder` reads them back.
 * const sse = AgentEvent.toSse(Agent.stream(agent, "Say hello"))
 * ```
 *
 * @since 0.1.0
 */
import { Schema, type Stream } from "effect"
import * as Sse from "./internal/sse.js"
import * as Model from "./Model.js"

const base = {
  sessionId: Schema.String,
  timestamp: Schema.Number
}

/**
 * What a finished run produced. `modelCalls` and `usage` include every sub-agent's calls.
 *
 * @since 0.1.0
 * @category models
 */
export const RunResult = Schema.Struct({
  sessionId: Schema.String,
  output: Schema.String,
  modelCalls: Schema.Int,
  usage: Model.Usage,
  interrupted: Schema.Boolean,
  interruptionReason: Schema.optional(Schema.String),
  durationMs: Schema.Number,
  /** Architecture-specific details: the plan, the candidates, the votes… */
  metadata: Schema.Record(Schema.String, Schema.Unknown),
  /** The decoded answer, when the run asked for structured output (`Agent.run(…, { output: schema })`). */
  value: Schema.optional(Schema.Unknown)
})
/**
 * What a finished run produced.
 *
 * @since 0.1.0
 * @category models
 */
export type RunResult = typeof RunResult.Type

/**
 * A run began.
 *
 * @since 0.1.0
 * @category events
 */
export const RunStarted = Schema.TaggedStruct("RunStarted", {
  ...base,
  agent: Schema.String,
  architecture: Schema.String,
  prompt: Schema.String
})
/**
 * A model call is about to be sent; `step` names it within the session (`react.turn_3`).
 *
 * @since 0.1.0
 * @category events
 */
export const ModelCalled = Schema.TaggedStruct("ModelCalled", { ...base, step: Schema.String })
/**
 * A piece of the text of a model call in flight (choice `index`).
 *
 * @since 0.1.0
 * @category events
 */
export const TextDelta = Schema.TaggedStruct("TextDelta", {
  ...base,
  step: Schema.String,
  index: Schema.Int,
  text: Schema.String
})
/**
 * A model call answered. `text` and `toolCalls` are those of the first choice. `cost` is the call's, in the unit of
 * the run's budget `pricing`, when it has one.
 *
 * @since 0.1.0
 * @category events
 */
export const ModelReplied = Schema.TaggedStruct("ModelReplied", {
  ...base,
  step: Schema.String,
  text: Schema.String,
  toolCalls: Schema.Array(Model.ToolCall),
  finishReason: Model.FinishReason,
  usage: Model.Usage,
  latencyMs: Schema.Number,
  /** @since 0.2.0 */
  cost: Schema.optional(Schema.Number),
  /**
   * Set when the run (or a run it is part of) has output guardrails: `text` is then empty, since the reply is not
   * checked yet (a redactor's rewrite is in `RunCompleted`'s output, not here). @since 0.2.0
   */
  textWithheld: Schema.optional(Schema.Boolean)
})
/**
 * A tool call is about to run.
 *
 * @since 0.1.0
 * @category events
 */
export const ToolCalled = Schema.TaggedStruct("ToolCalled", {
  ...base,
  toolCallId: Schema.String,
  name: Schema.String,
  arguments: Schema.String
})
/**
 * A tool call waits for a person's approval (`HumanLoop`): the run goes on with its other calls; this one waits
 * for `HumanLoop.decide` (or its `approvalTimeout`).
 *
 * @since 0.2.0
 * @category events
 */
export const ApprovalRequested = Schema.TaggedStruct("ApprovalRequested", {
  ...base,
  toolCallId: Schema.String,
  name: Schema.String,
  arguments: Schema.String
})
/**
 * A waiting tool call was decided: `approved` (with `edited` arguments, which its `ToolCalled` shows) or rejected
 * with `reason` (a person's, or that its `approvalTimeout` passed, or that nobody can approve it).
 *
 * @since 0.2.0
 * @category events
 */
export const ApprovalDecided = Schema.TaggedStruct("ApprovalDecided", {
  ...base,
  toolCallId: Schema.String,
  name: Schema.String,
  approved: Schema.Boolean,
  edited: Schema.Boolean,
  reason: Schema.optional(Schema.String),
  waitedMs: Schema.Number
})
/**
 * The run asks a person a question (`Architecture.ask`, the `ask_human` tool) and waits for the answer
 * (`HumanLoop.answer`); `schema` is the JSON schema of the answer expected.
 *
 * @since 0.2.0
 * @category events
 */
export const QuestionAsked = Schema.TaggedStruct("QuestionAsked", {
  ...base,
  questionId: Schema.String,
  question: Schema.String,
  schema: Schema.Unknown
})
/**
 * A question was answered (or not: `answered: false` with the `reason`, a timeout or nobody to ask).
 *
 * @since 0.2.0
 * @category events
 */
export const QuestionAnswered = Schema.TaggedStruct("QuestionAnswered", {
  ...base,
  questionId: Schema.String,
  answered: Schema.Boolean,
  reason: Schema.optional(Schema.String),
  waitedMs: Schema.Number
})
/**
 * What an event says of a part a tool returned, without its bytes: its kind, media type (an audio part's format as
 * `audio/<format>`), decoded size in bytes, and its URL when an http(s) one. The bytes go to the model and, in a
 * durable run, to the stored tool result; an event stream (the viewer, SSE, a log) gets this description only,
 * so a screenshot is not sent again as megabytes of base64 per subscriber.
 *
 * @since 0.2.0
 * @category models
 */
export const Attachment = Schema.Struct({
  type: Schema.Literals(["text", "image", "file", "audio"]),
  mediaType: Schema.optional(Schema.String),
  bytes: Schema.Int,
  url: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String)
})
/**
 * What an event says of a part a tool returned.
 *
 * @since 0.2.0
 * @category models
 */
export type Attachment = typeof Attachment.Type

/**
 * The description of a part for an event (see `Attachment`).
 *
 * @since 0.2.0
 * @category constructors
 */
export const attachmentOf = (part: Model.Part): Attachment => {
  switch (part.type) {
    case "text":
      return { type: "text", bytes: part.text.length }
    case "audio":
      return { type: "audio", mediaType: Model.audioMediaTypes[part.format], bytes: Model.base64Bytes(part.data) }
    case "image":
    case "file": {
      const url = part.url
      const web = url !== undefined && /^https?:/i.test(url)
      const bytes = part.data !== undefined ? Model.base64Bytes(part.data) : web ? 0 : Model.base64Bytes(url!.slice(url!.indexOf(",") + 1))
      return {
        type: part.type,
        ...(part.mediaType !== undefined ? { mediaType: part.mediaType } : {}),
        bytes,
        ...(web ? { url } : {}),
        ...(part.type === "file" && part.name !== undefined ? { name: part.name } : {})
      }
    }
  }
}

/**
 * A tool call returned (`isError` when its result is an `ERROR:` text). `content` is the text the model reads;
 * `attachments` describe the parts it returned besides (images, audio, files), without their bytes.
 *
 * @since 0.1.0
 * @category events
 */
export const ToolReturned = Schema.TaggedStruct("ToolReturned", {
  ...base,
  toolCallId: Schema.String,
  name: Schema.String,
  content: Schema.String,
  isError: Schema.Boolean,
  durationMs: Schema.Number,
  /** @since 0.2.0 */
  attachments: Schema.optional(Schema.Array(Attachment))
})
/**
 * A sub-agent started under `childSessionId`.
 *
 * @since 0.1.0
 * @category events
 */
export const SubRunStarted = Schema.TaggedStruct("SubRunStarted", {
  ...base,
  childSessionId: Schema.String,
  role: Schema.String,
  agent: Schema.String
})
/**
 * A sub-agent ended: with a result (possibly interrupted), or failed with `error`.
 *
 * @since 0.1.0
 * @category events
 */
export const SubRunCompleted = Schema.TaggedStruct("SubRunCompleted", {
  ...base,
  childSessionId: Schema.String,
  role: Schema.String,
  interrupted: Schema.Boolean,
  interruptionReason: Schema.optional(Schema.String),
  error: Schema.optional(Schema.String),
  modelCalls: Schema.Int
})
/**
 * An architecture-specific milestone; `name` is namespaced (`self_refine.critique`).
 *
 * @since 0.1.0
 * @category events
 */
export const Progress = Schema.TaggedStruct("Progress", {
  ...base,
  name: Schema.String,
  data: Schema.Record(Schema.String, Schema.Unknown),
  /**
   * Set under output guardrails (the run's or a run it is part of): the data's text values are empty, since they
   * may hold unchecked model text (an answer, a critique); numbers and flags are kept. @since 0.2.0
   */
  textWithheld: Schema.optional(Schema.Boolean)
})
/**
 * A budget limit is at 80 % (or the configured fraction).
 *
 * @since 0.1.0
 * @category events
 */
export const BudgetWarning = Schema.TaggedStruct("BudgetWarning", {
  ...base,
  limit: Schema.String,
  used: Schema.Number,
  max: Schema.Number
})
/**
 * The messages of a model call were compacted to fit its context window (`Compaction`): `step` is the call's,
 * `strategy` what was done (`tool_results`, `summary`), the tokens estimated before and after.
 *
 * @since 0.2.0
 * @category events
 */
export const ContextCompacted = Schema.TaggedStruct("ContextCompacted", {
  ...base,
  step: Schema.String,
  strategy: Schema.String,
  tokensBefore: Schema.Int,
  tokensAfter: Schema.Int,
  contextWindow: Schema.Int
})
/**
 * A guardrail tripped (`Guardrail`), or rewrote what it checked (a redactor: `rewritten` is true): `guardrail`
 * names it, `kind` says where (`input`, `output`, `tool`), `reason` why; a tool guardrail's event names the call
 * (`toolCallId`, `name`) and the `phase` it checked (`arguments` or `result`). What happens next depends on the
 * kind and its option: the run fails with `GuardrailTripped`, the output is repaired once, or the call's result
 * becomes an error the model reads.
 *
 * @since 0.2.0
 * @category events
 */
export const GuardrailTripped = Schema.TaggedStruct("GuardrailTripped", {
  ...base,
  guardrail: Schema.String,
  kind: Schema.Literals(["input", "output", "tool"]),
  reason: Schema.String,
  rewritten: Schema.optionalKey(Schema.Boolean),
  toolCallId: Schema.optionalKey(Schema.String),
  name: Schema.optionalKey(Schema.String),
  phase: Schema.optionalKey(Schema.Literals(["arguments", "result"]))
})
/**
 * The run ended; the last event of its session.
 *
 * @since 0.1.0
 * @category events
 */
export const RunCompleted = Schema.TaggedStruct("RunCompleted", {
  ...base,
  result: RunResult,
  /**
   * Set on a sub-run's end under its parent's output guardrails: `result.output` is empty (and `value` left out),
   * since the parent checks only its own answer. @since 0.2.0
   */
  textWithheld: Schema.optional(Schema.Boolean)
})
/**
 * A model of a `Model.fallback` chain did not answer the call `step` (`reason`: its error, or `circuit open (…)` when
 * its circuit breaker kept it from being asked), and the model `to` was asked instead. The model that answered a
 * call is the `to` of the call's last `ModelFellBack`, else the chain's first.
 *
 * @since 0.2.0
 * @category events
 */
export const ModelFellBack = Schema.TaggedStruct("ModelFellBack", {
  ...base,
  step: Schema.String,
  from: Schema.String,
  to: Schema.String,
  reason: Schema.String
})

/**
 * One step of a run's plan (`write_todos`): what to do, and where it stands.
 *
 * @since 0.2.0
 * @category models
 */
export const Todo = Schema.Struct({
  content: Schema.String,
  status: Schema.Literals(["pending", "in_progress", "done"])
})
/**
 * One step of a run's plan.
 *
 * @since 0.2.0
 * @category models
 */
export type Todo = typeof Todo.Type

/**
 * The run's plan changed (the `write_todos` tool of DeepAgent): `todos` is the whole plan now, in order.
 *
 * @since 0.2.0
 * @category events
 */
export const PlanUpdated = Schema.TaggedStruct("PlanUpdated", {
  ...base,
  todos: Schema.Array(Todo)
})

/**
 * Any event of a run.
 *
 * @since 0.1.0
 * @category events
 */
export const AgentEvent = Schema.Union([RunStarted,
  ModelCalled,
  TextDelta,
  ModelReplied,
  ToolCalled,
  ToolReturned,
  SubRunStarted,
  SubRunCompleted,
  Progress,
  BudgetWarning,
  ContextCompacted,
  ApprovalRequested,
  ApprovalDecided,
  QuestionAsked,
  QuestionAnswered,
  RunCompleted,
  GuardrailTripped,
  ModelFellBack,
  PlanUpdated])
/**
 * Any event of a run.
 *
 * @since 0.1.0
 * @category events
 */
export type AgentEvent = typeof AgentEvent.Type

/**
 * The events of one kind, by tag: `AgentEvent.Of<"ToolCalled">`.
 *
 * @since 0.1.0
 * @category events
 */
export type Of<Tag extends AgentEvent["_tag"]> = Extract<AgentEvent, { readonly _tag: Tag }>

// ---------------------------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------------------------

const separator = "__"

/**
 * The parent session id of a sub-agent's session id, or `undefined` for a root session.
 *
 * @since 0.1.0
 * @category sessions
 */
export const parentSessionId = (sessionId: string): string | undefined => {
  const at = sessionId.lastIndexOf(separator)
  return at <= 0 ? undefined : sessionId.slice(0, at)
}

/**
 * Whether `sessionId` is `root` itself or the session of one of its sub-agents, at any depth (`<root>__<role>…`).
 * Not a bare prefix test: the sub-agents of a root `<root>_` (`<root>___<role>`) begin with `<root>__` too, and are
 * another run's; a role begins with a letter or digit, never `_`.
 *
 * @since 0.2.0
 * @category sessions
 */
export const isWithinSession = (sessionId: string, root: string): boolean =>
  sessionId === root ||
  (sessionId.length > root.length + separator.length && sessionId.startsWith(root) &&
    sessionId.startsWith(separator, root.length) && sessionId.charAt(root.length + separator.length) !== "_")

/**
 * The last segment of a sub-agent's session id (`actor_2`), or `undefined` for a root session.
 *
 * @since 0.1.0
 * @category sessions
 */
export const sessionRole = (sessionId: string): string | undefined => {
  const at = sessionId.lastIndexOf(separator)
  return at <= 0 ? undefined : sessionId.slice(at + separator.length)
}

/**
 * Whether an event is the root run's own (not a sub-agent's): in a Self-Refine stream, the one `RunCompleted`
 * of the five that holds the run's result is the one for which this is true.
 *
 * @since 0.2.0
 * @category sessions
 */
export const isRoot = (event: AgentEvent): boolean => parentSessionId(event.sessionId) === undefined

/**
 * Whether `sessionId` is `ancestor` itself or one of its sub-agents, at any depth.
 *
 * @since 0.1.0
 * @category sessions
 */
export const isWithin = (sessionId: string, ancestor: string): boolean =>
  sessionId === ancestor || sessionId.startsWith(ancestor + separator)

/**
 * A predicate for `Stream.filter`: the events of one agent (`descendants: false`) or of it and its sub-agents.
 *
 * @since 0.1.0
 * @category sessions
 */
export const belongsTo = (sessionId: string, options?: { readonly descendants?: boolean }) =>
(event: AgentEvent): boolean =>
  options?.descendants === false ? event.sessionId === sessionId : isWithin(event.sessionId, sessionId)

/**
 * One agent of a run and its sub-agents, rebuilt from a merged event stream.
 *
 * @since 0.1.0
 * @category sessions
 */
export interface SessionTree {
  readonly sessionId: string
  readonly role: string | undefined
  readonly events: Array<AgentEvent>
  readonly children: Array<SessionTree>
}

/**
 * Rebuilds the tree of agents from a merged stream's events, in the order sessions first appear. A session whose
 * parent never appears becomes a root.
 *
 * @since 0.1.0
 * @category sessions
 */
export const tree = (events: Iterable<AgentEvent>): Array<SessionTree> => {
  const nodes = new Map<string, SessionTree>()
  const roots: Array<SessionTree> = []
  const nodeOf = (sessionId: string): SessionTree => {
    let node = nodes.get(sessionId)
    if (node === undefined) {
      node = { sessionId, role: sessionRole(sessionId), events: [], children: [] }
      nodes.set(sessionId, node)
      const parentId = parentSessionId(sessionId)
      const parent = parentId !== undefined ? nodes.get(parentId) : undefined
      if (parent !== undefined) parent.children.push(node)
      else roots.push(node)
    }
    return node
  }
  for (const event of events) {
    // A SubRunStarted event names the child before the child's own first event: place the child there.
    if (event._tag === "SubRunStarted") nodeOf(event.sessionId)
    nodeOf(event.sessionId).events.push(event)
    if (event._tag === "SubRunStarted") nodeOf(event.childSessionId)
  }
  return roots
}

// ---------------------------------------------------------------------------------------------------------
// Display
// ---------------------------------------------------------------------------------------------------------

const oneLine = (text: string, max = 120): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`
}

/**
 * A one-line, human-readable rendering of an event, for logs and the CLI.
 *
 * @since 0.1.0
 * @category display
 */
export const format = (event: AgentEvent): string => {
  const who = `[${event.sessionId}]`
  switch (event._tag) {
    case "RunStarted":
      return `${who} run started: ${event.agent} (${event.architecture}) ← ${oneLine(event.prompt)}`
    case "ModelCalled":
      return `${who} model call ${event.step}`
    case "TextDelta":
      return `${who} … ${JSON.stringify(event.text)}`
    case "ModelReplied": {
      const calls = event.toolCalls.map((call) => `${call.name}(${oneLine(call.arguments, 60)})`).join(", ")
      const what = calls !== "" ? `tool calls: ${calls}` : oneLine(event.text)
      return `${who} model replied ${event.step} in ${event.latencyMs} ms, ${event.usage.totalTokens} tokens: ${what}`
    }
    case "ToolCalled":
      return `${who} tool ${event.name}(${oneLine(event.arguments, 80)})`
    case "ToolReturned":
      return `${who} tool ${event.name} ${event.isError ? "failed" : "returned"} in ${event.durationMs} ms: ${oneLine(event.content)}`
    case "SubRunStarted":
      return `${who} sub-agent ${event.agent} started as ${event.childSessionId}`
    case "SubRunCompleted":
      return event.error !== undefined
        ? `${who} sub-agent ${event.childSessionId} FAILED: ${oneLine(event.error)}`
        : `${who} sub-agent ${event.childSessionId} completed${event.interrupted ? ` (interrupted: ${event.interruptionReason})` : ""}`
    case "Progress":
      return `${who} ${event.name} ${oneLine(JSON.stringify(event.data))}`
    case "BudgetWarning":
      return `${who} budget warning: ${event.limit} at ${event.used} of ${event.max}`
    case "ContextCompacted":
      return `${who} context compacted before ${event.step} (${event.strategy}): ${event.tokensBefore} → ${event.tokensAfter} tokens of ${event.contextWindow}`
    case "ApprovalRequested":
      return `${who} approval needed: ${event.name}(${oneLine(event.arguments, 80)}) [call ${event.toolCallId}]`
    case "ApprovalDecided":
      return `${who} ${event.name} [call ${event.toolCallId}] ${event.approved ? `approved${event.edited ? " with edited arguments" : ""}` : `rejected${event.reason !== undefined ? `: ${oneLine(event.reason, 80)}` : ""}`} after ${event.waitedMs} ms`
    case "QuestionAsked":
      return `${who} question ${event.questionId}: ${oneLine(event.question)}`
    case "QuestionAnswered":
      return `${who} question ${event.questionId} ${event.answered ? "answered" : `unanswered: ${oneLine(event.reason ?? "", 80)}`} after ${event.waitedMs} ms`
    case "GuardrailTripped": {
      const where = event.toolCallId !== undefined ? ` on ${event.name}(${event.phase}) [call ${event.toolCallId}]` : ""
      return `${who} guardrail ${event.guardrail} (${event.kind})${where} ${event.rewritten === true ? "rewrote" : "tripped"}: ${oneLine(event.reason, 120)}`
    }
    case "ModelFellBack":
      return `${who} model ${event.from} did not answer ${event.step} (${oneLine(event.reason, 80)}): asking ${event.to}`
    case "PlanUpdated": {
      const done = event.todos.filter((todo) => todo.status === "done").length
      const current = event.todos.find((todo) => todo.status === "in_progress")
      return `${who} plan: ${done} of ${event.todos.length} done${current !== undefined ? `, now: ${oneLine(current.content, 80)}` : ""}`
    }
    case "RunCompleted": {
      const r = event.result
      const status = r.interrupted ? `interrupted (${r.interruptionReason})` : "completed"
      return `${who} run ${status} after ${r.modelCalls} model calls, ${r.usage.totalTokens} tokens, ${r.durationMs} ms: ${oneLine(r.output)}`
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Server-Sent Events
// ---------------------------------------------------------------------------------------------------------

/**
 * Options of `toSse`: the first id, the compact form, the keep-alive interval.
 *
 * @since 0.2.0
 * @category server-sent events
 */
export type SseOptions = Sse.EncodeOptions

/**
 * A stream of events as Server-Sent Events text: `id: <n>`, `event: <_tag>`, `data: <json>` per event, a
 * `: keep-alive` comment every 15 s of quiet (`heartbeat`), and, when the stream fails, a last `event: error`
 * whose data is the typed error as JSON (`{"_tag":"ModelError",…,"message":…}`): the text never fails. With
 * `compact: true`, `data` leaves out the tag, and a `TextDelta` its timestamp and the session, step and index it
 * shares with the previous delta (`{"text":" Paris"}`); `sseDecoder` reads both forms. A pure transformation:
 * works on a stream whose requirements are not provided yet.
 *
 * @since 0.2.0
 * @category server-sent events
 */
export const toSse = <E, R>(events: Stream.Stream<AgentEvent, E, R>, options?: SseOptions): Stream.Stream<string, never, R> =>
  Sse.encode(events, options)

/**
 * The name of the SSE event that carries a run's error.
 *
 * @since 0.2.0
 * @category server-sent events
 */
export const sseErrorEvent: string = Sse.errorEvent

/**
 * A typed error as the JSON of an `event: error`.
 *
 * @since 0.2.0
 * @category server-sent events
 */
export const errorJson: (error: unknown) => Record<string, unknown> = (error) => Sse.errorJson(error)

/**
 * What `sseDecoder` answers for one SSE event: an event of the run, or the error that ended it.
 *
 * @since 0.2.0
 * @category server-sent events
 */
export type SseDecoded =
  | { readonly _tag: "Event"; readonly event: AgentEvent }
  | { readonly _tag: "Error"; readonly error: Record<string, unknown> }

/**
 * A reader of one connection's SSE events (full or compact; one per connection, fed in order): each `{ event,
 * data }` back to its `AgentEvent`, or the error that ended the run.
 *
 * @since 0.2.0
 * @category server-sent events
 */
export const sseDecoder = (): (received: { readonly event: string; readonly data: string }) => SseDecoded =>
  // The data is valet's own: the decoder restores the fields the compact form leaves out.
  Sse.decoder() as (received: { readonly event: string; readonly data: string }) => SseDecoded


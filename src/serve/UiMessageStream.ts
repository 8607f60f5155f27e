/**
 * A run as the AI SDK's UI message stream (the protocol `useChat` reads), so a React / Vue / Svelte front end built on
 * the AI SDK renders a valet run as one assistant message:
 *
 * - the root run is the message (`start` with the session id as `messageId`, `finish` with the run's usage in
 *   `messageMetadata`); each of its model calls a step (`start-step` … `finish-step`) whose text streams as
 *   `text-start` / `text-delta` / `text-end`, and whose tool calls are `tool-input-available` then
 *   `tool-output-available` (or `tool-output-error`), as dynamic tools;
 * - an architecture that answers through sub-agents (Self-Refine, Supervisor…) has no text of its own: its output
 *   is sent as a last text part, so the message always ends with the answer;
 * - each sub-agent is one `data-valet-subagent` part (`id` = its session), updated in place as it starts and ends
 *   (agent, role, status, model calls, tokens, output); the root's `Progress` events are transient
 *   `data-valet-progress` parts (seen by `onData`, not kept in the message);
 * - the run's token counts so far (its sessions' model calls summed: `usage`, with `cachedInputTokens` /
 *   `cacheWriteTokens` when the servers reported them, and `cost` when the budget has `pricing`) are `message-metadata`
 *   after each model call, so a front end shows them as the run goes (the `finish` chunk's metadata has the whole run's);
 * - each move of a fallback chain (`ModelFellBack`: which model answered a call and why the ones before did not) is a
 *   `data-valet-fallback` part, each guardrail trip or rewrite (`GuardrailTripped`) a `data-valet-guardrail` part,
 *   kept in the message, of the root or a sub-agent (`sessionId` says which);
 * - the root's plan (DeepAgent's `write_todos`, `PlanUpdated`) is one `data-valet-plan` part (`id` `plan`, its data the
 *   `todos`), replaced in place by each update;
 * - a run that fails sends an `error` chunk (`<tag>: <message>`) and ends;
 * - a tool call that waits for a person's approval (`HumanLoop`) is the protocol's own: its tool part
 *   (`tool-input-available`), then `tool-approval-request` whose `approvalId` names the run, the session and the call
 *   (`approvalIdOf`); rejected, `tool-output-denied`; approved, its output when it ran. A sub-agent's call has no tool
 *   part of the root's, so it gets one, its `toolCallId` being `<session>/<call id>`. With `endWhenWaiting` the message
 *   ends (`finish`, `finishReason: "tool-calls"`) as soon as the run has nothing to do but wait for people, which is
 *   when `useChat` can show the approvals and send the answers; `continueAfter` continues it from there (the chat
 *   route, `ChatApi`).
 *
 * `fromEvents` is a pure transformation (it works before the stream's requirements are provided); `toSse` frames
 * the chunks as the protocol's SSE (`data: <json>`, then `data: [DONE]`), to send with `headers`.
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as UiMessageStream from "valet/UiMessageStream"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Answer briefly." })
 *
 * // A run's events as the chunks `useChat` reads: start, one step with its text, finish (with the usage).
 * const chunks = Agent.stream(assistant, "2 + 2?").pipe(
 *   UiMessageStream.fromEvents,
 *   Stream.runCollect,
 *   Effect.provide(ScriptedModel.layer(["4"]))
 * )
 *
 * // The same as the protocol's SSE text, for an HTTP response sent with `UiMessageStream.headers`.
 * const body = UiMessageStream.toSse(Agent.stream(assistant, "2 + 2?")).pipe(
 *   Stream.provide(ScriptedModel.layer(["4"]))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Effect, Stream } from "effect"
import * as AgentEvent from "../core/AgentEvent.js"
import * as Model from "../core/Model.js"

/**
 * The chunks valet sends (a subset of the protocol's `UIMessageChunk`).
 *
 * @since 0.2.0
 * @category models
 */
export type UiMessageChunk =
  | { readonly type: "start"; readonly messageId: string; readonly messageMetadata?: Record<string, unknown> }
  | { readonly type: "start-step" }
  | { readonly type: "finish-step" }
  | { readonly type: "text-start"; readonly id: string }
  | { readonly type: "text-delta"; readonly id: string; readonly delta: string }
  | { readonly type: "text-end"; readonly id: string }
  | {
    readonly type: "tool-input-available"
    readonly toolCallId: string
    readonly toolName: string
    readonly input: unknown
    readonly dynamic: true
  }
  | { readonly type: "tool-output-available"; readonly toolCallId: string; readonly output: unknown; readonly dynamic: true }
  | { readonly type: "tool-output-error"; readonly toolCallId: string; readonly errorText: string; readonly dynamic: true }
  | { readonly type: "tool-approval-request"; readonly approvalId: string; readonly toolCallId: string }
  | { readonly type: "tool-output-denied"; readonly toolCallId: string }
  | { readonly type: "data-valet-subagent"; readonly id: string; readonly data: SubAgentData }
  | { readonly type: "data-valet-progress"; readonly data: Record<string, unknown>; readonly transient: true }
  | { readonly type: "data-valet-fallback"; readonly data: FallbackData }
  | { readonly type: "data-valet-guardrail"; readonly data: GuardrailData }
  | { readonly type: "message-metadata"; readonly messageMetadata: Record<string, unknown> }
  | { readonly type: "data-valet-plan"; readonly id: "plan"; readonly data: { readonly todos: ReadonlyArray<AgentEvent.Todo> } }
  | { readonly type: "finish"; readonly finishReason: "stop" | "length" | "tool-calls"; readonly messageMetadata: Record<string, unknown> }
  | { readonly type: "error"; readonly errorText: string }

/**
 * What a `data-valet-subagent` part says about one sub-agent.
 *
 * @since 0.2.0
 * @category models
 */
export interface SubAgentData {
  readonly sessionId: string
  readonly agent: string
  readonly architecture: string
  readonly status: "running" | "completed"
  readonly modelCalls?: number
  readonly totalTokens?: number
  readonly output?: string
  readonly interruptionReason?: string
}

/**
 * What a `data-valet-fallback` part says: in session `sessionId`, the model call `step` was not answered by `from`
 * (`reason`: its error, or its open circuit) and `to` was asked instead (`AgentEvent.ModelFellBack`).
 *
 * @since 0.2.0
 * @category models
 */
export interface FallbackData {
  readonly sessionId: string
  readonly step: string
  readonly from: string
  readonly to: string
  readonly reason: string
}

/**
 * What a `data-valet-guardrail` part says: a guardrail's trip or rewrite (`AgentEvent.GuardrailTripped`), in session
 * `sessionId`.
 *
 * @since 0.2.0
 * @category models
 */
export interface GuardrailData {
  readonly sessionId: string
  readonly guardrail: string
  readonly kind: "input" | "output" | "tool"
  readonly reason: string
  readonly rewritten: boolean
  readonly toolCallId?: string
  readonly name?: string
  readonly phase?: "arguments" | "result"
}

/**
 * The response headers of the protocol.
 *
 * @since 0.2.0
 * @category constants
 */
export const headers: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache",
  connection: "keep-alive",
  "x-vercel-ai-ui-message-stream": "v1",
  "x-accel-buffering": "no"
}

const parsedInput = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * Options of `fromEvents` and `toSse`.
 *
 * @since 0.2.0
 * @category models
 */
export interface Options {
  /**
   * The run the events are of (its id in `Runs`): named by each approval's `approvalId` (`approvalIdOf`), so that the
   * answer finds its run. Without it, the approval id names the session and the call only.
   */
  readonly runId?: string | undefined
  /**
   * End the message when the run has nothing left to do but wait for people: every call still going on waits for a
   * decision (or is a sub-agent's whose calls wait), and no session does anything else. The run goes on waiting;
   * `useChat` shows the approvals and sends the answers, and the answer's response continues the message.
   */
  readonly endWhenWaiting?: boolean | undefined
  /**
   * Continue a message ended by `endWhenWaiting`: the events are the run's from its first, and this is how many of
   * them there were when the answers came. The chunks start where the message ended (the last time among those events
   * the run had nothing left to do but wait), with a `start` of the same message; the translation of the earlier
   * events is only read, to know the run's state.
   */
  readonly continueAfter?: number | undefined
}

/**
 * An approval's id in the stream: `<runId>/<sessionId>/<toolCallId>` (`/` is in neither a run id nor a session id,
 * so the tool call id, which may hold anything, is all that follows the second one). Without a run id,
 * `<sessionId>/<toolCallId>`.
 *
 * @since 0.2.0
 * @category approvals
 */
export const approvalIdOf = (call: { readonly runId?: string | undefined; readonly sessionId: string; readonly toolCallId: string }): string =>
  call.runId === undefined ? `${call.sessionId}/${call.toolCallId}` : `${call.runId}/${call.sessionId}/${call.toolCallId}`

/**
 * The run, session and call an approval id of `approvalIdOf` (with a run id) names, or `undefined` for an id of
 * another form.
 *
 * @since 0.2.0
 * @category approvals
 */
export const parseApprovalId = (
  approvalId: string
): { readonly runId: string; readonly sessionId: string; readonly toolCallId: string } | undefined => {
  const first = approvalId.indexOf("/")
  const second = first < 0 ? -1 : approvalId.indexOf("/", first + 1)
  if (first <= 0 || second <= first + 1 || second === approvalId.length - 1) return undefined
  return { runId: approvalId.slice(0, first), sessionId: approvalId.slice(first + 1, second), toolCallId: approvalId.slice(second + 1) }
}

/** The tool part's id of a call: the call's own for the root's calls, `<session>/<call id>` for a sub-agent's. */
const partIdOf = (root: string | undefined, sessionId: string, toolCallId: string) =>
  sessionId === root ? toolCallId : `${sessionId}/${toolCallId}`

const key = (sessionId: string, toolCallId: string) => `${sessionId}\u0000${toolCallId}`

/** The state of one stream's translation. */
class Translator {
  root: string | undefined = undefined
  stepOpen = false
  textId: string | undefined = undefined
  rootText = false
  readonly subAgents = new Map<string, SubAgentData>()
  /** Sessions started and not completed. */
  readonly live = new Set<string>()
  /** Per session, the calls of its last model reply (or begun since) that have not returned. */
  readonly open = new Map<string, Set<string>>()
  /** Calls waiting for a decision (`key`). */
  readonly waiting = new Set<string>()
  /** Calls whose tool part was sent at their approval request (their `ToolCalled` adds nothing). */
  readonly shown = new Set<string>()
  /** Rejected calls: their part says `output-denied`; their `ToolReturned` (the rejection) adds nothing. */
  readonly denied = new Set<string>()
  /** Whether the run had nothing to do but wait for people after the last event. */
  settled = false
  /** The run's model calls so far, every session's: their usage summed, and their cost when priced. */
  usage: Model.Usage = Model.emptyUsage
  cost: number | undefined = undefined

  constructor(readonly options: Options) {}

  /**
   * Whether the run has nothing to do but wait for people: a call waits, and every live session is held by a wait,
   * its own (every call of it still going on waits) or a sub-agent's (a session under it waits: its calls still going
   * on are taken to be the ones running those sub-agents).
   */
  waitsForPeople(): boolean {
    if (this.waiting.size === 0) return false
    const waitingSessions = new Set([...this.waiting].map((k) => k.split("\u0000")[0]!))
    for (const session of this.live) {
      const below = [...waitingSessions].some((waiter) => waiter.startsWith(`${session}__`))
      if (below) continue
      if (!waitingSessions.has(session)) return false
      for (const call of this.open.get(session) ?? []) if (!this.waiting.has(key(session, call))) return false
    }
    return true
  }

  /** Approval parts, for the root's calls and its sub-agents' alike. */
  approval(event: AgentEvent.AgentEvent): Array<UiMessageChunk> {
    const partId = (sessionId: string, toolCallId: string) => partIdOf(this.root, sessionId, toolCallId)
    switch (event._tag) {
      case "ApprovalRequested": {
        const k = key(event.sessionId, event.toolCallId)
        this.waiting.add(k)
        this.shown.add(k)
        const toolCallId = partId(event.sessionId, event.toolCallId)
        return [
          { type: "tool-input-available", toolCallId, toolName: event.name, input: parsedInput(event.arguments), dynamic: true },
          {
            type: "tool-approval-request",
            approvalId: approvalIdOf({ runId: this.options.runId, sessionId: event.sessionId, toolCallId: event.toolCallId }),
            toolCallId
          }
        ]
      }
      case "ApprovalDecided": {
        const k = key(event.sessionId, event.toolCallId)
        this.waiting.delete(k)
        if (event.approved) return []
        this.denied.add(k)
        return [{ type: "tool-output-denied", toolCallId: partId(event.sessionId, event.toolCallId) }]
      }
      case "ToolReturned": {
        const k = key(event.sessionId, event.toolCallId)
        // A sub-agent's call is in the message only when it asked for approval; a rejected one is told as denied.
        if (this.denied.has(k) || (event.sessionId !== this.root && !this.shown.has(k))) return []
        const toolCallId = partId(event.sessionId, event.toolCallId)
        return [event.isError
          ? { type: "tool-output-error", toolCallId, errorText: event.content, dynamic: true }
          : { type: "tool-output-available", toolCallId, output: event.content, dynamic: true }]
      }
      default:
        return []
    }
  }

  /** Keeps what `waitsForPeople` reads. */
  track(event: AgentEvent.AgentEvent) {
    switch (event._tag) {
      case "RunStarted":
        this.live.add(event.sessionId)
        break
      case "RunCompleted":
        this.live.delete(event.sessionId)
        this.open.delete(event.sessionId)
        break
      case "ModelReplied":
        this.open.set(event.sessionId, new Set(event.toolCalls.map((call) => call.id)))
        break
      case "ToolCalled":
      case "ApprovalRequested": {
        const calls = this.open.get(event.sessionId) ?? new Set<string>()
        calls.add(event.toolCallId)
        this.open.set(event.sessionId, calls)
        break
      }
      case "ToolReturned":
        this.open.get(event.sessionId)?.delete(event.toolCallId)
        break
      default:
        break
    }
  }

  closeText(out: Array<UiMessageChunk>) {
    if (this.textId !== undefined) out.push({ type: "text-end", id: this.textId })
    this.textId = undefined
  }

  closeStep(out: Array<UiMessageChunk>) {
    this.closeText(out)
    if (this.stepOpen) out.push({ type: "finish-step" })
    this.stepOpen = false
  }

  text(out: Array<UiMessageChunk>, id: string, text: string) {
    if (this.textId !== id) {
      this.closeText(out)
      out.push({ type: "text-start", id })
      this.textId = id
    }
    out.push({ type: "text-delta", id, delta: text })
    this.rootText = true
  }

  subAgent(event: AgentEvent.AgentEvent): Array<UiMessageChunk> {
    if (event._tag === "RunStarted") {
      const data: SubAgentData = { sessionId: event.sessionId, agent: event.agent, architecture: event.architecture, status: "running" }
      this.subAgents.set(event.sessionId, data)
      return [{ type: "data-valet-subagent", id: event.sessionId, data }]
    }
    if (event._tag === "RunCompleted") {
      const started = this.subAgents.get(event.sessionId)
      const result = event.result
      const data: SubAgentData = {
        sessionId: event.sessionId,
        agent: started?.agent ?? "",
        architecture: started?.architecture ?? "",
        status: "completed",
        modelCalls: result.modelCalls,
        totalTokens: result.usage.totalTokens,
        output: result.output,
        ...(result.interruptionReason !== undefined ? { interruptionReason: result.interruptionReason } : {})
      }
      this.subAgents.set(event.sessionId, data)
      return [{ type: "data-valet-subagent", id: event.sessionId, data }]
    }
    return []
  }

  /**
   * The chunks of one event; with `endWhenWaiting`, the message's end when the run has just come to wait for people
   * (`ended` is then true).
   */
  next(event: AgentEvent.AgentEvent): { readonly chunks: Array<UiMessageChunk>; readonly ended: boolean } {
    this.track(event)
    const chunks = this.translate(event)
    const settled = this.waitsForPeople()
    const ended = this.options.endWhenWaiting === true && settled && !this.settled
    this.settled = settled
    if (ended) {
      this.closeStep(chunks)
      chunks.push({ type: "finish", finishReason: "tool-calls", messageMetadata: { sessionId: this.root, waiting: this.waiting.size } })
    }
    return { chunks, ended }
  }

  /** The chunks every session's events add: the counts so far, fallbacks, guardrail trips. */
  anySession(event: AgentEvent.AgentEvent, out: Array<UiMessageChunk>) {
    switch (event._tag) {
      case "ModelReplied":
        this.usage = Model.addUsage(this.usage, event.usage)
        if (event.cost !== undefined) this.cost = (this.cost ?? 0) + event.cost
        out.push({ type: "message-metadata", messageMetadata: this.counts() })
        break
      case "ModelFellBack":
        out.push({
          type: "data-valet-fallback",
          data: { sessionId: event.sessionId, step: event.step, from: event.from, to: event.to, reason: event.reason }
        })
        break
      case "GuardrailTripped":
        out.push({
          type: "data-valet-guardrail",
          data: {
            sessionId: event.sessionId,
            guardrail: event.guardrail,
            kind: event.kind,
            reason: event.reason,
            rewritten: event.rewritten === true,
            ...(event.toolCallId !== undefined ? { toolCallId: event.toolCallId } : {}),
            ...(event.name !== undefined ? { name: event.name } : {}),
            ...(event.phase !== undefined ? { phase: event.phase } : {})
          }
        })
        break
      default:
        break
    }
  }

  /** The counts so far, as message metadata. */
  counts(): Record<string, unknown> {
    return { usage: this.usage, ...(this.cost !== undefined ? { cost: this.cost } : {}) }
  }

  translate(event: AgentEvent.AgentEvent): Array<UiMessageChunk> {
    if (this.root === undefined && event._tag === "RunStarted") {
      this.root = event.sessionId
      return [{ type: "start", messageId: event.sessionId, messageMetadata: { sessionId: event.sessionId, agent: event.agent, architecture: event.architecture } }]
    }
    if (event._tag === "ApprovalRequested" || event._tag === "ApprovalDecided") return this.approval(event)
    if (event.sessionId !== this.root) {
      const out = event._tag === "ToolReturned" ? this.approval(event) : this.subAgent(event)
      this.anySession(event, out)
      return out
    }
    const out: Array<UiMessageChunk> = []
    this.rootEvent(event, out)
    // After the event's own chunks: a reply's counts follow its text.
    this.anySession(event, out)
    return out
  }

  /** The chunks of a root session's event. */
  rootEvent(event: AgentEvent.AgentEvent, out: Array<UiMessageChunk>) {
    switch (event._tag) {
      case "ModelCalled":
        this.closeStep(out)
        out.push({ type: "start-step" })
        this.stepOpen = true
        this.textId = undefined
        break
      case "TextDelta":
        if (event.index === 0 && event.text !== "") this.text(out, event.step, event.text)
        break
      case "ModelReplied":
        // Text that was not streamed (a run without deltas) is sent whole.
        if (this.textId !== event.step && event.text !== "") this.text(out, event.step, event.text)
        this.closeText(out)
        break
      case "ToolCalled":
        // A call that asked for approval has its part already (sent with the request).
        if (!this.shown.has(key(event.sessionId, event.toolCallId))) {
          out.push({ type: "tool-input-available", toolCallId: event.toolCallId, toolName: event.name, input: parsedInput(event.arguments), dynamic: true })
        }
        break
      case "ToolReturned":
        out.push(...this.approval(event))
        break
      case "Progress":
        out.push({ type: "data-valet-progress", data: { name: event.name, ...event.data }, transient: true })
        break
      case "PlanUpdated":
        // One part, replaced by each update (same id): the message keeps the plan as it ended.
        out.push({ type: "data-valet-plan", id: "plan", data: { todos: event.todos } })
        break
      case "RunCompleted": {
        this.closeStep(out)
        const result = event.result
        // An answer written by sub-agents (or by nobody) still ends the message.
        if (!this.rootText && result.output !== "") {
          out.push({ type: "text-start", id: "output" }, { type: "text-delta", id: "output", delta: result.output }, { type: "text-end", id: "output" })
        }
        out.push({
          type: "finish",
          finishReason: result.interrupted && result.interruptionReason?.startsWith("budget:") === true ? "length" : "stop",
          messageMetadata: {
            sessionId: result.sessionId,
            modelCalls: result.modelCalls,
            usage: result.usage,
            ...(this.cost !== undefined ? { cost: this.cost } : {}),
            durationMs: result.durationMs,
            interrupted: result.interrupted,
            ...(result.interruptionReason !== undefined ? { interruptionReason: result.interruptionReason } : {})
          }
        })
        break
      }
      default:
        break
    }
  }
}

/**
 * A run's events as UI message chunks; a failure ends the chunks with an `error` chunk (the stream itself never
 * fails). `options`: the run's id for the approval ids, ending the message when the run waits for people, continuing
 * it (`Options`).
 *
 * @since 0.2.0
 * @category encoding
 */
export const fromEvents = <E, R>(events: Stream.Stream<AgentEvent.AgentEvent, E, R>, options: Options = {}): Stream.Stream<UiMessageChunk, never, R> =>
  Stream.unwrap(Effect.sync(() => {
    const translator = new Translator(options)
    const resumeAt = options.continueAfter
    let seen = 0
    // Continuing: the chunks since the message last ended, among the events before `resumeAt` (sent when it is reached).
    let held: Array<UiMessageChunk> = []
    const step = (event: AgentEvent.AgentEvent): { readonly chunks: Array<UiMessageChunk>; readonly ended: boolean } => {
      const index = seen++
      const { chunks, ended } = translator.next(event)
      if (resumeAt === undefined || index >= resumeAt) return { chunks, ended }
      held = ended ? [] : [...held, ...chunks]
      if (index < resumeAt - 1) return { chunks: [], ended: false }
      // The last event before the answers: the message goes on from where it ended.
      const out: Array<UiMessageChunk> = [{ type: "start", messageId: translator.root ?? "" }, ...held]
      held = []
      return { chunks: out, ended: false }
    }
    return events.pipe(
      Stream.map(step),
      // The message ends with the event that left the run waiting for people (that event's chunks included).
      Stream.takeUntil((result) => result.ended),
      Stream.flatMap((result) => Stream.fromIterable(result.chunks)),
      Stream.catchCause((cause) =>
        Stream.fromEffect(Effect.sync((): UiMessageChunk => {
          const error = AgentEvent.errorJson(causeError(cause))
          return { type: "error", errorText: `${String(error._tag)}: ${String(error.message ?? "")}` }
        }))
      )
    )
  }))

const causeError = (cause: import("effect").Cause.Cause<unknown>): unknown => {
  for (const reason of cause.reasons) {
    if (reason._tag === "Fail") return reason.error
  }
  for (const reason of cause.reasons) {
    if (reason._tag === "Die") return { _tag: "Defect", message: reason.defect instanceof Error ? reason.defect.message : String(reason.defect) }
  }
  return { _tag: "Interrupted", message: "the run was interrupted" }
}

/**
 * The protocol's SSE text of a run: `data: <chunk JSON>` per chunk, then `data: [DONE]`. Send it with `headers`.
 * `options` as `fromEvents`'.
 *
 * @since 0.2.0
 * @category encoding
 */
export const toSse = <E, R>(events: Stream.Stream<AgentEvent.AgentEvent, E, R>, options: Options = {}): Stream.Stream<string, never, R> =>
  fromEvents(events, options).pipe(
    Stream.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`),
    (frames) => Stream.concat(frames, Stream.succeed("data: [DONE]\n\n"))
  )

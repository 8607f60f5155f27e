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
 * - a run that fails sends an `error` chunk (`<tag>: <message>`) and ends.
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
  | { readonly type: "data-valet-subagent"; readonly id: string; readonly data: SubAgentData }
  | { readonly type: "data-valet-progress"; readonly data: Record<string, unknown>; readonly transient: true }
  | { readonly type: "finish"; readonly finishReason: "stop" | "length"; readonly messageMetadata: Record<string, unknown> }
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

/** The state of one stream's translation. */
class Translator {
  root: string | undefined = undefined
  stepOpen = false
  textId: string | undefined = undefined
  rootText = false
  readonly subAgents = new Map<string, SubAgentData>()

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

  next(event: AgentEvent.AgentEvent): Array<UiMessageChunk> {
    if (this.root === undefined && event._tag === "RunStarted") {
      this.root = event.sessionId
      return [{ type: "start", messageId: event.sessionId, messageMetadata: { sessionId: event.sessionId, agent: event.agent, architecture: event.architecture } }]
    }
    if (event.sessionId !== this.root) return this.subAgent(event)
    const out: Array<UiMessageChunk> = []
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
        out.push({ type: "tool-input-available", toolCallId: event.toolCallId, toolName: event.name, input: parsedInput(event.arguments), dynamic: true })
        break
      case "ToolReturned":
        out.push(event.isError
          ? { type: "tool-output-error", toolCallId: event.toolCallId, errorText: event.content, dynamic: true }
          : { type: "tool-output-available", toolCallId: event.toolCallId, output: event.content, dynamic: true })
        break
      case "Progress":
        out.push({ type: "data-valet-progress", data: { name: event.name, ...event.data }, transient: true })
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
    return out
  }
}

/**
 * A run's events as UI message chunks; a failure ends the chunks with an `error` chunk (the stream itself never
 * fails).
 *
 * @since 0.2.0
 * @category encoding
 */
export const fromEvents = <E, R>(events: Stream.Stream<AgentEvent.AgentEvent, E, R>): Stream.Stream<UiMessageChunk, never, R> =>
  Stream.unwrap(Effect.sync(() => {
    const translator = new Translator()
    return events.pipe(
      Stream.flatMap((event) => Stream.fromIterable(translator.next(event))),
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
 *
 * @since 0.2.0
 * @category encoding
 */
export const toSse = <E, R>(events: Stream.Stream<AgentEvent.AgentEvent, E, R>): Stream.Stream<string, never, R> =>
  fromEvents(events).pipe(
    Stream.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`),
    (frames) => Stream.concat(frames, Stream.succeed("data: [DONE]\n\n"))
  )

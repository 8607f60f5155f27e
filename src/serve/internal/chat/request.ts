/**
 * The body the AI SDK's chat transport sends (`DefaultChatTransport.sendMessages`: the `body` option's keys, then
 * `{id, messages, trigger, messageId}`) and the run it asks for: the UI messages become the run's `history` as the
 * model reads it, the last one (a user message) the input. `ChatApi`'s module comment lists the decisions.
 *
 * The body is decoded in two passes: the envelope by the endpoint's schema (each part only needs a `type`), then
 * each part by the schema of its type, so a bad part is named by its own path (`messages[1].parts[2].toolCallId`)
 * instead of by every member of a union of thirteen part kinds.
 */
import { Result, Schema, SchemaIssue } from "effect"
import * as Model from "../../../core/Model.js"
import * as Approval from "../../../core/internal/approval.js"
import * as Decode from "../../../core/internal/decode.js"
import type * as Runs from "../../Runs.js"
import * as UiMessageStream from "../../UiMessageStream.js"

// ---------------------------------------------------------------------------------------------------------
// The body
// ---------------------------------------------------------------------------------------------------------

/** A part of a UI message: its `type`, and the keys of that type (decoded with the type's schema, below). */
export const UiMessagePart = Schema.StructWithRest(Schema.Struct({ type: Schema.String }), [
  Schema.Record(Schema.String, Schema.Unknown)
])
export type UiMessagePart = typeof UiMessagePart.Type

/** A UI message, as `useChat` keeps it (`metadata` and other keys are not read). */
export const UiMessage = Schema.Struct({
  id: Schema.optional(Schema.String),
  role: Schema.Literals(["system", "user", "assistant"]),
  parts: Schema.Array(UiMessagePart)
})
export type UiMessage = typeof UiMessage.Type

/** The transport's body: the keys valet reads; the others (the transport's `body` option) are ignored. */
export const ChatRequest = Schema.Struct({
  /**
   * The chat's id (`useChat`'s `id`): with a thread store, the thread the turn is on (created on first use); without
   * one, not read (each request is a run of its own).
   */
  id: Schema.optional(Schema.String),
  messages: Schema.Array(UiMessage).check(Schema.isMinLength(1, { expected: "at least one message" })),
  /** `submit-message` or `regenerate-message`: both run on the messages sent (the client has cut them already). */
  trigger: Schema.optional(Schema.Literals(["submit-message", "regenerate-message"])),
  /** The message edited or regenerated: not read, for the same reason. */
  messageId: Schema.optional(Schema.NullOr(Schema.String))
})
export type ChatRequest = typeof ChatRequest.Type

// ---------------------------------------------------------------------------------------------------------
// The parts
// ---------------------------------------------------------------------------------------------------------

const TextPart = Schema.Struct({ text: Schema.String })

const ToolState = Schema.Literals([
  "input-streaming",
  "input-available",
  "approval-requested",
  "approval-responded",
  "output-available",
  "output-error",
  "output-denied"
])

const ToolPart = Schema.Struct({
  toolCallId: Schema.String,
  state: ToolState,
  input: Schema.optional(Schema.Unknown),
  output: Schema.optional(Schema.Unknown),
  errorText: Schema.optional(Schema.String),
  approval: Schema.optional(Schema.Struct({
    id: Schema.optional(Schema.String),
    approved: Schema.optional(Schema.Boolean),
    reason: Schema.optional(Schema.String)
  }))
})

const DynamicToolPart = Schema.Struct({ ...ToolPart.fields, toolName: Schema.String })

/** Display data the model never read: skipped. (`step-start` is read: it ends a step.) */
const displayOnly = (type: string) => type === "source-url" || type === "source-document" || type.startsWith("data-")

/** A request the route cannot run as asked: why, naming the field (`payload: messages[1].parts[0] …`). */
export type Refusal = string

const refuse = (at: string, why: string): Result.Result<never, Refusal> => Result.fail(`payload: ${at} ${why}`)

/** `part` decoded with `schema`, or the first line naming its bad field under `at`'s path. */
const decodePart = <S extends Schema.Codec<unknown, unknown, never, never>>(
  schema: S,
  part: UiMessagePart,
  path: ReadonlyArray<PropertyKey>,
  body: ChatRequest
): Result.Result<S["Type"], Refusal> => {
  const decoded = Schema.decodeUnknownResult(schema)(part)
  if (Result.isSuccess(decoded)) return Result.succeed(decoded.success)
  return Result.fail(`payload: ${Decode.describeIssue(new SchemaIssue.Pointer(path, decoded.failure.issue), body)}`)
}

/** A tool call of an assistant step, and what became of it. */
interface Call {
  readonly call: Model.ToolCall
  /** The result the model reads; `undefined` for a call that never ended (a run cancelled while it ran). */
  readonly result: string | undefined
}

/** One step of an assistant message (one model call): its text, reasoning and tool calls. */
interface Step {
  text: string
  reasoning: string
  calls: Array<Call>
  /** A user message's text and media parts in order (read only when `media`). */
  parts: Array<Model.Part>
  media: boolean
}

const emptyStep = (): Step => ({ text: "", reasoning: "", calls: [], parts: [], media: false })

/** A tool's input as the model wrote it: JSON text (a string input is what valet could not parse: sent as it was). */
const argumentsOf = (input: unknown): string => (typeof input === "string" ? input : JSON.stringify(input ?? {}))

/** A tool's output as the model reads it: a string as it is, anything else as JSON. */
const contentOf = (output: unknown): string => (typeof output === "string" ? output : JSON.stringify(output ?? null))

const resultOf = (part: typeof ToolPart.Type): string | undefined => {
  switch (part.state) {
    case "output-available":
      return contentOf(part.output)
    case "output-error":
      return part.errorText ?? ""
    case "output-denied":
      // What the run's model read when the call was rejected (the runtime's words), so a later turn reads the same.
      return Approval.rejection(part.approval?.reason !== undefined && part.approval.reason !== "" ? part.approval.reason : undefined)
    default:
      return undefined
  }
}

/** Media types whose bytes are text an agent can read in its message: `text/*`, JSON, XML, YAML, CSV. */
const textMedia = /^(text\/[\w.+-]+|application\/(json|[\w.+-]+\+json|xml|[\w.+-]+\+xml|yaml|x-yaml|csv))$/i

/**
 * A file part as text in the message, or why it cannot be: a text file sent inline (a `data:` URL, what `useChat`
 * sends for an attachment) is given as `[file <name> (<type>)]` and its text; other files (images, PDFs) need content
 * parts valet's messages do not have yet, and a URL to fetch is not fetched (the server would reach out for a client).
 */
const textOfFile = (part: { readonly [key: string]: unknown }): Result.Result<string, string> => {
  const mediaType = typeof part.mediaType === "string" ? part.mediaType : ""
  const url = typeof part.url === "string" ? part.url : ""
  const name = typeof part.filename === "string" && part.filename !== "" ? part.filename : "attachment"
  if (!textMedia.test(mediaType.split(";")[0]!.trim())) {
    return Result.fail(`is a file of type ${JSON.stringify(mediaType.slice(0, 80))}: valet's messages are text, so an agent can be given text files only (text/*, JSON, XML, YAML, CSV)`)
  }
  const data = /^data:([^,]*),(.*)$/s.exec(url)
  if (data === null) return Result.fail("is a file by URL: give it inline (a data: URL, as useChat sends attachments); the server does not fetch URLs")
  try {
    const text = /;base64$/i.test(data[1]!)
      ? new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(data[2]!, "base64"))
      : decodeURIComponent(data[2]!)
    return Result.succeed(`[file ${name} (${mediaType})]\n${text}`)
  } catch {
    return Result.fail(`is a file whose data is not UTF-8 text`)
  }
}

/**
 * A user message's image or document (a file part that is not text) as a content part, or why it cannot be: given
 * inline (a base64 `data:` URL, what `useChat` sends) or by an http(s) URL the model's server fetches, checked as
 * every part is (`Model.partProblem`: a known media type, the size cap).
 */
const mediaPartOf = (part: { readonly [key: string]: unknown }): Result.Result<Model.Part, string> => {
  const mediaType = typeof part.mediaType === "string" ? part.mediaType.split(";")[0]!.trim().toLowerCase() : ""
  const url = typeof part.url === "string" ? part.url : ""
  const inline = /^data:([^;,]+);base64,/i.exec(url)
  const source = inline !== null ? { data: url.slice(inline[0].length) } : { url }
  const converted: Model.Part = Model.imageMediaTypes.includes(mediaType)
    ? { type: "image", ...source, ...(inline !== null ? { mediaType } : {}) }
    : { type: "file", ...source, mediaType, ...(typeof part.filename === "string" && part.filename !== "" ? { name: part.filename } : {}) }
  const problem = Model.partProblem(converted)
  return problem === undefined ? Result.succeed(converted) : Result.fail(`is a file valet cannot send: ${problem}`)
}

/** A message's parts as steps (split at `step-start`), or why a part cannot be given to an agent. */
const stepsOf = (message: UiMessage, i: number, body: ChatRequest): Result.Result<Array<Step>, Refusal> => {
  const steps: Array<Step> = [emptyStep()]
  for (let j = 0; j < message.parts.length; j++) {
    const part = message.parts[j]!
    const at = `messages[${i}].parts[${j}]`
    const path = ["messages", i, "parts", j]
    const step = steps.at(-1)!
    const type = part.type
    if (type === "step-start") {
      steps.push(emptyStep())
    } else if (type === "text" || type === "reasoning") {
      const decoded = decodePart(TextPart, part, path, body)
      if (Result.isFailure(decoded)) return Result.fail(decoded.failure)
      if (type === "reasoning" && message.role !== "assistant") return refuse(at, `is reasoning in a ${message.role} message: only an assistant reasons`)
      // Parts are blocks of their own: a line between two, so that "Hello" and "world" do not read "Helloworld".
      if (type === "text") {
        step.text = step.text === "" ? decoded.success.text : `${step.text}\n${decoded.success.text}`
        step.parts.push(Model.textPart(decoded.success.text))
      }
      else step.reasoning = step.reasoning === "" ? decoded.success.text : `${step.reasoning}\n${decoded.success.text}`
    } else if (type === "dynamic-tool" || type.startsWith("tool-")) {
      if (message.role !== "assistant") return refuse(at, `is a tool call in a ${message.role} message: only an assistant calls tools`)
      const name = type === "dynamic-tool" ? undefined : type.slice("tool-".length)
      if (name === "") return refuse(`${at}.type`, `names no tool: "tool-" is followed by the tool's name`)
      const decoded = decodePart(name === undefined ? DynamicToolPart : ToolPart, part, path, body)
      if (Result.isFailure(decoded)) return Result.fail(decoded.failure)
      const tool = decoded.success
      step.calls.push({
        call: { id: tool.toolCallId, name: name ?? (tool as typeof DynamicToolPart.Type).toolName, arguments: argumentsOf(tool.input) },
        result: resultOf(tool)
      })
    } else if (type === "file" && message.role === "user" && !textMedia.test(String(part.mediaType ?? "").split(";")[0]!.trim())) {
      const media = mediaPartOf(part)
      if (Result.isFailure(media)) return refuse(at, media.failure)
      step.parts.push(media.success)
      step.media = true
    } else if (type === "file") {
      const text = textOfFile(part)
      if (Result.isFailure(text)) return refuse(at, text.failure)
      step.text = step.text === "" ? text.success : `${step.text}\n${text.success}`
      step.parts.push(Model.textPart(text.success))
    } else if (!displayOnly(type)) {
      return refuse(
        `${at}.type`,
        `is ${JSON.stringify(type.slice(0, 80))}, a part valet cannot give an agent (it takes text, reasoning, tool-<name>, ` +
          `dynamic-tool, step-start, and skips source-url, source-document and data-<name>)`
      )
    }
  }
  return Result.succeed(steps)
}

/** A UI message as the model reads it: one message (system, user), or per step an assistant message and its results. */
const modelMessagesOf = (message: UiMessage, i: number, body: ChatRequest): Result.Result<Array<Model.Message>, Refusal> => {
  const steps = stepsOf(message, i, body)
  if (Result.isFailure(steps)) return Result.fail(steps.failure)
  if (message.role !== "assistant") {
    const text = steps.success.map((step) => step.text).join("")
    if (message.role === "user" && steps.success.some((step) => step.media)) {
      return Result.succeed([Model.user(steps.success.flatMap((step) => step.parts))])
    }
    return Result.succeed([message.role === "system" ? Model.system(text) : Model.user(text)])
  }
  const out: Array<Model.Message> = []
  for (const step of steps.success) {
    // A call that never ended is left out: the model would read a call without its result, which it cannot follow.
    const ended = step.calls.filter((call) => call.result !== undefined)
    if (step.text === "" && step.reasoning === "" && ended.length === 0) continue
    const assistant = Model.assistant(step.text, ended.map((call) => call.call))
    out.push(step.reasoning === "" ? assistant : { ...assistant, reasoning: step.reasoning })
    for (const call of ended) out.push(Model.toolResult(call.call.id, call.call.name, call.result!))
  }
  return Result.succeed(out)
}

/**
 * The run a chat request asks for on `agent`: every message but the last as the run's history, in order (an
 * assistant message as one assistant message per step, each followed by its tool results), the last one, a user
 * message, as the input. Or why it cannot run, naming the field.
 */
export const runRequestOf = (agent: string, body: ChatRequest): Result.Result<Runs.RunRequest, Refusal> => {
  const last = body.messages.length - 1
  const history: Array<Model.Message> = []
  for (let i = 0; i < last; i++) {
    const messages = modelMessagesOf(body.messages[i]!, i, body)
    if (Result.isFailure(messages)) return Result.fail(messages.failure)
    history.push(...messages.success)
  }
  const text = inputOf(body)
  if (Result.isFailure(text)) return Result.fail(text.failure)
  const ids = new Set<string>()
  for (const message of history) {
    for (const call of message.role === "assistant" ? message.toolCalls ?? [] : []) {
      if (ids.has(call.id)) return refuse("messages", `hold two tool calls with the id ${JSON.stringify(call.id)}: each call's result must be its own`)
      ids.add(call.id)
    }
  }
  return Result.succeed({ agent, input: text.success, ...(history.length > 0 ? { history } : {}) })
}

/** The last message's content, the input: it must be a user message with text, images or documents. */
const inputOf = (body: ChatRequest): Result.Result<Model.Content, Refusal> => {
  const last = body.messages.length - 1
  const final = body.messages[last]!
  if (final.role !== "user") {
    return refuse(`messages[${last}].role`, `must be "user" (the agent answers the last message), got ${JSON.stringify(final.role)}`)
  }
  const input = modelMessagesOf(final, last, body)
  if (Result.isFailure(input)) return Result.fail(input.failure)
  const content = input.success[0]!.content
  if (typeof content !== "string") return Result.succeed(content)
  if (content.trim() === "") return refuse(`messages[${last}].parts`, "hold no text: the last user message is what the agent answers")
  return Result.succeed(content)
}

/**
 * The turn a chat request asks for on a thread (the chat `id`): the last message, a user message, as the input;
 * the earlier messages the client sent are not read (the thread holds the conversation). Or why it cannot run.
 */
export const turnRequestOf = (agent: string, body: ChatRequest): Result.Result<Runs.ThreadRunRequest, Refusal> =>
  Result.flatMap(inputOf(body), (input) =>
    typeof input === "string"
      ? Result.succeed({ agent, input })
      : refuse(
        `messages[${body.messages.length - 1}].parts`,
        "hold images or documents: a thread's turns are text (a chat without a thread takes them)"
      ))

// ---------------------------------------------------------------------------------------------------------
// Approval answers
// ---------------------------------------------------------------------------------------------------------

/** One approval answered in the last (assistant) message: the call it names and the decision. */
export interface ApprovalAnswer {
  readonly sessionId: string
  readonly toolCallId: string
  readonly decision: { readonly approved: boolean; readonly reason?: string | undefined }
}

/** The answers of one request: all of one run (one message of one run asked for them). */
export interface ApprovalAnswers {
  readonly runId: string
  readonly answers: ReadonlyArray<ApprovalAnswer>
}

/**
 * The approval answers a request carries, when its last message is an assistant message (what `useChat` sends after
 * `addToolApprovalResponse`: the message it showed, its tool parts `approval-responded`), else `undefined`. Refused,
 * naming the field: an assistant message answering nothing, an answer without its id or decision, an id the stream
 * did not give (`UiMessageStream.approvalIdOf`), answers for two runs.
 */
export const approvalAnswersOf = (body: ChatRequest): Result.Result<ApprovalAnswers, Refusal> | undefined => {
  const last = body.messages.length - 1
  const final = body.messages[last]!
  if (final.role !== "assistant") return undefined
  const answers: Array<ApprovalAnswer> = []
  let runId: string | undefined
  for (let j = 0; j < final.parts.length; j++) {
    const part = final.parts[j]!
    if (!(part.type === "dynamic-tool" || part.type.startsWith("tool-")) || part.state !== "approval-responded") continue
    const at = `messages[${last}].parts[${j}]`
    const decoded = decodePart(ToolPart, part, ["messages", last, "parts", j], body)
    if (Result.isFailure(decoded)) return Result.fail(decoded.failure)
    const approval = decoded.success.approval
    if (approval?.id === undefined) return refuse(`${at}.approval.id`, "is missing: an approval answer names the approval it answers")
    if (approval.approved === undefined) return refuse(`${at}.approval.approved`, "is missing: an approval answer says whether the call is approved")
    const named = UiMessageStream.parseApprovalId(approval.id)
    if (named === undefined) {
      return refuse(`${at}.approval.id`, `${JSON.stringify(approval.id.slice(0, 80))} is not an approval id this server gave (<runId>/<sessionId>/<toolCallId>)`)
    }
    if (runId !== undefined && named.runId !== runId) {
      return refuse(`${at}.approval.id`, `names the run ${JSON.stringify(named.runId)}, another answer of the message ${JSON.stringify(runId)}: one message answers one run`)
    }
    runId = named.runId
    answers.push({
      sessionId: named.sessionId,
      toolCallId: named.toolCallId,
      decision: { approved: approval.approved, ...(approval.reason !== undefined && approval.reason !== "" ? { reason: approval.reason } : {}) }
    })
  }
  if (runId === undefined) {
    return refuse(
      `messages[${last}].role`,
      `must be "user" (the agent answers the last message), got "assistant" answering no approval (no tool part in state "approval-responded")`
    )
  }
  return Result.succeed({ runId, answers })
}

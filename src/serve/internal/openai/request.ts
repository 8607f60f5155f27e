/**
 * A `/v1/chat/completions` body and the run it asks for: the conversation becomes the run's history and input, the
 * parameters valet can honour become the run's options, and every other parameter that would change the answer is
 * refused by name (`InvalidChatRequest`), never silently dropped. `OpenAiApi`'s module comment lists the decisions.
 */
import { Result, Schema } from "effect"
import * as Model from "../../../core/Model.js"
import * as Runs from "../../Runs.js"
import * as OutputSchema from "../outputSchema.js"

// ---------------------------------------------------------------------------------------------------------
// The body
// ---------------------------------------------------------------------------------------------------------

/** A content part: its kind's object is read by `partOf`, which names what is wrong in it. */
const ContentPart = Schema.Struct({
  type: Schema.String,
  text: Schema.optional(Schema.String),
  /** A prompt-cache breakpoint on a text part (OpenRouter's and LiteLLM's `{type: "ephemeral", ttl?}`). */
  cache_control: Schema.optional(Schema.NullOr(Schema.Struct({ type: Schema.String, ttl: Schema.optional(Schema.String) }))),
  image_url: Schema.optional(Schema.Unknown),
  input_audio: Schema.optional(Schema.Unknown),
  file: Schema.optional(Schema.Unknown)
})
type ContentPart = typeof ContentPart.Type

const ToolCallParam = Schema.Struct({
  id: Schema.String,
  type: Schema.optional(Schema.Literal("function")),
  function: Schema.Struct({ name: Schema.String, arguments: Schema.String })
})

/** A message of the conversation, as OpenAI clients send it (other keys are ignored). */
export const ChatMessage = Schema.Struct({
  role: Schema.Literals(["system", "developer", "user", "assistant", "tool"]),
  content: Schema.optional(Schema.NullOr(Schema.Union([Schema.String, Schema.Array(ContentPart)]))),
  name: Schema.optional(Schema.String),
  /** An assistant message's tool calls. */
  tool_calls: Schema.optional(Schema.NullOr(Schema.Array(ToolCallParam))),
  /** A tool message: the id of the call it answers. */
  tool_call_id: Schema.optional(Schema.String),
  /** The deprecated functions API (refused). */
  function_call: Schema.optional(Schema.NullOr(Schema.Unknown))
})
export type ChatMessage = typeof ChatMessage.Type

const Count = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

/** The request body: the keys valet reads (see `OpenAiApi`'s module comment for each); the others are ignored. */
export const ChatCompletionRequest = Schema.Struct({
  model: Schema.String,
  messages: Schema.Array(ChatMessage).check(Schema.isMinLength(1, { expected: "at least one message" })),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stream_options: Schema.optional(Schema.NullOr(Schema.Struct({ include_usage: Schema.optional(Schema.NullOr(Schema.Boolean)) }))),
  n: Schema.optional(Schema.NullOr(Count)),
  max_tokens: Schema.optional(Schema.NullOr(Count)),
  max_completion_tokens: Schema.optional(Schema.NullOr(Count)),
  response_format: Schema.optional(Schema.NullOr(Schema.Struct({
    type: Schema.String,
    json_schema: Schema.optional(Schema.Struct({
      name: Schema.String,
      description: Schema.optional(Schema.String),
      schema: Schema.optional(Model.JsonObject),
      strict: Schema.optional(Schema.NullOr(Schema.Boolean))
    }))
  }))),
  tools: Schema.optional(Schema.NullOr(Schema.Array(Schema.Unknown))),
  tool_choice: Schema.optional(Schema.NullOr(Schema.Unknown)),
  functions: Schema.optional(Schema.NullOr(Schema.Array(Schema.Unknown))),
  function_call: Schema.optional(Schema.NullOr(Schema.Unknown)),
  logprobs: Schema.optional(Schema.NullOr(Schema.Boolean)),
  top_logprobs: Schema.optional(Schema.NullOr(Schema.Int)),
  modalities: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  audio: Schema.optional(Schema.NullOr(Schema.Unknown)),
  web_search_options: Schema.optional(Schema.NullOr(Schema.Unknown))
})
export type ChatCompletionRequest = typeof ChatCompletionRequest.Type

/**
 * A request the facade cannot run as asked: OpenAI's 400 `invalid_request_error`, naming the parameter (`param`:
 * `n`, `tools`, `messages[2].tool_call_id`…) and why.
 */
export class InvalidChatRequest extends Schema.TaggedError<InvalidChatRequest>()("InvalidChatRequest", {
  param: Schema.String,
  /** `unsupported_parameter`, `unsupported_value` or `invalid_value`, as OpenAI spells them. */
  code: Schema.String,
  message: Schema.String
}) {}

export const unsupported = (param: string, why: string) =>
  Result.fail(new InvalidChatRequest({ param, code: "unsupported_parameter", message: `Unsupported parameter: '${param}': ${why}` }))

export const unsupportedValue = (param: string, why: string) =>
  Result.fail(new InvalidChatRequest({ param, code: "unsupported_value", message: `Unsupported value: '${param}': ${why}` }))

export const invalid = (param: string, why: string) =>
  Result.fail(new InvalidChatRequest({ param, code: "invalid_value", message: `Invalid '${param}': ${why}` }))

// ---------------------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------------------

export const agentWithOwnTools = "an agent calls its own tools, inside the run; its answer is text, never a tool call for the client to run"

/** The structured output asked for, as a JSON Schema; `undefined` for text. */
const outputOf = (
  format: ChatCompletionRequest["response_format"]
): Result.Result<Model.JsonObject | undefined, InvalidChatRequest> => {
  if (format === undefined || format === null || format.type === "text") return Result.succeed(undefined)
  // Any JSON object: asked natively with the schema `{"type": "object"}`, decoded, repaired when it is not one.
  if (format.type === "json_object") return Result.succeed({ type: "object" })
  if (format.type !== "json_schema") {
    return unsupportedValue("response_format.type", `${JSON.stringify(format.type)} is not one of "text", "json_object", "json_schema"`)
  }
  const schema = format.json_schema?.schema
  if (schema === undefined) return invalid("response_format.json_schema.schema", "a json_schema response format needs its schema")
  const imported = OutputSchema.fromJsonSchema(schema)
  if (Result.isFailure(imported)) {
    return unsupportedValue("response_format.json_schema.schema", `valet cannot check answers against this schema: ${imported.failure}`)
  }
  return Result.succeed(schema)
}

/** Every parameter that would change the answer and that valet cannot honour, refused by name. */
/** A client's value in a message: a short string as it is, anything else by its kind (never serialized whole). */
export const described = (value: unknown): string =>
  typeof value === "string"
    ? JSON.stringify(value.slice(0, 80))
    : typeof value === "number" || typeof value === "boolean" || value === null
    ? String(value)
    : Array.isArray(value)
    ? "an array"
    : "an object"

const refused = (request: ChatCompletionRequest): Result.Result<void, InvalidChatRequest> => {
  if (request.n !== undefined && request.n !== null && request.n > 1) {
    return unsupportedValue("n", `an agent's run gives one answer, so n must be 1, got ${request.n}`)
  }
  if (request.tools !== undefined && request.tools !== null && request.tools.length > 0) {
    return unsupported("tools", agentWithOwnTools)
  }
  const choice = request.tool_choice
  if (choice !== undefined && choice !== null && choice !== "none" && choice !== "auto") {
    return unsupportedValue("tool_choice", `only "none" and "auto" (${agentWithOwnTools}), got ${described(choice)}`)
  }
  if (request.functions !== undefined && request.functions !== null && request.functions.length > 0) {
    return unsupported("functions", agentWithOwnTools)
  }
  const functionCall = request.function_call
  if (functionCall !== undefined && functionCall !== null && functionCall !== "none" && functionCall !== "auto") {
    return unsupportedValue("function_call", `only "none" and "auto" (${agentWithOwnTools}), got ${described(functionCall)}`)
  }
  if (request.logprobs === true) return unsupported("logprobs", "an agent's answer is not one sampled completion: it has no log-probabilities")
  if (request.top_logprobs !== undefined && request.top_logprobs !== null && request.top_logprobs > 0) {
    return unsupported("top_logprobs", "an agent's answer is not one sampled completion: it has no log-probabilities")
  }
  const modalities = request.modalities ?? []
  const other = modalities.find((modality) => modality !== "text")
  if (other !== undefined) return unsupportedValue("modalities", `an agent answers in text only, got ${JSON.stringify(other)}`)
  if (request.audio !== undefined && request.audio !== null) return unsupported("audio", "an agent answers in text only")
  if (request.web_search_options !== undefined && request.web_search_options !== null) {
    return unsupported("web_search_options", "an agent searches with its own tools, if it has any")
  }
  return Result.succeed(undefined)
}

// ---------------------------------------------------------------------------------------------------------
// The conversation
// ---------------------------------------------------------------------------------------------------------

export const isRecord = (u: unknown): u is Readonly<Record<string, unknown>> => typeof u === "object" && u !== null && !Array.isArray(u)

/** `data:<media type>;base64,<data>` split, or `undefined` when the text is not such a URL. */
export const splitDataUrl = (url: string): { readonly mediaType: string; readonly data: string } | undefined => {
  const match = /^data:([^;,]+);base64,/i.exec(url)
  return match === null ? undefined : { mediaType: match[1]!.toLowerCase(), data: url.slice(match[0].length) }
}

/**
 * A user message's media part (`image_url`, `input_audio`, `file` with `file_data`) as a valet part, checked as
 * every part is (`Model.partProblem`: media type, URL scheme, size), or why not, naming the field.
 */
const partOf = (part: ContentPart, at: string): Result.Result<Model.Part, InvalidChatRequest> => {
  let out: Model.Part
  switch (part.type) {
    case "image_url": {
      const image = part.image_url
      if (!isRecord(image) || typeof image.url !== "string") return invalid(`${at}.image_url`, "an image_url part has {\"url\": string}")
      const detail: { readonly detail?: "auto" | "low" | "high" } =
        image.detail === "auto" || image.detail === "low" || image.detail === "high" ? { detail: image.detail } : {}
      const data = splitDataUrl(image.url)
      out = data !== undefined ? { type: "image", ...data, ...detail } : { type: "image", url: image.url, ...detail }
      break
    }
    case "input_audio": {
      const audio = part.input_audio
      if (!isRecord(audio) || typeof audio.data !== "string" || typeof audio.format !== "string") {
        return invalid(`${at}.input_audio`, "an input_audio part has {\"data\": base64, \"format\": string}")
      }
      if (!Schema.is(Model.AudioFormat)(audio.format)) {
        return unsupportedValue(`${at}.input_audio.format`, `unknown audio format ${JSON.stringify(audio.format)} (known: ${Model.AudioFormat.literals.join(", ")})`)
      }
      out = { type: "audio", data: audio.data, format: audio.format }
      break
    }
    case "file": {
      const file = part.file
      if (isRecord(file) && typeof file.file_id === "string") {
        return unsupportedValue(`${at}.file.file_id`, "there is no file store here: send the file's bytes as file_data")
      }
      const data = isRecord(file) && typeof file.file_data === "string" ? splitDataUrl(file.file_data) : undefined
      if (!isRecord(file) || data === undefined) {
        return invalid(`${at}.file`, "a file part has {\"file_data\": \"data:<media type>;base64,...\"}")
      }
      out = { type: "file", ...data, ...(typeof file.filename === "string" ? { name: file.filename } : {}) }
      break
    }
    default:
      return unsupportedValue(`${at}.type`, `unknown content part type ${JSON.stringify(part.type)} (known: text, image_url, input_audio, file)`)
  }
  const problem = Model.partProblem(out)
  return problem === undefined ? Result.succeed(out) : invalid(at, problem)
}

/**
 * A message's content: its text, and for a user message with images, audio or files, or with a cache breakpoint on
 * a text part, its parts. Other roles read text only; a system message with a breakpoint on a text part is marked
 * whole (`cacheControl`); on an assistant or tool message it is not kept. A breakpoint's `ttl` is not kept either (it
 * changes the provider's bill, not the answer).
 */
const contentOf = (
  message: ChatMessage,
  at: string
): Result.Result<
  { readonly text: string; readonly parts?: ReadonlyArray<Model.Part>; readonly cacheControl?: Model.CacheControl },
  InvalidChatRequest
> => {
  const content = message.content
  if (content === undefined || content === null) return Result.succeed({ text: "" })
  if (typeof content === "string") return Result.succeed({ text: content })
  let text = ""
  let media = false
  let marked = false
  const parts: Array<Model.Part> = []
  for (let j = 0; j < content.length; j++) {
    const part = content[j]!
    if (part.type === "text" || part.type === "input_text") {
      const control = part.cache_control
      if (control !== undefined && control !== null && control.type !== "ephemeral") {
        return unsupportedValue(`${at}.content[${j}].cache_control.type`, `a cache breakpoint is {"type": "ephemeral"}, got ${JSON.stringify(control.type)}`)
      }
      const cacheControl = control !== undefined && control !== null ? "ephemeral" as const : undefined
      marked ||= cacheControl !== undefined
      text += part.text ?? ""
      parts.push(Model.textPart(part.text ?? "", { cacheControl }))
      continue
    }
    if (message.role !== "user") {
      return unsupportedValue(`${at}.content[${j}].type`, `a ${message.role} message holds text only, got a content part of type ${JSON.stringify(part.type)}`)
    }
    const converted = partOf(part, `${at}.content[${j}]`)
    if (Result.isFailure(converted)) return Result.fail(converted.failure)
    parts.push(converted.success)
    media = true
  }
  if (media || (marked && message.role === "user")) return Result.succeed({ text, parts })
  return Result.succeed(marked ? { text, cacheControl: "ephemeral" } : { text })
}

/** The conversation as the model reads it: tool calls and results kept as such, every tool call answered. */
const historyOf = (messages: ReadonlyArray<ChatMessage>): Result.Result<Array<Model.Message>, InvalidChatRequest> => {
  const history: Array<Model.Message> = []
  // The tool calls of the last assistant message not answered yet, by id: their name, and where they were asked.
  let open = new Map<string, { readonly name: string; readonly at: string }>()
  const unanswered = () => {
    const [id, call] = open.entries().next().value!
    return invalid(
      `${call.at}.tool_calls`,
      `the tool call ${JSON.stringify(id)} has no tool message answering it (each tool call is answered by a message ` +
        `{"role": "tool", "tool_call_id": ${JSON.stringify(id)}} right after the assistant message)`
    )
  }
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    const at = `messages[${i}]`
    if (message.role !== "tool" && open.size > 0) return unanswered()
    const read = contentOf(message, at)
    if (Result.isFailure(read)) return Result.fail(read.failure)
    const content = read.success.text
    switch (message.role) {
      case "system":
      case "developer":
        history.push(Model.system(content, { cacheControl: read.success.cacheControl }))
        break
      case "user":
        history.push(Model.user(read.success.parts ?? content))
        break
      case "assistant": {
        if (message.function_call !== undefined && message.function_call !== null) {
          return unsupported(`${at}.function_call`, "the deprecated functions API: send tool_calls")
        }
        const calls = (message.tool_calls ?? []).map((call): Model.ToolCall => ({
          id: call.id,
          name: call.function.name,
          arguments: call.function.arguments
        }))
        open = new Map(calls.map((call) => [call.id, { name: call.name, at }] as const))
        if (open.size < calls.length) {
          return invalid(`${at}.tool_calls`, "two tool calls have the same id")
        }
        history.push(Model.assistant(content, calls))
        break
      }
      case "tool": {
        const id = message.tool_call_id
        if (id === undefined) return invalid(`${at}.tool_call_id`, "a tool message names the tool call it answers")
        const call = open.get(id)
        if (call === undefined) {
          return invalid(
            `${at}.tool_call_id`,
            `${JSON.stringify(id)} is not a tool call of the assistant message before it that is not answered yet`
          )
        }
        open.delete(id)
        history.push(Model.toolResult(id, call.name, content))
        break
      }
    }
  }
  if (open.size > 0) return unanswered()
  return Result.succeed(history)
}

/**
 * The run a request asks for, or why it cannot run: the conversation (see `OpenAiApi`'s module comment), the
 * structured output of `response_format`, `max_completion_tokens` / `max_tokens` as the run's output-token budget.
 */
export const runRequestOf = (request: ChatCompletionRequest): Result.Result<Runs.RunRequest, InvalidChatRequest> => {
  const problem = refused(request)
  if (Result.isFailure(problem)) return Result.fail(problem.failure)
  const output = outputOf(request.response_format)
  if (Result.isFailure(output)) return Result.fail(output.failure)
  const conversation = historyOf(request.messages)
  if (Result.isFailure(conversation)) return Result.fail(conversation.failure)
  const maxOutputTokens = request.max_completion_tokens ?? request.max_tokens ?? undefined
  return runOfConversation(request.model, conversation.success, { output: output.success, maxOutputTokens }, "messages")
}

/**
 * The run of a conversation already read into messages (the chat facade's and the Responses facade's): refused when
 * it has no user message (`param` names where the conversation is); else the last user message is the input when
 * it is text (or, with `partsInput`, parts) and nothing follows it, and every message before it the history.
 */
export const runOfConversation = (
  agent: string,
  messages: ReadonlyArray<Model.Message>,
  options: {
    readonly output?: Model.JsonObject | undefined
    readonly maxOutputTokens?: number | undefined
    readonly partsInput?: boolean | undefined
  },
  param: string
): Result.Result<Runs.RunRequest, InvalidChatRequest> => {
  const history = [...messages]
  if (!history.some((message) => message.role === "user")) {
    return invalid(param, "the conversation has no user message: an agent runs on what a user asks")
  }
  // The last user message is the input when nothing follows it. When tool results or assistant messages follow it,
  // every message is history, in order, and the input is empty: what the agent goes on from is the conversation.
  const last = history.at(-1)!
  // A last user message with images, audio or files: with `partsInput`, the input as parts (the run's task: a thread
  // turn keeps it whole, never as an empty message); else it stays in the history, the input empty (the chat
  // facade's runs keep nothing, and the model reads the same conversation).
  const taken = last.role === "user" && (typeof last.content === "string" || options.partsInput === true)
  const input = taken ? last.content as Runs.RunRequest["input"] : ""
  if (taken) history.pop()
  const { maxOutputTokens, output } = options
  return Result.succeed({
    agent,
    input,
    ...(history.length > 0 ? { history } : {}),
    ...(output !== undefined ? { output } : {}),
    ...(maxOutputTokens !== undefined ? { budget: { maxOutputTokens } } : {})
  })
}

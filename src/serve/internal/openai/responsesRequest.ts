/**
 * A `/v1/responses` body and the run it asks for: `instructions` and the input items become the run's history and
 * input (through the chat facade's `runOfConversation`, so both facades read a conversation alike), the parameters
 * valet can honour become the run's options, and every other parameter or item that would change the answer is
 * refused by name (`InvalidChatRequest`, OpenAI's 400), never silently dropped. `OpenAiApi`'s module comment lists
 * the decisions.
 */
import { Result, Schema } from "effect"
import * as Model from "../../../core/Model.js"
import type * as Runs from "../../Runs.js"
import * as OutputSchema from "../outputSchema.js"
import {
  agentWithOwnTools,
  described,
  invalid,
  InvalidChatRequest,
  isRecord,
  runOfConversation,
  splitDataUrl,
  unsupported,
  unsupportedValue
} from "./request.js"

// ---------------------------------------------------------------------------------------------------------
// The body
// ---------------------------------------------------------------------------------------------------------

/**
 * An input item, loosely: its kind's fields are read by `itemsOf`, which names what is wrong in an item by its path
 * (`input[3].type`), as OpenAI does, instead of a union's decoding failure.
 */
const InputItem = Schema.Struct({
  type: Schema.optional(Schema.String),
  role: Schema.optional(Schema.String),
  content: Schema.optional(Schema.NullOr(Schema.Union([Schema.String, Schema.Array(Schema.Unknown)]))),
  id: Schema.optional(Schema.NullOr(Schema.String)),
  call_id: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String),
  arguments: Schema.optional(Schema.String),
  output: Schema.optional(Schema.Unknown)
})
type InputItem = typeof InputItem.Type

const Count = Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))

/** `text.format`: `text`, `json_object`, or `json_schema` with its schema beside `type` (not nested, unlike chat). */
const TextFormat = Schema.Struct({
  type: Schema.String,
  name: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
  schema: Schema.optional(Model.JsonObject),
  strict: Schema.optional(Schema.NullOr(Schema.Boolean))
})

/** The request body: the keys valet reads (see `OpenAiApi`'s module comment for each); the others are ignored. */
export const ResponseCreateRequest = Schema.Struct({
  model: Schema.String,
  input: Schema.Union([Schema.String, Schema.Array(InputItem)]),
  instructions: Schema.optional(Schema.NullOr(Schema.String)),
  previous_response_id: Schema.optional(Schema.NullOr(Schema.String)),
  store: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  max_output_tokens: Schema.optional(Schema.NullOr(Count)),
  text: Schema.optional(Schema.NullOr(Schema.Struct({ format: Schema.optional(Schema.NullOr(TextFormat)) }))),
  tools: Schema.optional(Schema.NullOr(Schema.Array(Schema.Unknown))),
  tool_choice: Schema.optional(Schema.NullOr(Schema.Unknown)),
  metadata: Schema.optional(Schema.NullOr(Schema.Record(Schema.String, Schema.String))),
  include: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  background: Schema.optional(Schema.NullOr(Schema.Boolean)),
  conversation: Schema.optional(Schema.NullOr(Schema.Unknown)),
  prompt: Schema.optional(Schema.NullOr(Schema.Unknown)),
  top_logprobs: Schema.optional(Schema.NullOr(Schema.Int))
})
export type ResponseCreateRequest = typeof ResponseCreateRequest.Type

// ---------------------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------------------

const present = <A>(value: A | null | undefined): value is A => value !== undefined && value !== null

const refused = (request: ResponseCreateRequest, context: Context): Result.Result<void, InvalidChatRequest> => {
  if (present(request.tools) && request.tools.length > 0) return unsupported("tools", agentWithOwnTools)
  const choice = request.tool_choice
  if (present(choice) && choice !== "none" && choice !== "auto") {
    return unsupportedValue("tool_choice", `only "none" and "auto" (${agentWithOwnTools}), got ${described(choice)}`)
  }
  if (request.background === true) {
    return unsupported("background", "start a run that goes on in the server with POST /runs, and read it with GET /runs/:runId")
  }
  if (present(request.conversation)) return unsupported("conversation", "this server keeps no OpenAI conversations: send the items")
  if (present(request.prompt)) return unsupported("prompt", "this server keeps no prompt templates: send instructions and input")
  if (present(request.top_logprobs) && request.top_logprobs > 0) {
    return unsupported("top_logprobs", "an agent's answer is not one sampled completion: it has no log-probabilities")
  }
  if (present(request.previous_response_id) && context.unstored !== undefined && context.previous === undefined) {
    return unsupported("previous_response_id", `${context.unstored}: send the whole conversation as input items`)
  }
  return Result.succeed(undefined)
}

/** The structured output `text.format` asks for, as a JSON Schema; `undefined` for text. */
const outputOf = (request: ResponseCreateRequest): Result.Result<Model.JsonObject | undefined, InvalidChatRequest> => {
  const format = request.text?.format
  if (!present(format) || format.type === "text") return Result.succeed(undefined)
  if (format.type === "json_object") return Result.succeed({ type: "object" })
  if (format.type !== "json_schema") {
    return unsupportedValue("text.format.type", `${JSON.stringify(format.type)} is not one of "text", "json_object", "json_schema"`)
  }
  if (format.schema === undefined) return invalid("text.format.schema", "a json_schema format needs its schema")
  const imported = OutputSchema.fromJsonSchema(format.schema)
  if (Result.isFailure(imported)) {
    return unsupportedValue("text.format.schema", `valet cannot check answers against this schema: ${imported.failure}`)
  }
  return Result.succeed(format.schema)
}

// ---------------------------------------------------------------------------------------------------------
// The input items
// ---------------------------------------------------------------------------------------------------------

/** Item types valet has no counterpart for: refused by name (the `ResponseInputItem` union of the `openai` package). */
const unsupportedItem = (type: string): string =>
  `${type} items are not supported: an agent's tools run inside the run; send messages, function_call and function_call_output items`

/**
 * How the request is read: `unstored` says why nothing is stored (no thread store, or `store: false`), so that
 * `previous_response_id` and `item_reference` items name nothing; else `references` holds the messages the
 * request's `item_reference` ids name (`referencesOf`), found before.
 */
export interface Context {
  readonly unstored?: string | undefined
  readonly references?: ReadonlyMap<string, Model.Message | null> | undefined
  /**
   * The conversation `previous_response_id` names, read from its thread, for a response not stored (`store: false`
   * on a server with a thread store): it goes before the request's items, and nothing is written.
   */
  readonly previous?: ReadonlyArray<Model.Message> | undefined
}

/** The `item_reference` ids of a request, where they are (`input[i]`). */
export const referencesOf = (request: ResponseCreateRequest): ReadonlyArray<{ readonly id: string; readonly at: string }> =>
  typeof request.input === "string"
    ? []
    : request.input.flatMap((item, i) =>
      item.type === "item_reference" && typeof item.id === "string" ? [{ id: item.id, at: `input[${i}]` }] : []
    )

/** A user, system or developer message's content part as a valet part, or why not, naming the field. */
const partOf = (part: unknown, role: string, at: string): Result.Result<Model.Part, InvalidChatRequest> => {
  if (!isRecord(part) || typeof part.type !== "string") return invalid(at, "a content part is an object with a type")
  if (part.type === "input_text" || (role === "assistant" && (part.type === "output_text" || part.type === "refusal"))) {
    const text = part.type === "refusal" ? part.refusal : part.text
    if (typeof text !== "string") return invalid(`${at}.${part.type === "refusal" ? "refusal" : "text"}`, "a text part has its text")
    return Result.succeed(Model.textPart(text))
  }
  if (role !== "user") {
    return unsupportedValue(`${at}.type`, `a ${role} message holds text only, got a content part of type ${JSON.stringify(part.type)}`)
  }
  let out: Model.Part
  switch (part.type) {
    case "input_image": {
      if (typeof part.file_id === "string") {
        return unsupportedValue(`${at}.file_id`, "there is no file store here: send the image as image_url (an http(s) or data URL)")
      }
      if (typeof part.image_url !== "string") return invalid(`${at}.image_url`, "an input_image part has an image_url (an http(s) or data URL)")
      const detail: { readonly detail?: "auto" | "low" | "high" } =
        part.detail === "auto" || part.detail === "low" || part.detail === "high" ? { detail: part.detail } : {}
      const data = splitDataUrl(part.image_url)
      out = data !== undefined ? { type: "image", ...data, ...detail } : { type: "image", url: part.image_url, ...detail }
      break
    }
    case "input_file": {
      if (typeof part.file_id === "string") {
        return unsupportedValue(`${at}.file_id`, "there is no file store here: send the file's bytes as file_data")
      }
      if (typeof part.file_url === "string") {
        return unsupportedValue(`${at}.file_url`, "files are not fetched here: send the file's bytes as file_data")
      }
      const data = typeof part.file_data === "string" ? splitDataUrl(part.file_data) : undefined
      if (data === undefined) return invalid(`${at}.file_data`, "an input_file part has file_data \"data:<media type>;base64,...\"")
      out = { type: "file", ...data, ...(typeof part.filename === "string" ? { name: part.filename } : {}) }
      break
    }
    default:
      return unsupportedValue(`${at}.type`, `unknown content part type ${JSON.stringify(part.type)} (known: input_text, input_image, input_file)`)
  }
  const problem = Model.partProblem(out)
  return problem === undefined ? Result.succeed(out) : invalid(at, problem)
}

/** A message item's content: its text, and for a user message with images or files, its parts. */
const contentOf = (
  item: InputItem,
  role: string,
  at: string
): Result.Result<{ readonly text: string; readonly parts?: ReadonlyArray<Model.Part> }, InvalidChatRequest> => {
  const content = item.content
  if (content === undefined || content === null) return Result.succeed({ text: "" })
  if (typeof content === "string") return Result.succeed({ text: content })
  let text = ""
  let media = false
  const parts: Array<Model.Part> = []
  for (let j = 0; j < content.length; j++) {
    const part = partOf(content[j], role, `${at}.content[${j}]`)
    if (Result.isFailure(part)) return Result.fail(part.failure)
    if (part.success.type === "text") text += part.success.text
    else media = true
    parts.push(part.success)
  }
  return Result.succeed(media ? { text, parts } : { text })
}

/**
 * The input items as the model reads them, in order: messages, and each `function_call` as a tool call of the
 * assistant message before it (or of a new one), answered by its `function_call_output` before the next message,
 * as the chat facade checks `tool_call_id`. `reasoning` items are dropped: they are another model's private state.
 */
const itemsOf = (items: ReadonlyArray<InputItem>, context: Context): Result.Result<Array<Model.Message>, InvalidChatRequest> => {
  const history: Array<Model.Message> = []
  // The function calls not answered yet, by call id: their name, and where they were asked.
  const open = new Map<string, { readonly name: string; readonly at: string }>()
  const unanswered = () => {
    const [id, call] = open.entries().next().value!
    return invalid(
      `${call.at}.call_id`,
      `the function call ${JSON.stringify(id)} has no function_call_output answering it (each function_call is answered by an item ` +
        `{"type": "function_call_output", "call_id": ${JSON.stringify(id)}} before the next message)`
    )
  }
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!
    const at = `input[${i}]`
    const type = item.type ?? "message"
    if (type !== "function_call" && type !== "function_call_output" && open.size > 0) return unanswered()
    switch (type) {
      case "message": {
        const role = item.role
        if (role !== "user" && role !== "system" && role !== "developer" && role !== "assistant") {
          return invalid(`${at}.role`, `a message's role is one of "user", "system", "developer", "assistant", got ${described(role)}`)
        }
        const read = contentOf(item, role, at)
        if (Result.isFailure(read)) return Result.fail(read.failure)
        const { parts, text } = read.success
        history.push(
          role === "user" ? Model.user(parts ?? text) : role === "assistant" ? Model.assistant(text) : Model.system(text)
        )
        break
      }
      case "function_call": {
        if (item.call_id === undefined) return invalid(`${at}.call_id`, "a function_call item has its call_id")
        if (item.name === undefined) return invalid(`${at}.name`, "a function_call item has its name")
        if (open.has(item.call_id)) return invalid(`${at}.call_id`, `two function calls have the id ${JSON.stringify(item.call_id)}`)
        const call: Model.ToolCall = { id: item.call_id, name: item.name, arguments: item.arguments ?? "{}" }
        const last = history.at(-1)
        // Calls made in one turn follow the assistant's text (the AI SDK sends them so): one assistant message.
        if (last?.role === "assistant") history[history.length - 1] = Model.assistant(last.content, [...(last.toolCalls ?? []), call])
        else history.push(Model.assistant("", [call]))
        open.set(item.call_id, { name: item.name, at })
        break
      }
      case "function_call_output": {
        const id = item.call_id
        if (id === undefined) return invalid(`${at}.call_id`, "a function_call_output item names the call it answers")
        const call = open.get(id)
        if (call === undefined) {
          return invalid(`${at}.call_id`, `${JSON.stringify(id)} is not a function_call before it that is not answered yet`)
        }
        const output = outputText(item.output, at)
        if (Result.isFailure(output)) return Result.fail(output.failure)
        open.delete(id)
        history.push(Model.toolResult(id, call.name, output.success))
        break
      }
      case "reasoning":
        break
      case "item_reference": {
        if (context.unstored !== undefined) {
          return unsupportedValue(`${at}.type`, `${context.unstored}, so an item_reference names nothing: send the item itself (with the AI SDK: providerOptions.openai.store = false)`)
        }
        const message = typeof item.id === "string" ? context.references?.get(item.id) : undefined
        if (message === undefined) return invalid(`${at}.id`, `Item with id ${described(item.id)} not found.`)
        // A response's output messages (one per model call whose text was said) each name its turn's answer, the
        // same message: the AI SDK sends them one after the other, and the answer is said once. A turn that said
        // nothing (ended early) adds nothing.
        if (message !== null && history.at(-1) !== message) history.push(message)
        break
      }
      default:
        return unsupportedValue(`${at}.type`, unsupportedItem(type))
    }
  }
  if (open.size > 0) return unanswered()
  return Result.succeed(history)
}

/** A function call's output as the text the model reads: a string, or the text of `input_text` parts. */
const outputText = (output: unknown, at: string): Result.Result<string, InvalidChatRequest> => {
  if (typeof output === "string") return Result.succeed(output)
  if (!Array.isArray(output)) return invalid(`${at}.output`, "a function_call_output's output is a string or a list of input_text parts")
  let text = ""
  for (let j = 0; j < output.length; j++) {
    const part: unknown = output[j]
    if (!isRecord(part) || part.type !== "input_text" || typeof part.text !== "string") {
      return unsupportedValue(`${at}.output[${j}]`, "a function call's output is read as text here: input_text parts only")
    }
    text += part.text
  }
  return Result.succeed(text)
}

/**
 * The run a request asks for, or why it cannot run: `instructions` as a system message, then the input items (a
 * string is one user message); the last user message is the input when nothing follows it. `text.format` is the
 * run's structured output, `max_output_tokens` its output-token budget.
 */
export const runRequestOf = (request: ResponseCreateRequest, context: Context): Result.Result<Runs.RunRequest, InvalidChatRequest> => {
  const problem = refused(request, context)
  if (Result.isFailure(problem)) return Result.fail(problem.failure)
  const output = outputOf(request)
  if (Result.isFailure(output)) return Result.fail(output.failure)
  const items = typeof request.input === "string" ? Result.succeed([Model.user(request.input)]) : itemsOf(request.input, context)
  if (Result.isFailure(items)) return Result.fail(items.failure)
  const instructions = present(request.instructions) && request.instructions !== "" ? [Model.system(request.instructions)] : []
  return runOfConversation(
    request.model,
    // As a stored turn's: the conversation so far, then this call's instructions and items.
    [...(context.previous ?? []), ...instructions, ...items.success],
    { output: output.success, maxOutputTokens: request.max_output_tokens ?? undefined, partsInput: true },
    "input"
  )
}

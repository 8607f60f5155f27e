/**
 * `Model.Request` → the JSON body of `POST /v1/responses` (the OpenAI Responses API), for `OpenAiCompatible` with
 * `api: "responses"`.
 *
 * The history goes as `input` items in message order. An assistant turn is its reasoning items first, verbatim
 * (`AssistantMessage.reasoningItems`: the provider's `{ type: "reasoning", id, encrypted_content, summary }`), then
 * its text as an `output_text` message, then one `function_call` item per tool call; a tool result is a
 * `function_call_output`. Tools are flat (`{ type: "function", name, description, parameters, strict }`, not chat's
 * nested `function`).
 *
 * valet sends the whole history on every call and keeps nothing at the provider: `store: false` always, with
 * `include: ["reasoning.encrypted_content"]` so that the reasoning comes back in a form that can be sent again.
 * `extra` goes last, untouched, as on the chat wire.
 */
import * as Model from "../../../core/Model.js"
import { InvalidContent, InvalidRequest } from "../../../core/ModelError.js"

const dataUrl = (mediaType: string, data: string): string => `data:${mediaType};base64,${data}`

/**
 * One part as a Responses input content part: `input_text`, `input_image` (a URL or the bytes as a data URL; the
 * API requires a `detail`, `auto` unless the part says), `input_file` (`file_data` as a data URL, or `file_url`,
 * with a `filename`). A file whose media type is an image goes as an image. Audio is refused by `contentProblem`.
 */
const encodePart = (part: Model.Part): Record<string, unknown> => {
  switch (part.type) {
    case "text":
      return { type: "input_text", text: part.text }
    case "image":
      return { type: "input_image", image_url: part.url ?? dataUrl(part.mediaType!, part.data!), detail: part.detail ?? "auto" }
    case "file": {
      if (Model.imageMediaTypes.includes(part.mediaType)) {
        return { type: "input_image", image_url: part.url ?? dataUrl(part.mediaType, part.data!), detail: "auto" }
      }
      const filename = part.name ?? "file"
      if (part.url !== undefined && !/^data:/i.test(part.url)) return { type: "input_file", file_url: part.url, filename }
      return { type: "input_file", file_data: part.url ?? dataUrl(part.mediaType, part.data!), filename }
    }
    case "audio":
      // Refused before encoding (`contentProblem`); kept total for the type checker.
      return { type: "input_text", text: "" }
  }
}

/**
 * The first thing of a request the Responses wire cannot carry, as the typed error naming it: what
 * `Model.checkContent` refuses, an audio part (the Responses API takes no audio input), and the
 * request fields the API has no equivalent for (`n` above 1, `stop`, `seed`, `logprobs`): sent anyway they would
 * be refused by the server, or worse, ignored.
 */
export const contentProblem = (request: Model.Request): InvalidContent | InvalidRequest | undefined => {
  const messages = request.messages ?? []
  const invalid = Model.checkContent(messages)
  if (invalid !== undefined) return invalid
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    const parts = message.role === "tool" ? message.parts ?? [] : typeof message.content === "string" ? [] : message.content
    for (let j = 0; j < parts.length; j++) {
      if (parts[j]!.type === "audio") {
        return new InvalidContent({
          messageIndex: i,
          partIndex: j,
          reason: "the Responses API takes no audio input: use api: chat for this model, or transcribe the audio first",
          ...(message.role === "tool" ? { field: "parts" as const } : {})
        })
      }
    }
  }
  const unsupported = request.n !== undefined && request.n > 1
    ? `n: ${request.n} (one answer per call)`
    : request.stop !== undefined && request.stop.length > 0
    ? "stop sequences"
    : request.seed !== undefined
    ? "seed"
    : request.logprobs !== undefined
    ? "logprobs"
    : undefined
  return unsupported === undefined ? undefined : new InvalidRequest({
    status: 0,
    message: `the Responses API (api: responses) has no ${unsupported}: leave it out, or use api: chat for this model`
  })
}

const textItem = (role: "system" | "user", content: Model.Content): Record<string, unknown> =>
  ({ role, content: typeof content === "string" ? content : content.map(encodePart) })

/** The `input` items of a history. */
export const encodeInput = (messages: ReadonlyArray<Model.Message>): Array<unknown> => {
  const input: Array<unknown> = []
  for (const message of messages) {
    switch (message.role) {
      case "system":
        input.push({ role: "system", content: message.content })
        break
      case "user":
        input.push(textItem("user", message.content))
        break
      case "assistant": {
        // Verbatim: the encrypted content is the provider's, and only it can read it.
        if (message.reasoningItems !== undefined) for (const item of message.reasoningItems) input.push(item)
        if (message.content !== "") {
          input.push({ role: "assistant", content: [{ type: "output_text", text: message.content }] })
        }
        for (const call of message.toolCalls ?? []) {
          input.push({ type: "function_call", call_id: call.id, name: call.name, arguments: call.arguments })
        }
        break
      }
      case "tool":
        input.push({
          type: "function_call_output",
          call_id: message.toolCallId,
          // A result with parts (an image a tool returned) goes whole: this wire carries them in the output itself.
          output: message.parts === undefined || message.parts.length === 0
            ? message.content
            : [{ type: "input_text", text: message.content }, ...message.parts.map(encodePart)]
        })
        break
    }
  }
  return input
}

const encodeFormat = (format: Model.ResponseFormat): unknown => {
  switch (format.type) {
    case "text":
      return { type: "text" }
    case "json":
      return { type: "json_object" }
    case "json_schema":
      return {
        type: "json_schema",
        name: format.name,
        schema: format.schema,
        ...(format.strict !== undefined ? { strict: format.strict } : {})
      }
  }
}

/** The JSON body of `POST /v1/responses` for a chat request (`messages`); always streamed. */
export const encode = (request: Model.Request, model: string): Record<string, unknown> => {
  const body: Record<string, unknown> = { model, input: encodeInput(request.messages ?? []) }
  if (request.tools !== undefined && request.tools.length > 0) {
    // `strict` is required by the API, and true would refuse most tools' schemas (every property required, no
    // additional ones): valet's tools are not written for it.
    body.tools = request.tools.map((tool) => ({
      type: "function",
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters,
      strict: false
    }))
  }
  if (request.toolChoice !== undefined) {
    body.tool_choice = typeof request.toolChoice === "string"
      ? request.toolChoice
      : { type: "function", name: request.toolChoice.name }
  }
  if (request.temperature !== undefined) body.temperature = request.temperature
  if (request.topP !== undefined) body.top_p = request.topP
  if (request.maxTokens !== undefined) body.max_output_tokens = request.maxTokens
  if (request.responseFormat !== undefined) body.text = { format: encodeFormat(request.responseFormat) }
  if (request.promptCache !== undefined) {
    if (request.promptCache.key !== undefined) body.prompt_cache_key = request.promptCache.key
    if (request.promptCache.retention !== undefined) body.prompt_cache_retention = request.promptCache.retention
  }
  body.store = false
  body.include = ["reasoning.encrypted_content"]
  body.stream = true
  if (request.extra !== undefined) Object.assign(body, request.extra)
  return body
}

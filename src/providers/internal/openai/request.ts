/**
 * `Model.Request` → the JSON body of `POST /v1/chat/completions` (messages) or `POST /v1/completions` (prompt).
 * Only fields the request sets are sent (servers differ in what they accept); `extra` goes last, untouched, so a
 * caller can add or override anything the server understands.
 */
import * as Model from "../../../core/Model.js"
import { InvalidContent } from "../../../core/ModelError.js"

/** Which endpoint a request goes to. */
export type Endpoint = "chat" | "completions"

/** The endpoint of a request: chat for `messages`, completions for a raw `prompt`. */
export const endpointOf = (request: Model.Request): Endpoint => (request.messages !== undefined ? "chat" : "completions")

const dataUrl = (mediaType: string, data: string): string => `data:${mediaType};base64,${data}`

/**
 * One part as a chat-completions content part: `text` (with `cache_control: { type: "ephemeral" }` when marked: the
 * spelling OpenRouter, LiteLLM and the AI SDK's openai-compatible provider, via `providerOptions.openaiCompatible`,
 * put on the wire; https://openrouter.ai/docs/features/prompt-caching), `image_url` (a URL, or the bytes as a data URL), `input_audio`
 * (base64 and format), `file` (`file_data` as a data URL, OpenAI's form, and `filename`). A file whose media type is
 * an image goes as an image. Parts pass `contentProblem` first.
 */
const encodePart = (part: Model.Part): Record<string, unknown> => {
  switch (part.type) {
    case "text":
      return part.cacheControl === undefined
        ? { type: "text", text: part.text }
        : { type: "text", text: part.text, cache_control: { type: part.cacheControl } }
    case "image":
      return {
        type: "image_url",
        image_url: {
          url: part.url ?? dataUrl(part.mediaType!, part.data!),
          ...(part.detail !== undefined ? { detail: part.detail } : {})
        }
      }
    case "audio":
      return { type: "input_audio", input_audio: { data: part.data, format: part.format } }
    case "file":
      if (Model.imageMediaTypes.includes(part.mediaType)) {
        return { type: "image_url", image_url: { url: part.url ?? dataUrl(part.mediaType, part.data!) } }
      }
      return {
        type: "file",
        // A `data:` URL is the file's bytes already in OpenAI's form (checked like `data` by `Model.checkContent`).
        file: { file_data: part.url ?? dataUrl(part.mediaType, part.data!), ...(part.name !== undefined ? { filename: part.name } : {}) }
      }
  }
}

/**
 * The first part of a request the chat-completions wire cannot carry, named: what `Model.checkContent` refuses, and
 * a non-image file by URL (the API takes a file's bytes or an uploaded file's id, not a link).
 */
export const contentProblem = (request: Model.Request): InvalidContent | undefined => {
  const messages = request.messages
  if (messages === undefined) return undefined
  const invalid = Model.checkContent(messages)
  if (invalid !== undefined) return invalid
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    const content = message.content
    const lists: ReadonlyArray<readonly [ReadonlyArray<Model.Part>, "parts" | undefined]> = message.role === "tool"
      ? message.parts === undefined ? [] : [[message.parts, "parts"]]
      : typeof content === "string" ? [] : [[content, undefined]]
    for (const [parts, field] of lists) {
      for (let j = 0; j < parts.length; j++) {
        const part = parts[j]!
        if (
          part.type === "file" && part.url !== undefined && !/^data:/i.test(part.url) &&
          !Model.imageMediaTypes.includes(part.mediaType)
        ) {
          return new InvalidContent({
            messageIndex: i,
            partIndex: j,
            reason: `a ${part.mediaType} file by URL cannot be sent over chat completions (it takes the file's bytes): fetch it and send \`data\``,
            ...(field !== undefined ? { field } : {})
          })
        }
      }
    }
  }
  return undefined
}

const encodeMessage = (message: Model.Message): Record<string, unknown> => {
  switch (message.role) {
    case "system":
      // A breakpoint sits on a content part, so a marked system message goes as one text part (OpenRouter's form).
      return message.cacheControl === undefined
        ? { role: message.role, content: message.content }
        : { role: message.role, content: [{ type: "text", text: message.content, cache_control: { type: message.cacheControl } }] }
    case "user":
      return { role: "user", content: typeof message.content === "string" ? message.content : message.content.map(encodePart) }
    case "assistant": {
      const calls = message.toolCalls
      if (calls === undefined || calls.length === 0) return { role: "assistant", content: message.content }
      return {
        role: "assistant",
        // OpenAI documents `null` content next to tool calls; some chat templates choke on "".
        content: message.content === "" ? null : message.content,
        tool_calls: calls.map((call) => ({
          id: call.id,
          type: "function",
          function: { name: call.name, arguments: call.arguments }
        }))
      }
    }
    case "tool":
      return { role: "tool", tool_call_id: message.toolCallId, content: message.content }
  }
}

/**
 * The messages on the wire. A chat-completions tool message carries text only, and the tool messages answering one
 * assistant turn must follow it with nothing between them; so the parts tools returned (images, audio, files) go in
 * one user message after the last of them: a text line naming each call, then its parts. The model reads each
 * tool's text where it expects it and sees the attachments just after. (The AI SDK sends such a result as its JSON
 * text, the base64 included, and the OpenAI Agents SDK leaves the image out: in neither does the model see it.)
 */
const encodeMessages = (messages: ReadonlyArray<Model.Message>): Array<Record<string, unknown>> => {
  const out: Array<Record<string, unknown>> = []
  let attached: Array<Record<string, unknown>> | undefined
  for (const message of messages) {
    if (message.role === "tool") {
      out.push(encodeMessage(message))
      if (message.parts !== undefined && message.parts.length > 0) {
        attached ??= []
        attached.push({ type: "text", text: attachedHeader(message) }, ...message.parts.map(encodePart))
      }
      continue
    }
    if (attached !== undefined) {
      out.push({ role: "user", content: attached })
      attached = undefined
    }
    out.push(encodeMessage(message))
  }
  if (attached !== undefined) out.push({ role: "user", content: attached })
  return out
}

/** The line before a tool's attachments in the user message that carries them. */
const attachedHeader = (message: Model.ToolMessage): string =>
  `Attached by the result of tool call ${message.toolCallId} (${message.name}):`

const encodeToolChoice = (choice: Model.ToolChoice): unknown =>
  typeof choice === "string" ? choice : { type: "function", function: { name: choice.name } }

const encodeResponseFormat = (format: Model.ResponseFormat): unknown => {
  switch (format.type) {
    case "text":
      return { type: "text" }
    case "json":
      return { type: "json_object" }
    case "json_schema":
      return {
        type: "json_schema",
        json_schema: {
          name: format.name,
          schema: format.schema,
          ...(format.strict !== undefined ? { strict: format.strict } : {})
        }
      }
  }
}

/** Options of `encode`. */
export interface EncodeOptions {
  readonly model: string
  readonly stream: boolean
}

/** The JSON body for a request. */
export const encode = (request: Model.Request, options: EncodeOptions): Record<string, unknown> => {
  const body: Record<string, unknown> = { model: options.model }
  const chat = request.messages !== undefined
  if (chat) body.messages = encodeMessages(request.messages!)
  else body.prompt = request.prompt ?? ""
  if (request.tools !== undefined && request.tools.length > 0) {
    body.tools = request.tools.map((tool) => ({
      type: "function",
      function: { name: tool.name, description: tool.description, parameters: tool.parameters }
    }))
  }
  if (request.toolChoice !== undefined) body.tool_choice = encodeToolChoice(request.toolChoice)
  if (request.temperature !== undefined) body.temperature = request.temperature
  if (request.topP !== undefined) body.top_p = request.topP
  if (request.maxTokens !== undefined) body.max_tokens = request.maxTokens
  if (request.stop !== undefined && request.stop.length > 0) body.stop = request.stop
  if (request.seed !== undefined) body.seed = request.seed
  if (request.n !== undefined) body.n = request.n
  if (request.logprobs !== undefined) {
    if (chat) {
      body.logprobs = true
      if (request.logprobs > 0) body.top_logprobs = request.logprobs
    } else {
      body.logprobs = request.logprobs
    }
  }
  if (request.responseFormat !== undefined) body.response_format = encodeResponseFormat(request.responseFormat)
  if (options.stream) {
    body.stream = true
    // Without it most servers send no usage at all on a stream.
    body.stream_options = { include_usage: true }
  }
  if (request.promptCache !== undefined) {
    if (request.promptCache.key !== undefined) body.prompt_cache_key = request.promptCache.key
    if (request.promptCache.retention !== undefined) body.prompt_cache_retention = request.promptCache.retention
  }
  if (request.extra !== undefined) Object.assign(body, request.extra)
  return body
}

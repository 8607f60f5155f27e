/**
 * `Model.Request` → the JSON body of `POST /v1/chat/completions` (messages) or `POST /v1/completions` (prompt).
 * Only fields the request sets are sent (servers differ in what they accept); `extra` goes last, untouched, so a
 * caller can add or override anything the server understands.
 */
import type * as Model from "../../../core/Model.js"

/** Which endpoint a request goes to. */
export type Endpoint = "chat" | "completions"

/** The endpoint of a request: chat for `messages`, completions for a raw `prompt`. */
export const endpointOf = (request: Model.Request): Endpoint => (request.messages !== undefined ? "chat" : "completions")

const encodeMessage = (message: Model.Message): Record<string, unknown> => {
  switch (message.role) {
    case "system":
    case "user":
      return { role: message.role, content: message.content }
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
  if (chat) body.messages = request.messages!.map(encodeMessage)
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

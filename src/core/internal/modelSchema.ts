/**
 * The data of `Model`: messages, requests, responses and streamed chunks, as schemas (every one crosses a JSON
 * boundary: a server's body, a cassette, an event). `Model` re-exports all of it; it lives here so that the
 * chunk accumulator can use these types without importing `Model`.
 */
import { Schema } from "effect"
import { Base64 } from "effect/encoding"

// ---------------------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------------------

/**
 * A tool call requested by the model; `arguments` is the JSON text exactly as the model wrote it.
 *
 * @since 0.1.0
 * @category messages
 */
export const ToolCall = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  arguments: Schema.String
})
/**
 * A tool call requested by the model.
 *
 * @since 0.1.0
 * @category messages
 */
export type ToolCall = typeof ToolCall.Type

/**
 * A prompt-cache breakpoint: the prompt up to and including the text so marked is a prefix the server may cache
 * (Anthropic's `cache_control: { type: "ephemeral" }`, which OpenRouter and LiteLLM proxies read on an OpenAI-style
 * content part; see https://openrouter.ai/docs/features/prompt-caching and
 * https://docs.litellm.ai/docs/completion/prompt_caching). `"ephemeral"` is the only kind those servers define.
 * Servers that cache prefixes on their own (OpenAI, DeepSeek, vLLM) need no mark.
 *
 * @since 0.2.0
 * @category messages
 */
export const CacheControl = Schema.Literal("ephemeral")
/**
 * A prompt-cache breakpoint.
 *
 * @since 0.2.0
 * @category messages
 */
export type CacheControl = typeof CacheControl.Type

/**
 * The system message: the instructions. `cacheControl` marks the end of a cacheable prefix (see `CacheControl`).
 *
 * @since 0.1.0
 * @category messages
 */
export const SystemMessage = Schema.Struct({
  role: Schema.Literal("system"),
  content: Schema.String,
  cacheControl: Schema.optional(CacheControl)
})
/**
 * The system message: the instructions.
 *
 * @since 0.1.0
 * @category messages
 */
export type SystemMessage = typeof SystemMessage.Type

// ---------------------------------------------------------------------------------------------------------
// Content parts
// ---------------------------------------------------------------------------------------------------------

/**
 * The image media types a part may carry (what OpenAI, vLLM's vision models and Gemini all take).
 *
 * @since 0.2.0
 * @category parts
 */
export const imageMediaTypes: ReadonlyArray<string> = ["image/png", "image/jpeg", "image/gif", "image/webp"]

/**
 * The media types a file part may carry: documents, text, and the image types.
 *
 * @since 0.2.0
 * @category parts
 */
export const fileMediaTypes: ReadonlyArray<string> = [
  "application/pdf",
  "text/plain",
  "text/markdown",
  "text/csv",
  "text/html",
  "application/json",
  ...imageMediaTypes
]

/**
 * The audio formats an audio part may carry (OpenAI's `input_audio.format`; vLLM takes the same names).
 *
 * @since 0.2.0
 * @category parts
 */
export const AudioFormat = Schema.Literals(["wav", "mp3", "flac", "ogg", "webm", "m4a"])
/**
 * An audio format.
 *
 * @since 0.2.0
 * @category parts
 */
export type AudioFormat = typeof AudioFormat.Type

/**
 * The media type of each audio format (what `effect/ai` file parts and MCP audio content carry).
 *
 * @since 0.2.0
 * @category parts
 */
export const audioMediaTypes: Readonly<Record<AudioFormat, string>> = {
  wav: "audio/wav",
  mp3: "audio/mpeg",
  flac: "audio/flac",
  ogg: "audio/ogg",
  webm: "audio/webm",
  m4a: "audio/mp4"
}

const audioFormats: ReadonlyMap<string, AudioFormat> = new Map([
  ...Object.entries(audioMediaTypes).map(([format, mediaType]) => [mediaType, format as AudioFormat] as const),
  ["audio/x-wav", "wav"],
  ["audio/wave", "wav"],
  ["audio/mp3", "mp3"],
  ["audio/x-m4a", "m4a"]
])

/**
 * The audio format of a media type (`audio/wav` → `wav`, with the common aliases), or `undefined` for one no server
 * takes as input audio.
 *
 * @since 0.2.0
 * @category parts
 */
export const audioFormatOf = (mediaType: string): AudioFormat | undefined => audioFormats.get(mediaType.toLowerCase())

/**
 * The audio media types `audioFormatOf` knows.
 *
 * @since 0.2.0
 * @category parts
 */
export const knownAudioMediaTypes: ReadonlyArray<string> = [...audioFormats.keys()]

/**
 * The largest part, in bytes (decoded bytes of `data`, or the whole URL text): 20 MiB, OpenAI's image limit.
 * `Model.checkContent` takes another cap.
 *
 * @since 0.2.0
 * @category parts
 */
export const defaultMaxPartBytes = 20 * 1024 * 1024

/**
 * The byte length of base64 text once decoded, without decoding it.
 *
 * @since 0.2.0
 * @category parts
 */
export const base64Bytes = (data: string): number => {
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0
  return Math.floor((data.length * 3) / 4) - padding
}

const base64Text = /^[A-Za-z0-9+/]*={0,2}$/

const schemeProblem = (url: string): string | undefined => {
  const colon = url.indexOf(":")
  const scheme = colon > 0 ? url.slice(0, colon).toLowerCase() : ""
  return scheme === "http" || scheme === "https" || scheme === "data"
    ? undefined
    : `the URL scheme ${scheme === "" ? "(none)" : `"${scheme}:"`} is not allowed (only http:, https: and data:)`
}

/**
 * What is wrong with one part, or `undefined`: a media type valet does not know, a URL scheme other than http(s) or
 * data, `url` and `data` both or neither, text that is not base64, more than `maxBytes` bytes.
 *
 * @since 0.2.0
 * @category parts
 */
export const partProblem = (part: Part, maxBytes: number = defaultMaxPartBytes): string | undefined => {
  switch (part.type) {
    case "text":
      return undefined
    case "image":
    case "file": {
      const known = part.type === "image" ? imageMediaTypes : fileMediaTypes
      if ((part.url === undefined) === (part.data === undefined)) {
        return `a${part.type === "image" ? "n image" : " file"} part has either \`url\` or \`data\`, not both and not neither`
      }
      if (part.mediaType !== undefined && !known.includes(part.mediaType)) {
        return `unknown ${part.type} media type "${part.mediaType}" (known: ${known.join(", ")})`
      }
      if (part.url !== undefined) {
        const scheme = schemeProblem(part.url)
        if (scheme !== undefined) return scheme
        if (part.url.length > maxBytes) return `the URL is ${part.url.length} bytes, over the cap of ${maxBytes}`
        return dataUrlProblem(part.url, known, part.type)
      }
      if (part.mediaType === undefined) return `${part.type} bytes need a \`mediaType\``
      return dataProblem(part.data!, maxBytes)
    }
    case "audio":
      return dataProblem(part.data, maxBytes)
  }
}

/**
 * A `data:` URL carries its own media type and bytes: held to the same rules as `mediaType` and `data` (a known
 * media type, base64 text), or an image part's `data:text/html,…` would pass where `mediaType: "text/html"` does not.
 */
const dataUrlProblem = (url: string, known: ReadonlyArray<string>, type: "image" | "file"): string | undefined => {
  if (url.slice(0, 5).toLowerCase() !== "data:") return undefined
  const comma = url.indexOf(",")
  const header = comma < 0 ? "" : url.slice(5, comma).toLowerCase()
  if (comma < 0 || !header.endsWith(";base64")) return "a `data:` URL must be `data:<media type>;base64,<data>`"
  const mediaType = header.slice(0, -";base64".length).split(";")[0]!.trim()
  if (!known.includes(mediaType)) return `unknown ${type} media type "${mediaType}" in the data: URL (known: ${known.join(", ")})`
  const data = url.slice(comma + 1)
  if (data.length % 4 !== 0 || !base64Text.test(data)) return "the `data:` URL's data is not base64 text"
  return undefined
}

const dataProblem = (data: string, maxBytes: number): string | undefined => {
  const bytes = base64Bytes(data)
  if (bytes > maxBytes) return `the data is ${bytes} bytes, over the cap of ${maxBytes}`
  // Checked after the size: a regular expression over megabytes is the expensive part.
  if (data.length % 4 !== 0 || !base64Text.test(data)) return "`data` is not base64 text"
  return undefined
}

/**
 * A piece of text. `cacheControl` marks the end of a cacheable prefix (see `CacheControl`).
 *
 * @since 0.2.0
 * @category parts
 */
export const TextPart = Schema.Struct({
  type: Schema.Literal("text"),
  text: Schema.String,
  cacheControl: Schema.optional(CacheControl)
})
/**
 * A piece of text.
 *
 * @since 0.2.0
 * @category parts
 */
export type TextPart = typeof TextPart.Type

/**
 * An image: an http(s) or data `url`, or base64 `data` with its `mediaType`. `detail` is OpenAI's resolution hint.
 *
 * @since 0.2.0
 * @category parts
 */
export const ImagePart = Schema.Struct({
  type: Schema.Literal("image"),
  url: Schema.optional(Schema.String),
  data: Schema.optional(Schema.String),
  mediaType: Schema.optional(Schema.String),
  detail: Schema.optional(Schema.Literals(["auto", "low", "high"]))
})
/**
 * An image.
 *
 * @since 0.2.0
 * @category parts
 */
export type ImagePart = typeof ImagePart.Type

/**
 * A file (a PDF, a text document…): base64 `data` or a `url`, its `mediaType`, and its `name` when it has one.
 *
 * @since 0.2.0
 * @category parts
 */
export const FilePart = Schema.Struct({
  type: Schema.Literal("file"),
  url: Schema.optional(Schema.String),
  data: Schema.optional(Schema.String),
  mediaType: Schema.String,
  name: Schema.optional(Schema.String)
})
/**
 * A file.
 *
 * @since 0.2.0
 * @category parts
 */
export type FilePart = typeof FilePart.Type

/**
 * Audio input: base64 `data` in `format`.
 *
 * @since 0.2.0
 * @category parts
 */
export const AudioPart = Schema.Struct({
  type: Schema.Literal("audio"),
  data: Schema.String,
  format: AudioFormat
})
/**
 * Audio input.
 *
 * @since 0.2.0
 * @category parts
 */
export type AudioPart = typeof AudioPart.Type

/**
 * One part of a message's content, checked by `partProblem` with the default cap.
 *
 * @since 0.2.0
 * @category parts
 */
export const Part = Schema.Union([TextPart, ImagePart, FilePart, AudioPart]).check(
  Schema.makeFilter((part) => partProblem(part))
)
/**
 * One part of a message's content.
 *
 * @since 0.2.0
 * @category parts
 */
export type Part = TextPart | ImagePart | FilePart | AudioPart

/**
 * A message's content: text (the common case, kept a plain string) or a list of parts.
 *
 * @since 0.2.0
 * @category parts
 */
export const Content = Schema.Union([Schema.String, Schema.Array(Part)])
/**
 * A message's content.
 *
 * @since 0.2.0
 * @category parts
 */
export type Content = string | ReadonlyArray<Part>

/**
 * The text of content: itself when a string, else its text parts joined by newlines (other parts have no text).
 *
 * @since 0.2.0
 * @category parts
 */
export const textOf = (content: Content): string => {
  if (typeof content === "string") return content
  let text = ""
  for (const part of content) {
    if (part.type !== "text") continue
    text = text === "" ? part.text : `${text}\n${part.text}`
  }
  return text
}

/**
 * A part as text for a reader that is not shown its bytes (a summarising call, a compacted tool result): text as
 * itself, anything else named by its kind, media type or format, file name and size (`[image image/png, 70 bytes]`).
 *
 * @since 0.2.0
 * @category parts
 */
export const describePart = (part: Part): string => {
  if (part.type === "text") return part.text
  const data = part.data
  const what = part.type === "audio" ? `audio ${part.format}` : `${part.type}${part.mediaType !== undefined ? ` ${part.mediaType}` : ""}`
  const name = part.type === "file" && part.name !== undefined ? ` ${part.name}` : ""
  return `[${what}${name}${data !== undefined ? `, ${base64Bytes(data)} bytes` : ""}]`
}

/**
 * A text part.
 *
 * @since 0.2.0
 * @category parts
 */
export const textPart = (text: string, options?: { readonly cacheControl?: CacheControl | undefined }): TextPart =>
  options?.cacheControl !== undefined ? { type: "text", text, cacheControl: options.cacheControl } : { type: "text", text }

/**
 * An image part from a URL (http(s) or data), or from bytes (base64 text or raw bytes) and their media type.
 *
 * @since 0.2.0
 * @category parts
 */
export const imagePart = (
  source: { readonly url: string } | { readonly data: string | Uint8Array; readonly mediaType: string }
): ImagePart =>
  "url" in source
    ? { type: "image", url: source.url }
    : { type: "image", data: base64(source.data), mediaType: source.mediaType }

/**
 * A file part from bytes (base64 text or raw bytes) or a URL, with its media type and name.
 *
 * @since 0.2.0
 * @category parts
 */
export const filePart = (
  source: ({ readonly url: string } | { readonly data: string | Uint8Array }) & {
    readonly mediaType: string
    readonly name?: string
  }
): FilePart => ({
  type: "file",
  ...("url" in source ? { url: source.url } : { data: base64(source.data) }),
  mediaType: source.mediaType,
  ...(source.name !== undefined ? { name: source.name } : {})
})

/**
 * An audio part from bytes (base64 text or raw bytes) in a format.
 *
 * @since 0.2.0
 * @category parts
 */
export const audioPart = (data: string | Uint8Array, format: AudioFormat): AudioPart => ({
  type: "audio",
  data: base64(data),
  format
})

const base64 = (data: string | Uint8Array): string => (typeof data === "string" ? data : Base64.encode(data))

/**
 * A user message: text, or parts (text, images, files, audio).
 *
 * @since 0.1.0
 * @category messages
 */
export const UserMessage = Schema.Struct({
  role: Schema.Literal("user"),
  content: Content
})
/**
 * A user message.
 *
 * @since 0.1.0
 * @category messages
 */
export type UserMessage = typeof UserMessage.Type

/**
 * A provider's own record of a model's reasoning, kept as the provider sent it (the OpenAI Responses API's
 * `{ type: "reasoning", id, encrypted_content, summary }`): opaque to valet, sent back unchanged to the provider in
 * the next call's history, so that a reasoning model carries its reasoning across the turns of a tool loop.
 * Other providers ignore it.
 *
 * @since 0.2.0
 * @category messages
 */
export const ReasoningItem = Schema.Record(Schema.String, Schema.Unknown)
/**
 * A provider's own record of a model's reasoning.
 *
 * @since 0.2.0
 * @category messages
 */
export type ReasoningItem = typeof ReasoningItem.Type

/**
 * An assistant message, possibly with the tool calls it asked for, and the provider's reasoning items of the turn
 * (`reasoningItems`, sent back to the provider that made them).
 *
 * @since 0.1.0
 * @category messages
 */
export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  content: Schema.String,
  toolCalls: Schema.optional(Schema.Array(ToolCall)),
  reasoning: Schema.optional(Schema.String),
  /** @since 0.2.0 */
  reasoningItems: Schema.optional(Schema.Array(ReasoningItem))
})
/**
 * An assistant message, possibly with the tool calls it asked for.
 *
 * @since 0.1.0
 * @category messages
 */
export type AssistantMessage = typeof AssistantMessage.Type

/**
 * The result of one tool call, sent back to the model: its text, and `parts` when the tool returned more than text
 * (an MCP tool's image or audio content, a screenshot). Chat-completions servers take text only in a tool message,
 * so the OpenAI wire sends the parts in a user message after the turn's tool results (see `OpenAiCompatible`).
 *
 * @since 0.1.0
 * @category messages
 */
export const ToolMessage = Schema.Struct({
  role: Schema.Literal("tool"),
  toolCallId: Schema.String,
  name: Schema.String,
  content: Schema.String,
  /** @since 0.2.0 */
  parts: Schema.optional(Schema.Array(Part))
})
/**
 * The result of one tool call, sent back to the model.
 *
 * @since 0.1.0
 * @category messages
 */
export type ToolMessage = typeof ToolMessage.Type

/**
 * Any chat message.
 *
 * @since 0.1.0
 * @category messages
 */
export const Message = Schema.Union([SystemMessage, UserMessage, AssistantMessage, ToolMessage])
/**
 * Any chat message.
 *
 * @since 0.1.0
 * @category messages
 */
export type Message = typeof Message.Type

/**
 * A system message; `{ cacheControl: "ephemeral" }` marks it as the end of a cacheable prefix.
 *
 * @since 0.1.0
 * @category messages
 */
export const system = (content: string, options?: { readonly cacheControl?: CacheControl | undefined }): SystemMessage =>
  options?.cacheControl !== undefined
    ? { role: "system", content, cacheControl: options.cacheControl }
    : { role: "system", content }
/**
 * A user message.
 *
 * @since 0.1.0
 * @category messages
 */
export const user = (content: Content): UserMessage => ({ role: "user", content })
/**
 * An assistant message.
 *
 * @since 0.1.0
 * @category messages
 */
export const assistant = (content: string, toolCalls?: ReadonlyArray<ToolCall>): AssistantMessage =>
  toolCalls !== undefined && toolCalls.length > 0 ? { role: "assistant", content, toolCalls } : { role: "assistant", content }
/**
 * A tool result message; `parts` are what the tool returned besides its text (see `ToolMessage`).
 *
 * @since 0.1.0
 * @category messages
 */
export const toolResult = (
  toolCallId: string,
  name: string,
  content: string,
  parts?: ReadonlyArray<Part> | undefined
): ToolMessage =>
  parts !== undefined && parts.length > 0
    ? { role: "tool", toolCallId, name, content, parts }
    : { role: "tool", toolCallId, name, content }

// ---------------------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------------------

/**
 * A JSON object (a tool's parameter schema, a response schema, pass-through fields).
 *
 * @since 0.1.0
 * @category requests
 */
export const JsonObject = Schema.Record(Schema.String, Schema.Unknown)
/**
 * A JSON object.
 *
 * @since 0.1.0
 * @category requests
 */
export type JsonObject = typeof JsonObject.Type

/**
 * A tool the model may call: its name, what it does, and the JSON schema of its arguments.
 *
 * @since 0.1.0
 * @category requests
 */
export const ToolDefinition = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  parameters: JsonObject
})
/**
 * A tool the model may call.
 *
 * @since 0.1.0
 * @category requests
 */
export type ToolDefinition = typeof ToolDefinition.Type

/**
 * Whether and which tool the model must call.
 *
 * @since 0.1.0
 * @category requests
 */
export const ToolChoice = Schema.Union([
  Schema.Literals(["auto", "none", "required"]),
  Schema.Struct({ name: Schema.String })
])
/**
 * Whether and which tool the model must call.
 *
 * @since 0.1.0
 * @category requests
 */
export type ToolChoice = typeof ToolChoice.Type

/**
 * The shape the answer must take.
 *
 * @since 0.1.0
 * @category requests
 */
export const ResponseFormat = Schema.Union([
  Schema.Struct({ type: Schema.Literal("text") }),
  Schema.Struct({ type: Schema.Literal("json") }),
  Schema.Struct({
    type: Schema.Literal("json_schema"),
    name: Schema.String,
    schema: JsonObject,
    strict: Schema.optional(Schema.Boolean)
  })
])
/**
 * The shape the answer must take.
 *
 * @since 0.1.0
 * @category requests
 */
export type ResponseFormat = typeof ResponseFormat.Type

/**
 * Prompt-cache hints sent with a request: `key` groups requests that share a long prefix so the server routes
 * them to the same cache (OpenAI's `prompt_cache_key`), `retention` asks to keep the prefix cached longer
 * (`prompt_cache_retention`). Servers that do not know them ignore them; the cache itself is the server's.
 *
 * @since 0.2.0
 * @category requests
 */
export const PromptCache = Schema.Struct({
  key: Schema.optional(Schema.String.check(Schema.isNonEmpty())),
  retention: Schema.optional(Schema.Literals(["in_memory", "24h"]))
})
/**
 * Prompt-cache hints sent with a request.
 *
 * @since 0.2.0
 * @category requests
 */
export type PromptCache = typeof PromptCache.Type

const RequestFields = Schema.Struct({
  messages: Schema.optional(Schema.Array(Message)),
  prompt: Schema.optional(Schema.String),
  tools: Schema.optional(Schema.Array(ToolDefinition)),
  toolChoice: Schema.optional(ToolChoice),
  temperature: Schema.optional(Schema.Number),
  topP: Schema.optional(Schema.Number),
  maxTokens: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  stop: Schema.optional(Schema.Array(Schema.String)),
  seed: Schema.optional(Schema.Int),
  n: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  logprobs: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  responseFormat: Schema.optional(ResponseFormat),
  extra: Schema.optional(JsonObject),
  promptCache: Schema.optional(PromptCache)
})

/**
 * One model call: chat `messages` or a raw completion `prompt` (exactly one), sampling options, and `extra`
 * fields passed to the server untouched (vLLM's `top_k`, `min_p`, `chat_template_kwargs`…). `logprobs` asks for
 * that many alternatives per token (0: only the chosen token's). `promptCache` carries prompt-cache hints.
 *
 * @since 0.1.0
 * @category requests
 */
export const Request = RequestFields.check(
  Schema.makeFilter((request) =>
    (request.messages === undefined) !== (request.prompt === undefined) ||
    "a request has either `messages` or `prompt`, not both and not neither"
  )
)
/**
 * One model call.
 *
 * @since 0.1.0
 * @category requests
 */
export type Request = typeof Request.Type

// ---------------------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------------------

/**
 * Why a choice ended. Wire values the protocol does not name map to `other`.
 *
 * @since 0.1.0
 * @category responses
 */
export const FinishReason = Schema.Literals(["stop", "length", "tool_calls", "content_filter", "other"])
/**
 * Why a choice ended.
 *
 * @since 0.1.0
 * @category responses
 */
export type FinishReason = typeof FinishReason.Type

/**
 * The log-probability of one generated token, with the most likely alternatives when asked for.
 *
 * @since 0.1.0
 * @category responses
 */
export const TokenLogprob = Schema.Struct({
  token: Schema.String,
  logprob: Schema.Number,
  /**
   * The token's id, when the server named it: vLLM with `return_tokens_as_token_ids` sends `token` as
   * `"token_id:123"` (kept as sent), read here as 123.
   *
   * @since 0.2.0
   */
  tokenId: Schema.optional(Schema.Int),
  topLogprobs: Schema.optional(Schema.Array(Schema.Struct({ token: Schema.String, logprob: Schema.Number })))
})
/**
 * The log-probability of one generated token.
 *
 * @since 0.1.0
 * @category responses
 */
export type TokenLogprob = typeof TokenLogprob.Type

/**
 * One completion. `stopReason` is vLLM's: the stop string or token id that ended it.
 *
 * @since 0.1.0
 * @category responses
 */
export const Choice = Schema.Struct({
  index: Schema.Int,
  text: Schema.String,
  toolCalls: Schema.Array(ToolCall),
  reasoning: Schema.optional(Schema.String),
  finishReason: FinishReason,
  stopReason: Schema.optional(Schema.Union([Schema.String, Schema.Number])),
  logprobs: Schema.optional(Schema.Array(TokenLogprob)),
  /**
   * The completion's token ids as the server sent them (vLLM ≥ 0.10.2 with `return_token_ids`); absent when it did
   * not send them — never re-tokenized here.
   *
   * @since 0.2.0
   */
  tokenIds: Schema.optional(Schema.Array(Schema.Int)),
  /**
   * The provider's reasoning items of this answer (the OpenAI Responses API's `reasoning` output items, with their
   * `encrypted_content`), to be sent back with the assistant message in the next call (`AssistantMessage.reasoningItems`).
   *
   * @since 0.2.0
   */
  reasoningItems: Schema.optional(Schema.Array(ReasoningItem))
})
/**
 * One completion.
 *
 * @since 0.1.0
 * @category responses
 */
export type Choice = typeof Choice.Type

/**
 * Token counts of a call.
 *
 * @since 0.1.0
 * @category responses
 */
export const Usage = Schema.Struct({
  inputTokens: Schema.Int,
  outputTokens: Schema.Int,
  totalTokens: Schema.Int,
  /**
   * The part of `inputTokens` the server read from its prompt cache (OpenAI's `prompt_tokens_details.cached_tokens`,
   * DeepSeek's `prompt_cache_hit_tokens`). Absent: the server did not say (count it as 0).
   */
  cachedInputTokens: Schema.optional(Schema.Int),
  /** The part of `inputTokens` the server wrote to its prompt cache (billed at a write rate by some providers). */
  cacheWriteTokens: Schema.optional(Schema.Int)
})
/**
 * Token counts of a call.
 *
 * @since 0.1.0
 * @category responses
 */
export type Usage = typeof Usage.Type

/**
 * No tokens.
 *
 * @since 0.1.0
 * @category responses
 */
export const emptyUsage: Usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 }

/**
 * The sum of two usages.
 *
 * @since 0.1.0
 * @category responses
 */
export const addUsage = (self: Usage, that: Usage): Usage => {
  const sum: { -readonly [K in keyof Usage]: Usage[K] } = {
    inputTokens: self.inputTokens + that.inputTokens,
    outputTokens: self.outputTokens + that.outputTokens,
    totalTokens: self.totalTokens + that.totalTokens
  }
  // Only when one side reported them: a sum of usages that never said stays "not said", not a claimed 0.
  if (self.cachedInputTokens !== undefined || that.cachedInputTokens !== undefined) {
    sum.cachedInputTokens = (self.cachedInputTokens ?? 0) + (that.cachedInputTokens ?? 0)
  }
  if (self.cacheWriteTokens !== undefined || that.cacheWriteTokens !== undefined) {
    sum.cacheWriteTokens = (self.cacheWriteTokens ?? 0) + (that.cacheWriteTokens ?? 0)
  }
  return sum
}

/**
 * The answer to one call: one choice per `n`, token usage, the serving model's name and the response id.
 *
 * @since 0.1.0
 * @category responses
 */
export const Response = Schema.Struct({
  id: Schema.String,
  model: Schema.String,
  choices: Schema.Array(Choice),
  usage: Usage,
  /**
   * The prompt's token ids as the server sent them (vLLM ≥ 0.10.2 with `return_token_ids`: the chat template
   * applied); absent when it did not send them.
   *
   * @since 0.2.0
   */
  promptTokenIds: Schema.optional(Schema.Array(Schema.Int)),
  /**
   * The log-probability of each prompt token (vLLM's `prompt_logprobs`), `null` where the server has none (the
   * first token); absent when it did not send them.
   *
   * @since 0.2.0
   */
  promptLogprobs: Schema.optional(Schema.Array(Schema.NullOr(Schema.Number)))
})
/**
 * The answer to one call.
 *
 * @since 0.1.0
 * @category responses
 */
export type Response = typeof Response.Type

// ---------------------------------------------------------------------------------------------------------
// Streaming chunks
// ---------------------------------------------------------------------------------------------------------

/**
 * The response id and model name, sent once at the start of a stream.
 *
 * @since 0.1.0
 * @category chunks
 */
export const MetadataChunk = Schema.TaggedStruct("Metadata", {
  id: Schema.String,
  model: Schema.String,
  /** The response's `promptTokenIds`, when the server sent them (vLLM sends them with the first event). */
  promptTokenIds: Schema.optional(Schema.Array(Schema.Int)),
  /** The response's `promptLogprobs`, when the server sent them. */
  promptLogprobs: Schema.optional(Schema.Array(Schema.NullOr(Schema.Number)))
})
/**
 * A piece of a choice's text.
 *
 * @since 0.1.0
 * @category chunks
 */
export const TextChunk = Schema.TaggedStruct("TextDelta", {
  index: Schema.Int,
  text: Schema.String,
  logprobs: Schema.optional(Schema.Array(TokenLogprob)),
  /** The ids of this piece's tokens, when the server sent them (joined into the choice's `tokenIds`). */
  tokenIds: Schema.optional(Schema.Array(Schema.Int))
})
/**
 * A piece of a choice's reasoning.
 *
 * @since 0.1.0
 * @category chunks
 */
export const ReasoningChunk = Schema.TaggedStruct("ReasoningDelta", { index: Schema.Int, text: Schema.String })
/**
 * A piece of a tool call, by choice `index` and `toolIndex`; `id` and `name` come with the first piece, the
 * `arguments` text arrives in pieces to be joined.
 *
 * @since 0.1.0
 * @category chunks
 */
export const ToolCallChunk = Schema.TaggedStruct("ToolCallDelta", {
  index: Schema.Int,
  toolIndex: Schema.Int,
  id: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String),
  arguments: Schema.String
})
/**
 * The end of one choice.
 *
 * @since 0.1.0
 * @category chunks
 */
export const FinishChunk = Schema.TaggedStruct("Finish", {
  index: Schema.Int,
  finishReason: FinishReason,
  stopReason: Schema.optional(Schema.Union([Schema.String, Schema.Number])),
  /**
   * The choice's `reasoningItems`, whole: a provider knows them complete only at the end of the answer.
   *
   * @since 0.2.0
   */
  reasoningItems: Schema.optional(Schema.Array(ReasoningItem))
})
/**
 * The token usage of the whole call.
 *
 * @since 0.1.0
 * @category chunks
 */
export const UsageChunk = Schema.TaggedStruct("Usage", { usage: Usage })

/**
 * One piece of a streamed response.
 *
 * @since 0.1.0
 * @category chunks
 */
export const Chunk = Schema.Union([MetadataChunk, TextChunk, ReasoningChunk, ToolCallChunk, FinishChunk, UsageChunk])
/**
 * One piece of a streamed response.
 *
 * @since 0.1.0
 * @category chunks
 */
export type Chunk = typeof Chunk.Type

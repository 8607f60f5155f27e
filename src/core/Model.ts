/**
 * `Model` is the one interface between architectures and language models. It stays close to the wire
 * (`n`, `seed`, `stop`, raw prompts, log-probabilities) because RL and evaluation users need what chat-only
 * abstractions hide.
 *
 * @since 0.1.0
 */
import { Context, Effect, FiberRef, Schema, Stream } from "effect"
import * as internal from "./internal/modelChunks.js"
import type { ModelError } from "./ModelError.js"

// ---------------------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------------------

/** A tool call requested by the model; `arguments` is the JSON text exactly as the model wrote it. */
export const ToolCall = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  arguments: Schema.String
})
/** A tool call requested by the model. */
export type ToolCall = typeof ToolCall.Type

/** The system message: the instructions. */
export const SystemMessage = Schema.Struct({
  role: Schema.Literal("system"),
  content: Schema.String
})
/** The system message: the instructions. */
export type SystemMessage = typeof SystemMessage.Type

/** A user message. */
export const UserMessage = Schema.Struct({
  role: Schema.Literal("user"),
  content: Schema.String
})
/** A user message. */
export type UserMessage = typeof UserMessage.Type

/** An assistant message, possibly with the tool calls it asked for. */
export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  content: Schema.String,
  toolCalls: Schema.optional(Schema.Array(ToolCall)),
  reasoning: Schema.optional(Schema.String)
})
/** An assistant message, possibly with the tool calls it asked for. */
export type AssistantMessage = typeof AssistantMessage.Type

/** The result of one tool call, sent back to the model. */
export const ToolMessage = Schema.Struct({
  role: Schema.Literal("tool"),
  toolCallId: Schema.String,
  name: Schema.String,
  content: Schema.String
})
/** The result of one tool call, sent back to the model. */
export type ToolMessage = typeof ToolMessage.Type

/** Any chat message. */
export const Message = Schema.Union(SystemMessage, UserMessage, AssistantMessage, ToolMessage)
/** Any chat message. */
export type Message = typeof Message.Type

/** A system message. */
export const system = (content: string): SystemMessage => ({ role: "system", content })
/** A user message. */
export const user = (content: string): UserMessage => ({ role: "user", content })
/** An assistant message. */
export const assistant = (content: string, toolCalls?: ReadonlyArray<ToolCall>): AssistantMessage =>
  toolCalls !== undefined && toolCalls.length > 0 ? { role: "assistant", content, toolCalls } : { role: "assistant", content }
/** A tool result message. */
export const toolResult = (toolCallId: string, name: string, content: string): ToolMessage => ({
  role: "tool",
  toolCallId,
  name,
  content
})

// ---------------------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------------------

/** A JSON object (a tool's parameter schema, a response schema, pass-through fields). */
export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })
/** A JSON object. */
export type JsonObject = typeof JsonObject.Type

/** A tool the model may call: its name, what it does, and the JSON schema of its arguments. */
export const ToolDefinition = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  parameters: JsonObject
})
/** A tool the model may call. */
export type ToolDefinition = typeof ToolDefinition.Type

/** Whether and which tool the model must call. */
export const ToolChoice = Schema.Union(
  Schema.Literal("auto", "none", "required"),
  Schema.Struct({ name: Schema.String })
)
/** Whether and which tool the model must call. */
export type ToolChoice = typeof ToolChoice.Type

/** The shape the answer must take. */
export const ResponseFormat = Schema.Union(
  Schema.Struct({ type: Schema.Literal("text") }),
  Schema.Struct({ type: Schema.Literal("json") }),
  Schema.Struct({
    type: Schema.Literal("json_schema"),
    name: Schema.String,
    schema: JsonObject,
    strict: Schema.optional(Schema.Boolean)
  })
)
/** The shape the answer must take. */
export type ResponseFormat = typeof ResponseFormat.Type

const RequestFields = Schema.Struct({
  messages: Schema.optional(Schema.Array(Message)),
  prompt: Schema.optional(Schema.String),
  tools: Schema.optional(Schema.Array(ToolDefinition)),
  toolChoice: Schema.optional(ToolChoice),
  temperature: Schema.optional(Schema.Number),
  topP: Schema.optional(Schema.Number),
  maxTokens: Schema.optional(Schema.Int.pipe(Schema.positive())),
  stop: Schema.optional(Schema.Array(Schema.String)),
  seed: Schema.optional(Schema.Int),
  n: Schema.optional(Schema.Int.pipe(Schema.positive())),
  logprobs: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
  responseFormat: Schema.optional(ResponseFormat),
  extra: Schema.optional(JsonObject)
})

/**
 * One model call: chat `messages` or a raw completion `prompt` (exactly one), sampling options, and `extra`
 * fields passed to the server untouched (vLLM's `top_k`, `min_p`, `chat_template_kwargs`…). `logprobs` asks for
 * that many alternatives per token (0: only the chosen token's).
 */
export const Request = RequestFields.pipe(
  Schema.filter((request) =>
    (request.messages === undefined) !== (request.prompt === undefined) ||
    "a request has either `messages` or `prompt`, not both and not neither"
  )
)
/** One model call. */
export type Request = typeof Request.Type

// ---------------------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------------------

/** Why a choice ended. Wire values the protocol does not name map to `other`. */
export const FinishReason = Schema.Literal("stop", "length", "tool_calls", "content_filter", "other")
/** Why a choice ended. */
export type FinishReason = typeof FinishReason.Type

/** The log-probability of one generated token, with the most likely alternatives when asked for. */
export const TokenLogprob = Schema.Struct({
  token: Schema.String,
  logprob: Schema.Number,
  topLogprobs: Schema.optional(Schema.Array(Schema.Struct({ token: Schema.String, logprob: Schema.Number })))
})
/** The log-probability of one generated token. */
export type TokenLogprob = typeof TokenLogprob.Type

/** One completion. `stopReason` is vLLM's: the stop string or token id that ended it. */
export const Choice = Schema.Struct({
  index: Schema.Int,
  text: Schema.String,
  toolCalls: Schema.Array(ToolCall),
  reasoning: Schema.optional(Schema.String),
  finishReason: FinishReason,
  stopReason: Schema.optional(Schema.Union(Schema.String, Schema.Number)),
  logprobs: Schema.optional(Schema.Array(TokenLogprob))
})
/** One completion. */
export type Choice = typeof Choice.Type

/** Token counts of a call. */
export const Usage = Schema.Struct({
  inputTokens: Schema.Int,
  outputTokens: Schema.Int,
  totalTokens: Schema.Int
})
/** Token counts of a call. */
export type Usage = typeof Usage.Type

/** No tokens. */
export const emptyUsage: Usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 }

/** The sum of two usages. */
export const addUsage = (self: Usage, that: Usage): Usage => ({
  inputTokens: self.inputTokens + that.inputTokens,
  outputTokens: self.outputTokens + that.outputTokens,
  totalTokens: self.totalTokens + that.totalTokens
})

/** The answer to one call: one choice per `n`, token usage, the serving model's name and the response id. */
export const Response = Schema.Struct({
  id: Schema.String,
  model: Schema.String,
  choices: Schema.Array(Choice),
  usage: Usage
})
/** The answer to one call. */
export type Response = typeof Response.Type

// ---------------------------------------------------------------------------------------------------------
// Streaming chunks
// ---------------------------------------------------------------------------------------------------------

/** The response id and model name, sent once at the start of a stream. */
export const MetadataChunk = Schema.TaggedStruct("Metadata", { id: Schema.String, model: Schema.String })
/** A piece of a choice's text. */
export const TextChunk = Schema.TaggedStruct("TextDelta", {
  index: Schema.Int,
  text: Schema.String,
  logprobs: Schema.optional(Schema.Array(TokenLogprob))
})
/** A piece of a choice's reasoning. */
export const ReasoningChunk = Schema.TaggedStruct("ReasoningDelta", { index: Schema.Int, text: Schema.String })
/**
 * A piece of a tool call, by choice `index` and `toolIndex`; `id` and `name` come with the first piece, the
 * `arguments` text arrives in pieces to be joined.
 */
export const ToolCallChunk = Schema.TaggedStruct("ToolCallDelta", {
  index: Schema.Int,
  toolIndex: Schema.Int,
  id: Schema.optional(Schema.String),
  name: Schema.optional(Schema.String),
  arguments: Schema.String
})
/** The end of one choice. */
export const FinishChunk = Schema.TaggedStruct("Finish", {
  index: Schema.Int,
  finishReason: FinishReason,
  stopReason: Schema.optional(Schema.Union(Schema.String, Schema.Number))
})
/** The token usage of the whole call. */
export const UsageChunk = Schema.TaggedStruct("Usage", { usage: Usage })

/** One piece of a streamed response. */
export const Chunk = Schema.Union(MetadataChunk, TextChunk, ReasoningChunk, ToolCallChunk, FinishChunk, UsageChunk)
/** One piece of a streamed response. */
export type Chunk = typeof Chunk.Type

/**
 * Folds a chunk stream into the `Response` that `generate` answers: text and reasoning joined per choice, tool
 * calls assembled by index with their arguments joined, finish reasons, usage.
 */
export const accumulate = <E, R>(stream: Stream.Stream<Chunk, E, R>): Effect.Effect<Response, E, R> =>
  Effect.map(
    Stream.runFold(stream, internal.emptyAccumulator(), internal.addChunk),
    internal.toResponse
  )

/**
 * The chunks a streaming server would send for a response: text as word-sized deltas (a word with the
 * whitespace before it), reasoning likewise, each tool call as a header and its arguments in two pieces.
 * Test doubles and replays stream with it; `accumulate(toChunks(r))` gives `r` back.
 */
export const toChunks = (response: Response): ReadonlyArray<Chunk> => internal.toChunks(response)

/** The text of the first choice (empty when there is none). */
export const text = (response: Response): string => response.choices[0]?.text ?? ""

/** The tool calls of the first choice. */
export const toolCalls = (response: Response): ReadonlyArray<ToolCall> => response.choices[0]?.toolCalls ?? []

// ---------------------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------------------

/** What a model provider implements. */
export interface Service {
  readonly generate: (request: Request) => Effect.Effect<Response, ModelError>
  readonly stream: (request: Request) => Stream.Stream<Chunk, ModelError>
  /**
   * Optional: streams the answer by calling `onChunk` for each chunk, in order, when the chunk arrives (running the
   * effect it returns before the next chunk is handed over), and answers the accumulated
   * response — what `accumulate(stream(request).pipe(Stream.tap(onChunk)))` does, without running a `Stream`.
   * Running a `Stream` has a fixed cost of a few hundred microseconds on Effect 3: nothing next to a network call,
   * but it dominates a streamed run on an in-memory provider (`ScriptedModel`, a replayed `Journal`), which
   * therefore implement this. Providers without it get that fallback from `streamInto` below.
   */
  readonly streamInto?: (
    request: Request,
    onChunk: (chunk: Chunk) => Effect.Effect<void>
  ) => Effect.Effect<Response, ModelError>
}

/** The model service. Providers (`OpenAiCompatible`, `Vllm`, `ScriptedModel`, `Journal`) are layers of it. */
export class Model extends Context.Tag("valet/Model")<Model, Service>() {}

/** Sends one request and waits for the whole answer. */
export const generate = (request: Request): Effect.Effect<Response, ModelError, Model> =>
  Effect.flatMap(Model, (model) => model.generate(request))

/** Sends one request and streams the answer as it is generated. */
export const stream = (request: Request): Stream.Stream<Chunk, ModelError, Model> =>
  Stream.unwrap(Effect.map(Model, (model) => model.stream(request)))

/**
 * Streams one request, calling `onChunk` for each chunk as it arrives, and answers the accumulated `Response` (the
 * same `generate` would answer). Uses the provider's `streamInto` when it has one.
 */
export const streamInto = (
  request: Request,
  onChunk: (chunk: Chunk) => Effect.Effect<void>
): Effect.Effect<Response, ModelError, Model> => Effect.flatMap(Model, (model) => streamIntoWith(model, request, onChunk))

/** `streamInto` on a given model service rather than the one in context. */
export const streamIntoWith = (
  model: Service,
  request: Request,
  onChunk: (chunk: Chunk) => Effect.Effect<void>
): Effect.Effect<Response, ModelError> =>
  model.streamInto !== undefined
    ? model.streamInto(request, onChunk)
    : accumulate(model.stream(request).pipe(Stream.tap(onChunk)))

/**
 * `streamInto` for a provider that has a whole response at hand: sends its chunks (`toChunks`) to `onChunk`, then
 * answers it. In-memory providers implement `streamInto` with it.
 */
export const replayInto = (
  response: Response,
  onChunk: (chunk: Chunk) => Effect.Effect<void>
): Effect.Effect<Response> =>
  Effect.suspend(() => {
    const chunks = toChunks(response)
    // A plain loop while `onChunk` has nothing to run (`Effect.void`): most chunks of an in-memory reply.
    const from = (start: number): Effect.Effect<Response> => {
      for (let i = start; i < chunks.length; i++) {
        const effect = onChunk(chunks[i]!)
        if (effect !== Effect.void) return Effect.flatMap(effect, () => from(i + 1))
      }
      return Effect.succeed(response)
    }
    return from(0)
  })

/** Builds a `Model` from its operations. */
export const make = (service: Service): Service => service

/**
 * Who is calling: the session and the step name of the call in flight. Architectures set it around each model
 * call; wrappers such as the `Journal` key their records with it. `rootSessionId` lets a wrapper name a
 * sub-agent's session relative to its run, so a recording made under one random session id replays under
 * another.
 */
export interface CallContext {
  readonly sessionId: string
  readonly rootSessionId: string
  readonly step: string
}

/**
 * The `CallContext` of the model call in flight (set by `Architecture.generate` just before each call; after a
 * call it still names that call). A joined child fiber never overwrites its parent's value.
 */
export const currentCallContext: FiberRef.FiberRef<CallContext | undefined> = FiberRef.unsafeMake<
  CallContext | undefined
>(undefined, { join: (parent) => parent })

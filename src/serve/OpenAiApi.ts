/**
 * The OpenAI-compatible facade (DESIGN §12): existing OpenAI clients — the `openai` package, the AI SDK's
 * OpenAI-compatible provider, anything that speaks `/v1/chat/completions` — talk to an agent as if it were a
 * model. An `effect/http-api` group (`openai`), mounted beside `RunsApi` by `valet serve`.
 *
 * - `GET /v1/models` lists the agents as models.
 * - `POST /v1/chat/completions` with `model` = an agent's name runs it (through `Runs`: the run is in the registry,
 *   obeys `maxConcurrentRuns` and the agent's budget caps) on the conversation: the last user message is the
 *   input, the messages before it are the run's history (system and developer messages as system messages, after
 *   the agent's own instructions; tool messages as user messages quoting the result). Sampling keys
 *   (`temperature`, `max_tokens`, …) are accepted and not used: the agent's architecture makes its own calls.
 * - Not streaming: a `chat.completion` whose message is the run's output; `finish_reason` `length` when a budget
 *   stopped the run, else `stop`; `usage` from the run (every sub-agent's calls included).
 * - `stream: true`: `chat.completion.chunk`s — a role delta, then the root run's own text as it is generated
 *   (an architecture whose answer comes from sub-agents, such as Self-Refine, has none: its output is sent as one
 *   delta when it ends), the finish reason, the usage chunk with `stream_options.include_usage`, then `[DONE]`.
 *   A client that disconnects cancels the run.
 * - Errors in OpenAI's shape `{"error": {message, type, param, code}}`: 400 `invalid_request_error` naming the
 *   field, 404 `model_not_found`, 429 `rate_limit_exceeded` with `Retry-After`, 500 `server_error` for a run that
 *   failed (when streaming has begun: a last `data: {"error": …}` chunk, as OpenAI sends).
 *
 * @since 0.2.0
 */
import { Clock, Effect, Layer, Schema, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema } from "effect/http-api"
import type * as AgentEvent from "../core/AgentEvent.js"
import * as Decode from "../core/internal/decode.js"
import * as Agents from "./Agents.js"
import * as Runs from "./Runs.js"

// ---------------------------------------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------------------------------------

const TextPart = Schema.Struct({ type: Schema.String, text: Schema.optional(Schema.String) })

/** A message of the conversation, as OpenAI clients send it (other keys are ignored). */
export const ChatMessage = Schema.Struct({
  role: Schema.Literals(["system", "developer", "user", "assistant", "tool"]),
  content: Schema.optional(Schema.NullOr(Schema.Union([Schema.String, Schema.Array(TextPart)]))),
  name: Schema.optional(Schema.String),
  tool_call_id: Schema.optional(Schema.String)
})
export type ChatMessage = typeof ChatMessage.Type

/** The request body (the keys valet reads; the others are ignored). */
export const ChatCompletionRequest = Schema.Struct({
  model: Schema.String,
  messages: Schema.Array(ChatMessage).check(Schema.isMinLength(1, { expected: "at least one message" })),
  stream: Schema.optional(Schema.NullOr(Schema.Boolean)),
  stream_options: Schema.optional(Schema.NullOr(Schema.Struct({ include_usage: Schema.optional(Schema.Boolean) })))
})
export type ChatCompletionRequest = typeof ChatCompletionRequest.Type

/** OpenAI's error body. */
export const ErrorBody = Schema.Struct({
  error: Schema.Struct({
    message: Schema.String,
    type: Schema.String,
    param: Schema.NullOr(Schema.String),
    code: Schema.NullOr(Schema.String)
  })
})

const ModelList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(Schema.Struct({ id: Schema.String, object: Schema.Literal("model"), created: Schema.Number, owned_by: Schema.String }))
})

/** A body that does not decode: OpenAI's 400 naming the field. */
export class InvalidRequest extends HttpApiMiddleware.Service<InvalidRequest>()("valet/OpenAiApi/InvalidRequest", {
  error: ErrorBody.pipe(HttpApiSchema.status(400))
}) {}

/** The group: `/v1/models` and `/v1/chat/completions`. */
export const group = HttpApiGroup.make("openai")
  .add(
    HttpApiEndpoint.get("listModels", "/v1/models", { success: ModelList }),
    HttpApiEndpoint.post("chatCompletions", "/v1/chat/completions", {
      payload: ChatCompletionRequest,
      // A `chat.completion` object, or with `stream: true` SSE chunks; errors in OpenAI's shape.
      success: [Schema.Record(Schema.String, Schema.Unknown), HttpApiSchema.StreamUint8Array({ contentType: "text/event-stream" })],
      error: [ErrorBody.pipe(HttpApiSchema.status(404)), ErrorBody.pipe(HttpApiSchema.status(429)), ErrorBody.pipe(HttpApiSchema.status(500))]
    })
  )
  .middleware(InvalidRequest)

/** An API of the group alone. */
export const Api = HttpApi.make("valet-openai").add(group)

// ---------------------------------------------------------------------------------------------------------
// Conversation → run
// ---------------------------------------------------------------------------------------------------------

const textOf = (content: ChatMessage["content"]): string =>
  content === undefined || content === null
    ? ""
    : typeof content === "string"
    ? content
    : content.filter((part) => part.type === "text" || part.type === "input_text").map((part) => part.text ?? "").join("")

/** The run of a conversation: its last user message is the input; what comes before it, the history. */
export const runRequestOf = (request: ChatCompletionRequest): Runs.RunRequest => {
  const messages = request.messages
  let last = messages.length - 1
  while (last >= 0 && messages[last]!.role !== "user") last--
  const input = last >= 0 ? textOf(messages[last]!.content) : ""
  const history = messages.slice(0, Math.max(last, 0)).map((message): Runs.HistoryMessage => {
    switch (message.role) {
      case "system":
      case "developer":
        return { role: "system", content: textOf(message.content) }
      case "assistant":
        return { role: "assistant", content: textOf(message.content) }
      case "user":
        return { role: "user", content: textOf(message.content) }
      case "tool":
        return { role: "user", content: `Tool result${message.name !== undefined ? ` (${message.name})` : ""}: ${textOf(message.content)}` }
    }
  })
  return { agent: request.model, input, ...(history.length > 0 ? { history } : {}) }
}

// ---------------------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------------------

const errorResponse = (status: number, type: string, code: string | null, message: string, param: string | null = null) =>
  HttpServerResponse.jsonUnsafe({ error: { message, type, param, code } }, { status })

const refusal = (error: Runs.UnknownAgent | Runs.TooManyRuns | Runs.InvalidRunRequest, model: string) => {
  switch (error._tag) {
    case "UnknownAgent":
      return errorResponse(404, "invalid_request_error", "model_not_found", `The model \`${model}\` does not exist: ${error.message}`, "model")
    case "TooManyRuns":
      return errorResponse(429, "rate_limit_exceeded", "rate_limit_exceeded", error.message).pipe(
        HttpServerResponse.setHeader("retry-after", String(error.retryAfterSeconds))
      )
    case "InvalidRunRequest":
      return errorResponse(400, "invalid_request_error", null, error.message)
  }
}

const finishReason = (result: AgentEvent.RunResult): "stop" | "length" =>
  result.interrupted && result.interruptionReason?.startsWith("budget:") === true ? "length" : "stop"

const usageOf = (result: AgentEvent.RunResult) => ({
  prompt_tokens: result.usage.inputTokens,
  completion_tokens: result.usage.outputTokens,
  total_tokens: result.usage.totalTokens
})

/** The events of a run to its end: its result, or its failure. */
const finish = (events: Stream.Stream<Runs.Indexed, Runs.RunFailed>) =>
  Stream.runFold(events, () => undefined as AgentEvent.RunResult | undefined, (found, { event }) =>
    event._tag === "RunCompleted" && !event.sessionId.includes("__") ? event.result : found)

const completion = (runs: Runs.Service, request: ChatCompletionRequest, runId: string, created: number) =>
  runs.events(runId).pipe(
    Effect.flatMap(finish),
    Effect.map((result) => {
      const done = result!
      return HttpServerResponse.jsonUnsafe({
        id: `chatcmpl-${runId}`,
        object: "chat.completion",
        created,
        model: request.model,
        choices: [{ index: 0, message: { role: "assistant", content: done.output }, logprobs: null, finish_reason: finishReason(done) }],
        usage: usageOf(done)
      })
    }),
    Effect.catchTags({
      RunFailed: (failed) => Effect.succeed(errorResponse(500, "server_error", String(failed.error._tag ?? null), `the agent's run failed: ${failed.message}`)),
      RunNotFound: (error) => Effect.die(error)
    }),
    // A client that goes away before the answer cancels the run.
    Effect.onInterrupt(() => Effect.ignore(runs.cancel(runId)))
  )

const chunkStream = (runs: Runs.Service, request: ChatCompletionRequest, runId: string, created: number) =>
  Effect.map(runs.events(runId), (events) => {
    const base = { id: `chatcmpl-${runId}`, object: "chat.completion.chunk", created, model: request.model }
    const frame = (body: unknown) => `data: ${JSON.stringify(body)}\n\n`
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      frame({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })
    let streamed = false
    const includeUsage = request.stream_options?.include_usage === true
    const body = events.pipe(
      Stream.map(({ event }): string => {
        if (event.sessionId.includes("__")) return ""
        if (event._tag === "TextDelta" && event.index === 0 && event.text !== "") {
          streamed = true
          return chunk({ content: event.text })
        }
        if (event._tag === "RunCompleted") {
          const result = event.result
          return (streamed || result.output === "" ? "" : chunk({ content: result.output })) +
            chunk({}, finishReason(result)) +
            (includeUsage ? frame({ ...base, choices: [], usage: usageOf(result) }) : "")
        }
        return ""
      }),
      Stream.filter((text) => text !== ""),
      Stream.catchTag("RunFailed", (failed) =>
        Stream.succeed(frame({ error: { message: `the agent's run failed: ${failed.message}`, type: "server_error", param: null, code: String(failed.error._tag ?? null) } }))),
      (frames) => Stream.concat(Stream.succeed(chunk({ role: "assistant", content: "" })), frames),
      (frames) => Stream.concat(frames, Stream.succeed("data: [DONE]\n\n")),
      // The stream ends with the run; a client that goes away first cancels it.
      Stream.ensuring(Effect.ignore(runs.cancel(runId))),
      Stream.encodeText
    )
    return HttpServerResponse.stream(body, { contentType: "text/event-stream", headers: { "cache-control": "no-cache", "x-accel-buffering": "no" } })
  }).pipe(Effect.catchTag("RunNotFound", (error) => Effect.die(error)))

const build = (handlers: Parameters<Parameters<typeof HttpApiBuilder.group<"valet-openai", typeof group, "openai", unknown>>[2]>[0]) =>
  Effect.gen(function*() {
    const runs = yield* Runs.Runs
    const agents = yield* Agents.Agents
    return handlers
      .handle("listModels", () =>
        Effect.map(Clock.currentTimeMillis, (now) => ({
          object: "list" as const,
          data: agents.list.map((entry) => ({ id: entry.name, object: "model" as const, created: Math.floor(now / 1000), owned_by: "valet" }))
        })))
      .handle("chatCompletions", ({ payload }) =>
        Effect.gen(function*() {
          const created = Math.floor((yield* Clock.currentTimeMillis) / 1000)
          const started = yield* Effect.result(runs.start(runRequestOf(payload)))
          if (started._tag === "Failure") return refusal(started.failure, payload.model)
          const { runId } = started.success
          return payload.stream === true
            ? yield* chunkStream(runs, payload, runId, created)
            : yield* completion(runs, payload, runId, created)
        }))
  })

/** The group's handlers for `api` (an `HttpApi` holding `group`, maybe under a prefix), over `Runs` and `Agents`. */
export const layerFor = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
): Layer.Layer<HttpApiGroup.Service<Id, "openai"> | InvalidRequest, never, Runs.Runs | Agents.Agents> => {
  if (!("openai" in api.groups)) throw new Error(`OpenAiApi.layerFor: the API ${JSON.stringify(api.identifier)} has no "openai" group: add OpenAiApi.group to it`)
  return HttpApiBuilder.group(api as unknown as typeof Api, "openai", build).pipe(
    Layer.provideMerge(HttpApiMiddleware.layerSchemaErrorTransform(InvalidRequest, (error) =>
      Effect.succeed(errorResponse(400, "invalid_request_error", null, `Invalid request: ${Decode.describeIssue(error.cause.issue, undefined)}`))))
  ) as unknown as Layer.Layer<HttpApiGroup.Service<Id, "openai"> | InvalidRequest, never, Runs.Runs | Agents.Agents>
}

/** The group's handlers for `Api`. */
export const layer = layerFor(Api)

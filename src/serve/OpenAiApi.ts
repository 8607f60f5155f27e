/**
 * The OpenAI-compatible facade (DESIGN §12): existing OpenAI clients — the `openai` package, the AI SDK's
 * OpenAI-compatible provider, anything that speaks `/v1/chat/completions` — talk to an agent as if it were a
 * model. An `effect/http-api` group (`openai`), mounted beside `RunsApi` by `valet serve`.
 *
 * - `GET /v1/models` lists the agents as models.
 * - `POST /v1/chat/completions` with `model` = an agent's name runs it (through `Runs`: the run is in the registry,
 *   the request's owner's (`RunsApi.Owner`, the app's auth: a refused request is a 401), obeys `maxConcurrentRuns`
 *   and the agent's budget caps) on the whole conversation, which the model reads as sent,
 *   in order, after the agent's own instructions: system and developer messages as system messages, assistant
 *   messages with their `tool_calls`, tool messages as the results of those calls (their `tool_call_id`).
 *   - When the last message is a user message, it is the run's input and the messages before it its history.
 *   - When tool or assistant messages follow the last user message (a client that ran tools itself hands over),
 *     every message is history and the input is empty: the model reads the conversation, then an empty user turn
 *     (every architecture ends its first call with the input), and goes on from there.
 *   - Refused (400, `param: "messages"` or the message's path): no user message at all; a tool message whose
 *     `tool_call_id` is not an unanswered call of the assistant message before it; a tool call left unanswered;
 *     content parts other than text (images, audio, files); an assistant `function_call`.
 * - Honoured: `stream`, `stream_options.include_usage`; `response_format` `json_schema` (structured output: the
 *   answer is asked for natively, decoded with the schema, repaired when it does not decode; the content is the
 *   decoded value as JSON; a schema valet's importer cannot read is a 400, and `pattern` keywords are not checked),
 *   `json_object` (the same with the schema `{"type": "object"}`) and `text`; a text part's `cache_control`
 *   `{"type": "ephemeral"}` (OpenRouter's prompt-cache breakpoint: kept on that part of a user message, on the whole
 *   of a system message, and sent on by the agent's model; its `ttl` is not kept; another type is refused);
 *   `max_completion_tokens` /
 *   `max_tokens` as the run's budget of output tokens over all its model calls (reached: `finish_reason` `length`);
 *   `n: 1`, `tool_choice` `none` / `auto`, `function_call` `none` / `auto`, `modalities: ["text"]` (what an agent
 *   does anyway).
 * - Refused with a 400 naming the parameter, because the answer would not be what was asked: `n` > 1, `tools`
 *   and `functions` (non-empty), any other `tool_choice` / `function_call`, `logprobs`, `top_logprobs` > 0,
 *   `audio`, `modalities` other than text, `web_search_options`, an unknown `response_format` type.
 * - Accepted and not used: the sampling knobs `temperature`, `top_p`, `seed`, `stop`, `frequency_penalty`,
 *   `presence_penalty`, `logit_bias`, `reasoning_effort`, `verbosity`, `parallel_tool_calls`, `prediction` (the
 *   agent's architecture makes its own calls with its own settings), and the bookkeeping keys `user`, `metadata`,
 *   `store`, `service_tier`, `safety_identifier`, `prompt_cache_key`. Other keys are ignored.
 * - Not streaming: a `chat.completion` whose message is the run's output; `finish_reason` `length` when a budget
 *   stopped the run or it spent its whole `max_tokens`, else `stop`; `usage` from the run (every sub-agent's calls
 *   included).
 * - `stream: true`: `chat.completion.chunk`s — a role delta, then the root run's own text as it is generated
 *   (an architecture whose answer comes from sub-agents, such as Self-Refine, has none: its output is sent as one
 *   delta when it ends; so is a structured answer, which is only known once decoded), the finish reason, the usage
 *   chunk with `stream_options.include_usage`, then `[DONE]`. A client that disconnects cancels the run.
 * - Errors in OpenAI's shape `{"error": {message, type, param, code}}`: 400 `invalid_request_error` naming the
 *   parameter (`code` `unsupported_parameter`, `unsupported_value` or `invalid_value`; a body that does not decode
 *   has `param` the path of the first bad field), 404 `model_not_found`, 429 `rate_limit_exceeded` with
 *   `Retry-After`, 500 `server_error` for a run that failed (when streaming has begun: a last `data: {"error": …}`
 *   chunk, as OpenAI sends). A failed run's 500 and a `needs_approval` 409 carry `x-should-retry: false`: the
 *   `openai` package would otherwise send the request again and run the agent again.
 * - `POST /v1/responses` (the Responses API) with `model` = an agent's name runs it the same way:
 *   - `instructions` is a system message before the input items; `input` is a string (one user message) or items:
 *     messages (`user` / `system` / `developer` with `input_text`, `input_image` by URL, `input_file` by
 *     `file_data`; `assistant` with `output_text` / `refusal`), `function_call` items (the tool calls of the assistant
 *     message before them) each answered by its `function_call_output` (a string, or `input_text` parts) before the
 *     next message, as the chat facade checks `tool_call_id`; `reasoning` items are accepted and dropped (another
 *     model's private state). The last user message is the input when nothing follows it, as in chat.
 *   - Honoured: `stream`, `text.format` (`text`, `json_object`, `json_schema` as in chat), `max_output_tokens` (the
 *     run's output-token budget; reached: status `incomplete`, `incomplete_details.reason` `max_output_tokens`; the
 *     agent's other budgets: `incomplete` with the reason `budget:<limit>`; a run cancelled: status `cancelled`),
 *     `metadata` (echoed). Accepted and not used: `tool_choice` `none` / `auto` (an agent calls its own tools, as its
 *     architecture decides: `none` does not stop it), `temperature`, `top_p`, `reasoning`, `parallel_tool_calls`,
 *     `truncation`, `include`, `user` and the other bookkeeping keys.
 *   - `store` (default `true`) on a server with a thread store (`Threads` given to `Runs`; `threads:` in
 *     `valet.yaml`): the response is a turn on a thread of the request's owner (`RunsApi.Owner`, the app's auth), and
 *     its id names that turn (by a key the turn runs under). `previous_response_id` goes on from it: on its thread
 *     when its messages are the thread's last (checked again once the turn holds the thread), else on a fork cut
 *     after them (OpenAI's branching). The items before the input go with the turn:
 *     checked by its input guardrails as the caller's, and appended with its messages in one write once it holds the
 *     thread (nothing is written for a turn refused, or one whose input guardrails trip). `instructions` and `system` /
 *     `developer` items are that call's only: given to its model, not kept (each call sends its own). Ids decode
 *     strictly (only the exact id given), and one request's `item_reference`s name at most 200 turns. An `item_reference` to an output
 *     message of this server is that turn's answer. An id that names nothing, or another owner's, is a 400 "not found"
 *     (`param` `previous_response_id` or `input[i].id`), as is a response that stored nothing (refused by a
 *     guardrail, failed before it began); a response still running, or a thread in another turn, is a 409
 *     `conversation_locked`.
 *     `store: false`, or no thread store: a plain run (with `store: false`, dropped from the run registry once it
 *     ended: `GET /runs` does not list it), `store: false` in the answer, and `item_reference` is refused (400)
 *     saying why (the AI SDK sends `item_reference` unless given `providerOptions.openai.store = false`).
 *     `previous_response_id` with `store: false` on a server with a thread store reads that response's conversation
 *     (its last 100 messages) before the items, and writes nothing; without a thread store it is refused (400).
 *   - Refused with a 400 naming the parameter or the item (`param` `input[3].type`, `input[0].content[1].file_id`):
 *     non-empty `tools`, another `tool_choice`, `background: true`, `conversation`, `prompt`, `top_logprobs` > 0,
 *     every other item type (`computer_call`, `web_search_call`, `mcp_*`…), files by `file_id` or `file_url`,
 *     `input_audio`.
 *   - Not streaming: a `response` object whose output messages hold the text the root run's model calls said (one
 *     message per call whose text was streamed; the last, the run's output) and `output_text` all of it, with the
 *     run's `usage`; a response not stored has the id `resp_` and the run's id without `run_`.
 *   - `stream: true`: `event: <type>` frames with `sequence_number`s from 0 and no `[DONE]`: `response.created`,
 *     `response.in_progress`, then per output message its `output_item.added` and `content_part.added`, an
 *     `output_text.delta` per piece of its text (or the whole answer as one, as in chat), then `output_text.done`,
 *     `content_part.done`, `output_item.done`; last `response.completed` (or `response.incomplete`, a cancelled
 *     response's too), once the run's turn is written (a client may go on from it at once). A failed run ends
 *     the stream with `error` then `response.failed`, as OpenAI does after a 200. A client that disconnects cancels
 *     the run.
 *   - A run that failed, or that waits for a person (`code` `needs_approval`), is a 200 `response` with status
 *     `failed` and its `error` (`type`, `code`, `message`), sent with `x-should-retry: false`: the `openai` package and
 *     the AI SDK retry a 5xx or a 409 by default, which would run the agent again. Streamed: the `error` /
 *     `response.failed` pair.
 *
 * @example
 * ```ts
 * import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
 * import { Layer } from "effect"
 * import { HttpRouter } from "effect/http"
 * import { HttpApi, HttpApiBuilder } from "effect/http-api"
 * import { createServer } from "node:http"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Agents from "valet/Agents"
 * import * as OpenAiApi from "valet/OpenAiApi"
 * import * as Runs from "valet/Runs"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief.", model: ScriptedModel.layer(["4"]) })
 *
 * // The facade in your own API (`valet serve` mounts it beside `RunsApi`): /v1/models, /v1/chat/completions.
 * const MyApi = HttpApi.make("app").add(OpenAiApi.group)
 *
 * const main = HttpApiBuilder.layer(MyApi).pipe(
 *   Layer.provide(OpenAiApi.layerFor(MyApi)),
 *   Layer.provide(Runs.layer()),
 *   Layer.provide(Agents.layer([assistant])),
 *   HttpRouter.serve,
 *   Layer.provide(NodeHttpServer.layer(createServer, { port: 8787, host: "127.0.0.1" })),
 *   Layer.launch
 * )
 *
 * // Any OpenAI client then talks to the agent as if it were a model:
 * //   new OpenAI({ baseURL: "http://127.0.0.1:8787/v1", apiKey: "-" })
 * //     .chat.completions.create({ model: "assistant", messages: [{ role: "user", content: "2 + 2?" }] })
 * ```
 *
 * @since 0.2.0
 */
import { Clock, Data, Effect, Layer, Option, Result, Schema, SchemaIssue, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema } from "effect/http-api"
import type * as AgentEvent from "../core/AgentEvent.js"
import type * as Threads from "../core/Threads.js"
import * as Decode from "../core/internal/decode.js"
import * as Agents from "./Agents.js"
import { requireGroup } from "./internal/groupLayer.js"
import * as Request from "./internal/openai/request.js"
import * as ResponseIds from "./internal/openai/responseIds.js"
import * as ResponsesRequest from "./internal/openai/responsesRequest.js"
import * as ResponsesThreads from "./internal/openai/responsesThreads.js"
import * as ResponsesStream from "./internal/openai/responsesStream.js"
import * as Runs from "./Runs.js"
import * as RunsApi from "./RunsApi.js"

// ---------------------------------------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------------------------------------

/**
 * A message of the conversation, as OpenAI clients send it (other keys are ignored).
 *
 * @since 0.2.0
 * @category models
 */
export const ChatMessage = Request.ChatMessage
/**
 * A message of the conversation.
 *
 * @since 0.2.0
 * @category models
 */
export type ChatMessage = Request.ChatMessage

/**
 * The request body: the keys valet reads (the module comment says what becomes of each); the others are ignored.
 *
 * @since 0.2.0
 * @category models
 */
export const ChatCompletionRequest = Request.ChatCompletionRequest
/**
 * The request body.
 *
 * @since 0.2.0
 * @category models
 */
export type ChatCompletionRequest = Request.ChatCompletionRequest

/**
 * A request the facade cannot run as asked: a 400 `invalid_request_error` naming the parameter.
 *
 * @since 0.2.0
 * @category errors
 */
export const InvalidChatRequest = Request.InvalidChatRequest
/**
 * A request the facade cannot run as asked.
 *
 * @since 0.2.0
 * @category errors
 */
export type InvalidChatRequest = Request.InvalidChatRequest

/**
 * The Responses API's request body (`POST /v1/responses`): the keys valet reads (the module comment says what
 * becomes of each); the others are ignored.
 *
 * @since 0.2.0
 * @category models
 */
export const ResponseCreateRequest = ResponsesRequest.ResponseCreateRequest
/**
 * The Responses API's request body.
 *
 * @since 0.2.0
 * @category models
 */
export type ResponseCreateRequest = ResponsesRequest.ResponseCreateRequest

/**
 * OpenAI's error body.
 *
 * @since 0.2.0
 * @category models
 */
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

/**
 * A body that does not decode: OpenAI's 400 naming the field.
 *
 * @since 0.2.0
 * @category middleware
 */
export class InvalidRequest extends HttpApiMiddleware.Service<InvalidRequest>()("valet/OpenAiApi/InvalidRequest", {
  error: ErrorBody.pipe(HttpApiSchema.status(400))
}) {}

/**
 * The group: `/v1/models`, `/v1/chat/completions` and `/v1/responses`.
 *
 * @since 0.2.0
 * @category api
 */
export const group = HttpApiGroup.make("openai")
  .add(
    // Behind the owner function, as `GET /agents`: the agents are shown to the app's users only.
    HttpApiEndpoint.get("listModels", "/v1/models", { success: ModelList }).middleware(RunsApi.Owner),
    // The run is the request's owner's (the app's auth), as every run started over HTTP: another owner's `GET /runs`
    // neither lists nor reads it, and a request the app's function refuses runs nothing (401).
    HttpApiEndpoint.post("chatCompletions", "/v1/chat/completions", {
      payload: ChatCompletionRequest,
      // A `chat.completion` object, or with `stream: true` SSE chunks; errors in OpenAI's shape.
      success: [Schema.Record(Schema.String, Schema.Unknown), HttpApiSchema.StreamUint8Array({ contentType: "text/event-stream" })],
      error: [ErrorBody.pipe(HttpApiSchema.status(404)), ErrorBody.pipe(HttpApiSchema.status(429)), ErrorBody.pipe(HttpApiSchema.status(500))]
    }).middleware(RunsApi.Owner),
    HttpApiEndpoint.post("createResponse", "/v1/responses", {
      payload: ResponseCreateRequest,
      // A `response` object, or with `stream: true` the `response.*` events; errors in OpenAI's shape.
      success: [Schema.Record(Schema.String, Schema.Unknown), HttpApiSchema.StreamUint8Array({ contentType: "text/event-stream" })],
      error: [ErrorBody.pipe(HttpApiSchema.status(404)), ErrorBody.pipe(HttpApiSchema.status(429)), ErrorBody.pipe(HttpApiSchema.status(500))]
    }).middleware(RunsApi.Owner)
  )
  .middleware(InvalidRequest)

/**
 * An API of the group alone.
 *
 * @since 0.2.0
 * @category api
 */
export const Api = HttpApi.make("valet-openai").add(group)

// ---------------------------------------------------------------------------------------------------------
// Conversation → run
// ---------------------------------------------------------------------------------------------------------

/**
 * The run a conversation asks for, or why it cannot run: the whole conversation as the run's history (tool calls
 * and their results included), the last user message as the input when nothing follows it, `response_format` as
 * the run's structured output, `max_completion_tokens` / `max_tokens` as its output-token budget.
 *
 * @since 0.2.0
 * @category conversation
 */
export const runRequestOf: (request: ChatCompletionRequest) => Result.Result<Runs.RunRequest, InvalidChatRequest> =
  Request.runRequestOf

// ---------------------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------------------

const errorResponse = (status: number, type: string, code: string | null, message: string, param: string | null = null) =>
  HttpServerResponse.jsonUnsafe({ error: { message, type, param, code } }, { status })

/** The path of a body's first bad field, as OpenAI names a parameter: `messages[0].role`. */
const paramOf = (issue: SchemaIssue.Issue): string | null => {
  const path = SchemaIssue.makeFormatterStandardSchemaV1()(issue).issues[0]?.path ?? []
  if (path.length === 0) return null
  return path.reduce<string>((text, segment) => {
    const key = typeof segment === "object" && segment !== null ? segment.key : segment
    return typeof key === "number" ? `${text}[${key}]` : text === "" ? String(key) : `${text}.${String(key)}`
  }, "")
}

const refusal = (error: Runs.UnknownAgent | Runs.TooManyRuns | Runs.InvalidRunRequest | InvalidChatRequest, model: string) => {
  switch (error._tag) {
    case "InvalidChatRequest":
      return errorResponse(400, "invalid_request_error", error.code, error.message, error.param)
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

/**
 * An answer about a run that ran (failed, or stopped for a person): the `openai` package retries a 409 or a 5xx by
 * default, which would run the agent again, unless told not to (`x-should-retry: false`, which it obeys).
 */
const noRetry = (response: HttpServerResponse.HttpServerResponse) => HttpServerResponse.setHeader(response, "x-should-retry", "false")

/** What the response is built from: the request, and the run it asked for. */
interface Asked {
  readonly request: ChatCompletionRequest
  readonly run: Runs.RunRequest
  readonly runId: string
  readonly created: number
}

const finishReason = (asked: { readonly run: Runs.RunRequest }, result: AgentEvent.RunResult): "stop" | "length" => {
  if (result.interrupted && result.interruptionReason?.startsWith("budget:") === true) return "length"
  // A run whose last call was cut to the tokens left ends without being interrupted: it stopped for length too.
  const max = asked.run.budget?.maxOutputTokens
  return max !== undefined && result.usage.outputTokens >= max ? "length" : "stop"
}

/** The answer's content: the decoded value as JSON for structured output, else the run's output. */
const contentOf = (asked: { readonly run: Runs.RunRequest }, result: AgentEvent.RunResult): string =>
  asked.run.output !== undefined && result.value !== undefined ? JSON.stringify(result.value) : result.output

// The cached part goes where OpenAI puts it, only when the run's models reported one.
const usageOf = (result: AgentEvent.RunResult) => ({
  prompt_tokens: result.usage.inputTokens,
  completion_tokens: result.usage.outputTokens,
  total_tokens: result.usage.totalTokens,
  ...(result.usage.cachedInputTokens !== undefined
    ? { prompt_tokens_details: { cached_tokens: result.usage.cachedInputTokens } }
    : {})
})

/**
 * A run that needs a person's decision: the OpenAI API has no way to ask for one or to wait, so the request fails
 * saying so (and the run is cancelled) instead of hanging.
 */
class NeedsPerson extends Data.TaggedError("NeedsPerson")<{ readonly what: string; readonly route: string }> {
  get text(): string {
    return `the agent's run needs ${this.what}, which the OpenAI API cannot wait for: start it with POST /runs and give it with ${this.route}`
  }
}

/** The run's events, failing at the first call that waits for a person. */
const withoutWaiting = (events: Stream.Stream<Runs.Indexed, Runs.RunFailed>): Stream.Stream<Runs.Indexed, Runs.RunFailed | NeedsPerson> =>
  Stream.mapEffect(events, (indexed) =>
    indexed.event._tag === "ApprovalRequested"
      ? Effect.fail(new NeedsPerson({
        what: `a person's approval of tool ${JSON.stringify(indexed.event.name)} (call ${indexed.event.toolCallId})`,
        route: "POST /runs/:runId/decisions/:toolCallId"
      }))
      : indexed.event._tag === "QuestionAsked"
      ? Effect.fail(new NeedsPerson({
        what: `a person's answer to ${JSON.stringify(indexed.event.question.slice(0, 200))} (question ${indexed.event.questionId})`,
        route: "POST /runs/:runId/answers/:questionId"
      }))
      : Effect.succeed(indexed))

/** The events of a run to its end: its result, or its failure. */
const finish = (events: Stream.Stream<Runs.Indexed, Runs.RunFailed>) =>
  Stream.runFold(withoutWaiting(events), () => undefined as AgentEvent.RunResult | undefined, (found, { event }) =>
    event._tag === "RunCompleted" && !event.sessionId.includes("__") ? event.result : found)

const completion = (runs: Runs.Service, asked: Asked) =>
  runs.events(asked.runId).pipe(
    Effect.flatMap(finish),
    Effect.map((result) => {
      const done = result!
      return HttpServerResponse.jsonUnsafe({
        id: `chatcmpl-${asked.runId}`,
        object: "chat.completion",
        created: asked.created,
        model: asked.request.model,
        choices: [{
          index: 0,
          message: { role: "assistant", content: contentOf(asked, done) },
          logprobs: null,
          finish_reason: finishReason(asked, done)
        }],
        usage: usageOf(done)
      })
    }),
    Effect.catchTags({
      RunFailed: (failed) =>
        Effect.succeed(noRetry(errorResponse(500, "server_error", String(failed.error._tag ?? null), `the agent's run failed: ${failed.message}`))),
      NeedsPerson: (needs) =>
        Effect.as(Effect.ignore(runs.cancel(asked.runId)), noRetry(errorResponse(409, "invalid_request_error", "needs_approval", needs.text))),
      RunNotFound: (error) => Effect.die(error)
    }),
    // A client that goes away before the answer cancels the run.
    Effect.onInterrupt(() => Effect.ignore(runs.cancel(asked.runId)))
  )

const chunkStream = (runs: Runs.Service, asked: Asked) =>
  Effect.map(runs.events(asked.runId), (events) => {
    const base = { id: `chatcmpl-${asked.runId}`, object: "chat.completion.chunk", created: asked.created, model: asked.request.model }
    const frame = (body: unknown) => `data: ${JSON.stringify(body)}\n\n`
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      frame({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })
    let streamed = false
    const includeUsage = asked.request.stream_options?.include_usage === true
    // A structured answer is known once decoded (the model's text may be fenced, or repaired): sent whole at the end.
    const deltas = asked.run.output === undefined
    const body = withoutWaiting(events).pipe(
      Stream.map(({ event }): string => {
        if (event.sessionId.includes("__")) return ""
        if (event._tag === "TextDelta" && deltas && event.index === 0 && event.text !== "") {
          streamed = true
          return chunk({ content: event.text })
        }
        if (event._tag === "RunCompleted") {
          const result = event.result
          const content = contentOf(asked, result)
          return (streamed || content === "" ? "" : chunk({ content })) +
            chunk({}, finishReason(asked, result)) +
            (includeUsage ? frame({ ...base, choices: [], usage: usageOf(result) }) : "")
        }
        return ""
      }),
      Stream.filter((text) => text !== ""),
      Stream.catchTag("RunFailed", (failed) =>
        Stream.succeed(frame({ error: { message: `the agent's run failed: ${failed.message}`, type: "server_error", param: null, code: String(failed.error._tag ?? null) } }))),
      Stream.catchTag("NeedsPerson", (needs) =>
        Stream.succeed(frame({ error: { message: needs.text, type: "invalid_request_error", param: null, code: "needs_approval" } }))),
      (frames) => Stream.concat(Stream.succeed(chunk({ role: "assistant", content: "" })), frames),
      (frames) => Stream.concat(frames, Stream.succeed("data: [DONE]\n\n")),
      // The stream ends with the run; a client that goes away first cancels it.
      Stream.ensuring(Effect.ignore(runs.cancel(asked.runId))),
      Stream.encodeText
    )
    return HttpServerResponse.stream(body, { contentType: "text/event-stream", headers: { "cache-control": "no-cache", "x-accel-buffering": "no" } })
  }).pipe(Effect.catchTag("RunNotFound", (error) => Effect.die(error)))

/** A Responses API request with its run: the `response` object's ids and time, and the run's. */
interface AskedResponse extends ResponsesStream.Asked {
  readonly run: Runs.RunRequest
  readonly runId: string
  /** Done once the response ended, however (`ResponsesThreads.dropIfUnused`). */
  readonly ended: Effect.Effect<void>
}

/**
 * The response's end: `cancelled` when the run was; `incomplete` when a budget stopped it (`max_output_tokens` only
 * for the output-token budget, or a last call that spent the whole `max_output_tokens`; another budget names itself,
 * `budget:<limit>`, which is no OpenAI reason); else `completed`.
 */
const responseEnding = (asked: AskedResponse, result: AgentEvent.RunResult): ResponsesStream.Ending => {
  const reason = result.interrupted ? result.interruptionReason : undefined
  if (reason === "cancelled") return { status: "cancelled", reason }
  if (reason === "budget:max_output_tokens") return { status: "incomplete", reason: "max_output_tokens" }
  if (reason?.startsWith("budget:") === true) return { status: "incomplete", reason }
  const max = asked.run.budget?.maxOutputTokens
  return max !== undefined && result.usage.outputTokens >= max ? { status: "incomplete", reason: "max_output_tokens" } : { status: "completed" }
}

/** Why a response could not start: the chat refusals, and a thread's (busy: 409 `conversation_locked`). */
const storedRefusal = (
  error: Runs.UnknownAgent | Runs.TooManyRuns | Runs.InvalidRunRequest | InvalidChatRequest | Runs.ThreadsUnavailable | Threads.ThreadError,
  model: string
) => {
  switch (error._tag) {
    case "ThreadBusy":
      return errorResponse(409, "invalid_request_error", "conversation_locked", `Another response is in progress on this conversation: ${error.message}`)
    case "ThreadNotFound":
    case "ThreadForbidden":
      return errorResponse(400, "invalid_request_error", "invalid_value", "Previous response not found.", "previous_response_id")
    case "ThreadStoreError":
    case "ThreadsUnavailable":
      return errorResponse(500, "server_error", null, `the thread store failed: ${error.message}`)
    default:
      return refusal(error, model)
  }
}

const failedResponse = (asked: AskedResponse, type: string, code: string, message: string) =>
  noRetry(HttpServerResponse.jsonUnsafe(ResponsesStream.responseObject(asked, { status: "failed", error: { type, code, message } })))

/**
 * What an event of the run adds to the response's output (`ResponsesStream.framer`, whose frames a stream sends): the
 * root run's text, each model call's its own message (a compaction's call is no reply); a structured answer is
 * known once decoded (the model's text may be fenced, or repaired), so it streams no deltas and is sent whole at the
 * end.
 */
const framesOf = (asked: AskedResponse, frames: ReturnType<typeof ResponsesStream.framer>) => (event: AgentEvent.AgentEvent): string => {
  if (event.sessionId.includes("__")) return ""
  if (event._tag === "TextDelta" && asked.run.output === undefined && event.index === 0 && event.text !== "" && !event.step.startsWith("context.")) {
    return frames.delta(event.step, event.text)
  }
  if (event._tag === "ModelReplied") return frames.replied(event.step, event.toolCalls.length > 0)
  return ""
}

const createdResponse = (runs: Runs.Service, asked: AskedResponse) =>
  runs.events(asked.runId).pipe(
    Effect.flatMap((events) => {
      // The same output messages as the stream's (its frames dropped).
      const frames = ResponsesStream.framer(asked)
      const frame = framesOf(asked, frames)
      return Stream.runFold(withoutWaiting(events), () => undefined as AgentEvent.RunResult | undefined, (found, { event }) => {
        frame(event)
        return event._tag === "RunCompleted" && !event.sessionId.includes("__") ? event.result : found
      }).pipe(Effect.map((result) => {
        const done = result!
        const ending = responseEnding(asked, done)
        frames.end(ending, contentOf(asked, done), done)
        return HttpServerResponse.jsonUnsafe(ResponsesStream.responseObject(asked, { ...ending, items: frames.items(), result: done }))
      }))
    }),
    // A run that ran and failed (or stopped for a person) is a response that failed: 200 with status "failed" and the
    // error, as OpenAI answers one. A 5xx or 409 would have the `openai` package and the AI SDK send the request
    // again by default, running the agent again (the AI SDK throws on a 200 with `error`, not retried).
    Effect.catchTags({
      RunFailed: (failed) =>
        Effect.succeed(failedResponse(asked, "server_error", String(failed.error._tag ?? "server_error"), `the agent's run failed: ${failed.message}`)),
      NeedsPerson: (needs) => Effect.as(Effect.ignore(runs.cancel(asked.runId)), failedResponse(asked, "invalid_request_error", "needs_approval", needs.text)),
      RunNotFound: (error) => Effect.die(error)
    }),
    // A client that goes away before the answer cancels the run.
    Effect.onInterrupt(() => Effect.ignore(runs.cancel(asked.runId))),
    Effect.ensuring(asked.ended)
  )

const responseEvents = (runs: Runs.Service, asked: AskedResponse) =>
  Effect.map(runs.events(asked.runId), (events) => {
    const frames = ResponsesStream.framer(asked)
    const frame = framesOf(asked, frames)
    let result: AgentEvent.RunResult | undefined
    // The end frames go out when the run's events end, not at its RunCompleted: a turn's messages are appended (and
    // its lease given back) after that event, and a client that goes on from the response at `response.completed`
    // must find them there.
    const end = Stream.sync((): string => result === undefined ? "" : frames.end(responseEnding(asked, result), contentOf(asked, result), result))
    const body = withoutWaiting(events).pipe(
      Stream.map(({ event }): string => {
        if (event._tag === "RunCompleted" && !event.sessionId.includes("__")) result = event.result
        return frame(event)
      }),
      Stream.concat(end),
      Stream.filter((text) => text !== ""),
      Stream.catchTag("RunFailed", (failed) =>
        Stream.succeed(frames.failed("server_error", String(failed.error._tag ?? "server_error"), `the agent's run failed: ${failed.message}`))),
      Stream.catchTag("NeedsPerson", (needs) => Stream.succeed(frames.failed("invalid_request_error", "needs_approval", needs.text))),
      (rest) => Stream.concat(Stream.sync(frames.start), rest),
      // The stream ends with the run; a client that goes away first cancels it.
      Stream.ensuring(Effect.andThen(Effect.ignore(runs.cancel(asked.runId)), asked.ended)),
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
          const run = runRequestOf(payload)
          if (Result.isFailure(run)) return refusal(run.failure, payload.model)
          const owner = yield* Effect.service(RunsApi.CurrentOwner)
          const started = yield* Effect.result(runs.start(run.success, { owner }))
          if (Result.isFailure(started)) return refusal(started.failure, payload.model)
          const asked: Asked = { request: payload, run: run.success, runId: started.success.runId, created }
          return payload.stream === true ? yield* chunkStream(runs, asked) : yield* completion(runs, asked)
        }))
      .handle("createResponse", ({ payload }) =>
        Effect.gen(function*() {
          const created = Math.floor((yield* Clock.currentTimeMillis) / 1000)
          const owner = yield* Effect.service(RunsApi.CurrentOwner)
          const threads = payload.store === false ? undefined : Option.getOrUndefined(runs.threads)
          const unstored = payload.store === false
            ? "store is false"
            : threads === undefined
            ? "this server keeps no conversations (no thread store: threads: in valet.yaml)"
            : undefined
          const store = Option.getOrUndefined(runs.threads)
          // Before any thread is read or made.
          if (store !== undefined && agents.get(payload.model) === undefined) {
            return refusal(new Runs.UnknownAgent({ agent: payload.model, message: `no agent named ${JSON.stringify(payload.model)}` }), payload.model)
          }
          const references = threads === undefined
            ? new Map<string, never>()
            : yield* ResponsesThreads.references(threads, owner, ResponsesRequest.referencesOf(payload))
          const previous = payload.previous_response_id ?? undefined
          // Not stored, going on from a stored response: its conversation is read, and the run is a plain one.
          const read = payload.store === false && previous !== undefined && store !== undefined
            ? yield* ResponsesThreads.conversationOf(store, owner, previous)
            : undefined
          const run = ResponsesRequest.runRequestOf(payload, { unstored, references, previous: read })
          if (Result.isFailure(run)) return refusal(run.failure, payload.model)
          const started = yield* Effect.result(
            threads === undefined
              // Not stored: the run is dropped from the registry once it ended (GET /runs does not list it).
              ? Effect.map(runs.start(run.success, { owner, ephemeral: payload.store === false }), ({ runId }) => ({
                runId,
                at: undefined as ResponseIds.TurnAt | undefined,
                made: false as boolean
              }))
              : ResponsesThreads.startTurn(runs, threads, owner, previous, run.success)
          )
          if (Result.isFailure(started)) return storedRefusal(started.failure, payload.model)
          const { at, made, runId } = started.success
          // The run's own id inside a response that is not stored: GET /runs/:runId finds what it was (but after a
          // `store: false` one ended: that run is dropped).
          const suffix = runId.replace(/^run_/, "")
          const asked: AskedResponse = {
            request: payload,
            run: run.success,
            runId,
            id: at === undefined ? `resp_${suffix}` : ResponseIds.responseId(at),
            messageId: (n) => at === undefined ? `msg_${suffix}${n === 0 ? "" : `_${n}`}` : ResponseIds.messageId(at, n),
            created,
            store: at !== undefined,
            previousResponseId: previous ?? null,
            ended: threads !== undefined && at !== undefined && made ? ResponsesThreads.dropIfUnused(threads, owner, at) : Effect.void
          }
          return payload.stream === true ? yield* responseEvents(runs, asked) : yield* createdResponse(runs, asked)
        }).pipe(Effect.catch((error) => Effect.succeed(storedRefusal(error, payload.model)))))
  })

/**
 * `RunsApi.Owner` over the app's function, its refusal (401) in OpenAI's shape, as the token guard's is under
 * `/v1/`: an `openai` client reads it as an `AuthenticationError`.
 */
const ownerLayer = (owner: RunsApi.OwnerOf | undefined): Layer.Layer<RunsApi.Owner> =>
  Layer.effect(
    RunsApi.Owner,
    Effect.map(Effect.service(RunsApi.Owner), (inner) =>
      RunsApi.Owner.of((httpEffect, options) =>
        Effect.catchTag(
          inner(httpEffect, options),
          "Unauthorized",
          (error) => Effect.succeed(errorResponse(401, "authentication_error", null, error.message))
        )))
  ).pipe(Layer.provide(RunsApi.layerOwner(owner)))

/**
 * The group's handlers for `api` (an `HttpApi` holding `group`, maybe under a prefix), over `Runs` and `Agents`;
 * `owner` finds whose a chat completion's run is, and whose threads a stored response is a turn on
 * (`RunsApi.LayerOptions`). Without it, every request is the owner `"default"`: all runs and stored responses are one
 * owner's, and any caller who has a response id may go on from it.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerFor = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  options: RunsApi.LayerOptions = {}
): Layer.Layer<HttpApiGroup.Service<Id, "openai"> | InvalidRequest, never, Runs.Runs | Agents.Agents> => {
  return requireGroup("OpenAiApi", "openai", api, () => HttpApiBuilder.group(api as unknown as typeof Api, "openai", build).pipe(
    Layer.provide(ownerLayer(options.owner)),
    Layer.provideMerge(HttpApiMiddleware.layerSchemaErrorTransform(InvalidRequest, (error) =>
      Effect.succeed(errorResponse(
        400,
        "invalid_request_error",
        "invalid_value",
        `Invalid request: ${Decode.describeIssue(error.cause.issue, undefined)}`,
        paramOf(error.cause.issue)
      ))))
  )) as unknown as Layer.Layer<HttpApiGroup.Service<Id, "openai"> | InvalidRequest, never, Runs.Runs | Agents.Agents>
}

/**
 * The group's handlers for `Api`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = layerFor(Api)

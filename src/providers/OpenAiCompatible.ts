/**
 * The client of OpenAI-compatible servers — vLLM (`vllm serve`), OpenAI, llama.cpp server, Ollama, SGLang,
 * LM Studio — as a `Model` layer over `effect/http`'s `HttpClient`.
 *
 * `POST /v1/chat/completions` for `messages` (or `POST /v1/responses` with `api: "responses"`: OpenAI's Responses
 * API, whose reasoning items are sent back on the next call), `POST /v1/completions` for a raw `prompt`; streamed through SSE
 * (`stream_options.include_usage` always sent); `n`, `seed`, `stop`, tools, `response_format`, log-probabilities
 * and `extra` fields passed through. Interrupting a call aborts its HTTP request.
 *
 * A server is not trusted to be well-behaved:
 * - Both error body shapes, errors inside a 200 stream (`data: {"error": ...}`) and SSE `event: error` become
 *   `ModelError`s carrying the server's message.
 * - No answer is made up: a body with no choice (`{"choices": []}`), an empty stream, or one with only `[DONE]`
 *   or only usage is a `MalformedResponse` (a choice whose content is `""` is a valid, empty answer); a stream
 *   that ends without `[DONE]` is a `Transport` error, never a silently short answer; a stream request answered
 *   with anything but `text/event-stream` (an HTML page of a proxy) is a `MalformedResponse` naming the type.
 * - Timeouts (defaults): 60 s per attempt (`attemptTimeout`; for a stream: until the first event, then between
 *   events — SSE comments such as `: ping` and whitespace do not count), 10 min per call, retries included
 *   (`callTimeout`). `Duration.infinity` turns either off.
 * - Retries: 3 attempts (`maxAttempts`), exponential from 500 ms, jittered, at most 30 s apart, never sooner than
 *   the server's `Retry-After`, never after a streamed chunk; a `Retry-After` over 60 s (`maxRetryAfter`) is not
 *   waited out: the call fails at once with `RateLimited`, whose `retryAfterMs` says when to come back.
 * - Size caps: 32 MiB for a non-streamed body (`maxResponseBytes`), 256 MiB for a whole stream
 *   (`maxStreamBytes`), 8 MiB for one event (`maxEventBytes`); past a cap the call fails with a
 *   `MalformedResponse` naming it, and the rest of the body is not read.
 * - An optional cap on requests in flight (`maxInFlight`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, OpenAiCompatible } from "valet"
 *
 * // `vllm serve Qwen/Qwen2.5-7B-Instruct`; llama.cpp, Ollama, SGLang or OpenAI take the same options.
 * const Qwen = OpenAiCompatible.layerNode({
 *   baseUrl: "http://127.0.0.1:8000",
 *   model: "Qwen/Qwen2.5-7B-Instruct",
 *   attemptTimeout: "2 minutes",
 *   maxInFlight: 64
 * })
 *
 * const agent = Agent.make({ name: "assistant", instructions: "Be brief." })
 * const answer = Agent.run(agent, "Hello!").pipe(Effect.provide(Qwen))
 *
 * // What the server serves (`GET /v1/models`).
 * const models = OpenAiCompatible.listModels.pipe(Effect.provide(Qwen))
 *
 * // Or from VALET_BASE_URL, VALET_MODEL (else the server's first model) and VALET_API_KEY / OPENAI_API_KEY.
 * const FromEnv = OpenAiCompatible.layerConfigNode()
 *
 * // Embeddings (`POST /v1/embeddings`; `vllm serve BAAI/bge-small-en-v1.5`): an `EmbeddingModel` for recall.
 * const Bge = OpenAiCompatible.layerEmbeddingModelNode({ baseUrl: "http://127.0.0.1:8001", model: "BAAI/bge-small-en-v1.5", dimensions: 384 })
 * ```
 *
 * @since 0.1.0
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Config, Context, Effect, Layer, Option, Redacted, Schema, Stream } from "effect"
import { HttpClient } from "effect/http"
import * as Client from "./internal/openai/client.js"
import * as Resilience from "./internal/resilience.js"
import type { InvalidOptions } from "../core/AgentError.js"
import * as EmbeddingModel from "../core/EmbeddingModel.js"
import * as Opts from "../core/internal/decode.js"
import * as Model from "../core/Model.js"
import * as ModelError from "../core/ModelError.js"

/**
 * Retries, timeouts, the in-flight cap and the body size caps (every field optional; see each field's default).
 *
 * @since 0.1.0
 * @category options
 */
export type ResilienceOptions = Resilience.Options

/**
 * Where the server is, which model to ask, and how to call it.
 *
 * @since 0.1.0
 * @category options
 */
export interface Options extends ResilienceOptions {
  /**
   * The server: its root (`http://127.0.0.1:8000`, to which `/v1` is added) or its API base
   * (`http://127.0.0.1:8000/v1`, `https://api.openai.com/v1`), used as given when it has a path.
   */
  readonly baseUrl: string
  /** The model name the server knows (`Qwen/Qwen2.5-7B-Instruct`, `gpt-4o-mini`, `llama3.2`). */
  readonly model: string
  /** Sent as `Authorization: Bearer …`; kept `Redacted` so it never reaches a log. */
  readonly apiKey?: Redacted.Redacted<string> | string | undefined
  /** Extra headers on every request. */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** The model's context window in tokens, for `Compaction` (else the compaction policy's default). */
  readonly contextWindow?: number | undefined
  /**
   * Which API chat calls use: `"chat"` (`POST /v1/chat/completions`, the default: every OpenAI-compatible server)
   * or `"responses"` (`POST /v1/responses`, OpenAI's Responses API). With `"responses"` the whole history is sent on
   * every call with `store: false`, and a reasoning model's reasoning items (`encrypted_content`) come back on the
   * choice (`reasoningItems`) and go back with the assistant turn in the next call of a tool loop. A raw `prompt`
   * goes to `/v1/completions` either way.
   *
   * @since 0.2.0
   */
  readonly api?: "chat" | "responses" | undefined
}

/**
 * A model the server serves (`GET /v1/models`).
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelInfo {
  readonly id: string
  readonly ownedBy?: string | undefined
  /** vLLM's context window. */
  readonly maxModelLen?: number | undefined
}

/**
 * The client: a `Model` service, plus what an OpenAI-compatible server offers beside completions.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service extends Model.Service {
  /** The API base the client calls, e.g. `http://127.0.0.1:8000/v1`. */
  readonly apiBase: string
  /** The model name sent with every request. */
  readonly model: string
  /** `GET /v1/models`. */
  readonly listModels: Effect.Effect<ReadonlyArray<ModelInfo>, ModelError.ModelError>
}

/**
 * The OpenAI-compatible client, provided beside `Model` by this module's layers.
 *
 * @since 0.1.0
 * @category services
 */
export class OpenAiCompatible extends Context.Service<OpenAiCompatible, Service>()("valet/OpenAiCompatible") {}

const endpointOf = (options: Options): Client.Endpoint => ({
  apiBase: Client.apiBaseOf(options.baseUrl),
  model: options.model,
  apiKey: options.apiKey === undefined
    ? undefined
    : typeof options.apiKey === "string"
    ? Redacted.make(options.apiKey)
    : options.apiKey,
  headers: options.headers ?? {},
  api: options.api ?? "chat"
})

const toModelInfo = (entry: { id: string; owned_by?: string | null | undefined; max_model_len?: number | null | undefined }): ModelInfo => ({
  id: entry.id,
  ...(entry.owned_by !== null && entry.owned_by !== undefined ? { ownedBy: entry.owned_by } : {}),
  ...(entry.max_model_len !== null && entry.max_model_len !== undefined ? { maxModelLen: entry.max_model_len } : {})
})

// An http(s) URL: a typo such as `127.0.0.1:8000` (no scheme) is refused here, not on the first call.
const BaseUrl = Schema.String.check(Schema.makeFilter((url: string) => {
  try {
    const parsed = new URL(url)
    return parsed.protocol === "http:" || parsed.protocol === "https:"
  } catch {
    return false
  }
}, { expected: "an http(s) URL such as http://127.0.0.1:8000" }))

const OptionsSchema = Schema.Struct({
  baseUrl: BaseUrl,
  model: Schema.String,
  apiKey: Schema.optional(Schema.Union([
    Schema.String,
    Schema.declare((u: unknown): u is Redacted.Redacted<string> => Redacted.isRedacted(u), { expected: "a Redacted string" })
  ])),
  headers: Schema.optional(Schema.Record(Schema.String, Schema.String)),
  contextWindow: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  api: Schema.optional(Schema.Literals(["chat", "responses"])),
  ...Resilience.optionFields
})

/**
 * Builds the client over the `HttpClient` in context. Options are checked first: a bad one is `InvalidOptions`
 * naming it (`OpenAiCompatible: baseUrl must be an http(s) URL …, got "localhost:8000"`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Service, InvalidOptions, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    yield* Opts.decode("OpenAiCompatible", OptionsSchema, options)
    const http = Client.quiet(yield* HttpClient.HttpClient)
    const endpoint = endpointOf(options)
    const limits = Resilience.limitsOf(options)
    const model = yield* Resilience.make(Client.makeAttempt(http, endpoint, limits), options)
    // No stack capture: it cost more than the rest of the span on every call.
    const span = { attributes: { "valet.model": endpoint.model, "valet.api_base": endpoint.apiBase }, captureStackTrace: false }
    return {
      apiBase: endpoint.apiBase,
      model: endpoint.model,
      ...(options.contextWindow !== undefined ? { contextWindow: options.contextWindow } : {}),
      generate: (request) => Effect.withSpan(model.generate(request), "valet/OpenAiCompatible.generate", span),
      stream: (request) => Stream.withSpan(model.stream(request), "valet/OpenAiCompatible.stream", span),
      listModels: Effect.map(Client.listModels(http, endpoint, limits), (list) => list.data.map(toModelInfo)).pipe(
        Resilience.withAttemptTimeout(options),
        Effect.withSpan("valet/OpenAiCompatible.listModels", span)
      )
    }
  })

/**
 * `GET /v1/models` of the client in context.
 *
 * @since 0.1.0
 * @category calls
 */
export const listModels: Effect.Effect<ReadonlyArray<ModelInfo>, ModelError.ModelError, OpenAiCompatible> =
  Effect.flatMap(OpenAiCompatible, (client) => client.listModels)

const provide = <E, R>(service: Effect.Effect<Service, E, R>): Layer.Layer<Model.Model | OpenAiCompatible, E, R> =>
  Layer.effectContext(Effect.map(service, (client) =>
    Context.make(OpenAiCompatible, client).pipe(
      Context.add(Model.Model, Model.make({
        generate: client.generate,
        stream: client.stream,
        ...(client.contextWindow !== undefined ? { contextWindow: client.contextWindow } : {})
      }))
    )))

/**
 * A `Model` (and the `OpenAiCompatible` client) over the `HttpClient` in context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<Model.Model | OpenAiCompatible, InvalidOptions, HttpClient.HttpClient> =>
  provide(make(options))

/**
 * `layer` with undici's `HttpClient` (a keep-alive connection pool): nothing else to provide in Node.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNode = (options: Options): Layer.Layer<Model.Model | OpenAiCompatible, InvalidOptions> =>
  Layer.provide(layer(options), NodeHttpClient.layerUndici)

/**
 * The server settings from the environment: `VALET_BASE_URL` (required), `VALET_MODEL`, and the key from
 * `VALET_API_KEY`, else `OPENAI_API_KEY` (read as `Redacted`).
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<{
  readonly baseUrl: string
  readonly model: Option.Option<string>
  readonly apiKey: Option.Option<Redacted.Redacted<string>>
}> = Config.all({
  baseUrl: Config.String("VALET_BASE_URL"),
  model: Config.option(Config.NonEmptyString("VALET_MODEL")),
  apiKey: Config.option(Config.Redacted("VALET_API_KEY").pipe(Config.orElse(() => Config.Redacted("OPENAI_API_KEY"))))
})

/**
 * A `Model` configured from the environment (`config`). Without `VALET_MODEL` the server is asked for its
 * models (`GET /v1/models`) once, and the first one is used: a single-model vLLM needs no model name (and its
 * `max_model_len` is the model's context window, unless `contextWindow` says one).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options: ResilienceOptions & {
    readonly headers?: Readonly<Record<string, string>> | undefined
    readonly contextWindow?: number | undefined
  } = {}
): Layer.Layer<
  Model.Model | OpenAiCompatible,
  Config.ConfigError | ModelError.ModelError | InvalidOptions,
  HttpClient.HttpClient
> =>
  provide(Effect.gen(function*() {
    const settings = yield* config
    const base = { ...options, baseUrl: settings.baseUrl, apiKey: Option.getOrUndefined(settings.apiKey) }
    if (Option.isSome(settings.model)) return yield* make({ ...base, model: settings.model.value })
    const probe = yield* make({ ...base, model: "" })
    const models = yield* probe.listModels
    if (models.length === 0) {
      return yield* new ModelError.ModelNotFound({
        model: "",
        message: `VALET_MODEL is not set and ${probe.apiBase}/models lists no model: set VALET_MODEL`
      })
    }
    // The server says its window (vLLM's max_model_len) unless the options did: compaction measures against it.
    const window = base.contextWindow ?? models[0]!.maxModelLen
    return yield* make({ ...base, model: models[0]!.id, ...(window !== undefined ? { contextWindow: window } : {}) })
  }))

/**
 * `layerConfig` with undici's `HttpClient`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfigNode = (
  options: ResilienceOptions & { readonly headers?: Readonly<Record<string, string>> | undefined } = {}
): Layer.Layer<Model.Model | OpenAiCompatible, Config.ConfigError | ModelError.ModelError | InvalidOptions> =>
  Layer.provide(layerConfig(options), NodeHttpClient.layerUndici)

// ---------------------------------------------------------------------------------------------------------
// Embeddings
// ---------------------------------------------------------------------------------------------------------

/**
 * Where the embeddings server is, which model to ask, and how (`POST /v1/embeddings`).
 *
 * @since 0.2.0
 * @category embeddings
 */
export interface EmbeddingOptions extends ResilienceOptions {
  /** The server's root or API base, as for `Options.baseUrl`. */
  readonly baseUrl: string
  /** The embedding model the server knows (`BAAI/bge-small-en-v1.5`, `text-embedding-3-small`, `nomic-embed-text`). */
  readonly model: string
  readonly apiKey?: Redacted.Redacted<string> | string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  /**
   * The vectors' length. Every answer is checked against it, and it is sent as `dimensions` — which OpenAI's
   * text-embedding-3 models and vLLM's Matryoshka models use to shorten their vectors, and other servers may refuse:
   * leave it out for those (the length of the first answer is then the one every later answer must have).
   */
  readonly dimensions?: number | undefined
  /** `"float"` (the default: a JSON list of numbers) or `"base64"` (float32 bytes, a quarter the size on the wire). */
  readonly encodingFormat?: "float" | "base64" | undefined
  /** At most this many texts per request (default 256); larger inputs are sent in batches, one after the other. */
  readonly maxBatchSize?: number | undefined
}

const EmbeddingOptionsSchema = Schema.Struct({
  baseUrl: BaseUrl,
  model: Schema.String,
  apiKey: OptionsSchema.fields.apiKey,
  headers: OptionsSchema.fields.headers,
  dimensions: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  encodingFormat: Schema.optional(Schema.Literals(["float", "base64"])),
  maxBatchSize: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  ...Resilience.optionFields
})

/**
 * An `EmbeddingModel` over the `HttpClient` in context: `POST /v1/embeddings` of vLLM (`--task embed`), OpenAI,
 * llama.cpp server (`--embeddings`), Ollama, text-embeddings-inference, LM Studio. Each request is retried and timed
 * out as a model call is (`ResilienceOptions`); every answer is schema-checked (one vector per text, by `index`; the
 * dimensions; finite numbers), a bad one a `MalformedResponse` naming what was wrong. Options are checked first
 * (`InvalidOptions` naming the field).
 *
 * @since 0.2.0
 * @category embeddings
 */
export const makeEmbeddingModel = (options: EmbeddingOptions): Effect.Effect<EmbeddingModel.Service, InvalidOptions, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    yield* Opts.decode("OpenAiCompatible", EmbeddingOptionsSchema, options)
    const http = Client.quiet(yield* HttpClient.HttpClient)
    const endpoint = endpointOf({ ...options })
    const limits = Resilience.limitsOf(options)
    const call = yield* Resilience.makeCall(options)
    const request: Client.EmbeddingRequest = {
      encodingFormat: options.encodingFormat ?? "float",
      ...(options.dimensions !== undefined ? { dimensions: options.dimensions } : {})
    }
    const span = { attributes: { "valet.model": endpoint.model, "valet.api_base": endpoint.apiBase }, captureStackTrace: false }
    return EmbeddingModel.make({
      model: options.model,
      ...(options.dimensions !== undefined ? { dimensions: options.dimensions } : {}),
      ...(options.maxBatchSize !== undefined ? { maxBatchSize: options.maxBatchSize } : {}),
      embed: (texts) =>
        Effect.withSpan(call(Client.embeddings(http, endpoint, limits, texts, request)), "valet/OpenAiCompatible.embed", {
          ...span,
          attributes: { ...span.attributes, "valet.texts": texts.length }
        })
    })
  })

/**
 * `makeEmbeddingModel` as a layer.
 *
 * @since 0.2.0
 * @category embeddings
 */
export const layerEmbeddingModel = (
  options: EmbeddingOptions
): Layer.Layer<EmbeddingModel.EmbeddingModel, InvalidOptions, HttpClient.HttpClient> =>
  Layer.effect(EmbeddingModel.EmbeddingModel, makeEmbeddingModel(options))

/**
 * `layerEmbeddingModel` with undici's `HttpClient`: nothing else to provide in Node.
 *
 * @since 0.2.0
 * @category embeddings
 */
export const layerEmbeddingModelNode = (options: EmbeddingOptions): Layer.Layer<EmbeddingModel.EmbeddingModel, InvalidOptions> =>
  Layer.provide(layerEmbeddingModel(options), NodeHttpClient.layerUndici)

/**
 * The vLLM actor pool: a `Model` over the actors listed in `configs/vllm_actors.yaml`.
 *
 * ```yaml
 * actors:
 *   - name: actor0
 *     base_url: http://127.0.0.1:8000   # the server root (or its /v1 base)
 *     model: Qwen/Qwen2.5-7B-Instruct   # optional: detected from GET /v1/models
 *     tensor_parallel_size: 1           # default 1 (informational)
 *     gpu_id: 0                         # default 0 (informational)
 *     api: openai                       # optional: openai (`vllm serve`) | generate (the legacy demo server)
 *     max_in_flight: 32                 # optional cap on requests in flight to this actor
 * timeout_sec: 60                       # per attempt
 * max_tokens: 512                       # when a request sets none
 * max_attempts: 3                       # per call, the first included
 * ```
 *
 * A missing file means one actor `default` at `http://127.0.0.1:8000`. A bad file fails with `VllmConfigError`
 * naming the field and the line. With `actorName` every call goes to that actor; without it each attempt goes
 * to the healthy actor with the fewest requests in flight (health from `GET /health`, cached a few seconds; an
 * actor whose connection fails is skipped until it answers again). An actor without `api` is asked once
 * (`GET /v1/models` answering 200 means `vllm serve`, anything else the legacy `POST /generate` server) and the
 * answer is remembered.
 *
 * Each call is held to the same rules as `OpenAiCompatible`'s (see there): `timeout_sec` per attempt (a stream:
 * until its first event, then between events; comments and whitespace do not count), 10 minutes per call
 * (`resilience.callTimeout`), `Retry-After` waited up to 60 s (`resilience.maxRetryAfter`), bodies capped at
 * 32 MiB / 256 MiB per stream / 8 MiB per event (`resilience.maxResponseBytes`, `maxStreamBytes`,
 * `maxEventBytes`), and an answer with no completion in it (`{"text": []}`, `{"choices": []}`, an empty
 * stream) is a `MalformedResponse`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent } from "valet"
 * import * as Vllm from "valet/Vllm"
 *
 * // Each call goes to the healthy actor of the pool file with the fewest requests in flight.
 * const Pool = Vllm.layerNode({ configPath: "configs/vllm_actors.yaml" })
 *
 * const agent = Agent.make({ name: "solver", instructions: "Solve the task." })
 * const answer = Agent.run(agent, "2 + 2?").pipe(Effect.provide(Pool))
 *
 * // Which actors answer `GET /health`, and how busy each is.
 * const health = Vllm.health().pipe(
 *   Effect.map((actors) => actors.map((actor) => `${actor.name}: ${actor.healthy ? "ok" : actor.detail}, ${actor.inFlight} in flight`)),
 *   Effect.provide(Pool)
 * )
 *
 * // One actor only: `Vllm.layerNode({ actorName: "actor0" })`. A pool file's text, checked without reading a file:
 * const parsed = Vllm.parseConfig("actors:\n  - name: actor0\n    base_url: http://127.0.0.1:8000\n", "inline.yaml")
 * ```
 *
 * @since 0.1.0
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Context, Duration, Effect, FileSystem, Layer, Option, Result, Schema, Stream } from "effect"
import { HttpClient } from "effect/http"
import * as Client from "./internal/openai/client.js"
import * as Config from "./internal/vllm/config.js"
import * as YamlDocument from "./internal/yamlDocument.js"
import * as Pool from "./internal/vllm/pool.js"
import * as Resilience from "./internal/resilience.js"
import type { InvalidOptions } from "../core/AgentError.js"
import * as Opts from "../core/internal/decode.js"
import * as ModelChunks from "../core/internal/modelChunks.js"
import * as Model from "../core/Model.js"

/**
 * The default location of the pool file, relative to the working directory.
 *
 * @since 0.1.0
 * @category config
 */
export const defaultConfigPath = "configs/vllm_actors.yaml"

/**
 * The pool file could not be read or is not valid; `line` / `column` point into it, `field` names the key.
 *
 * @deprecated the same class as `AgentConfig.ConfigFileError` (tag `ConfigFileError`): one error for every
 * configuration file valet reads.
 * @since 0.1.0
 * @category errors
 */
export const VllmConfigError = YamlDocument.ConfigFileError

/**
 * The error type of `VllmConfigError`.
 *
 * @since 0.1.0
 * @category errors
 */
export type VllmConfigError = YamlDocument.ConfigFileError

/**
 * An actor name that the pool does not have; `known` lists the names it has.
 *
 * @since 0.1.0
 * @category errors
 */
export class UnknownActor extends Schema.TaggedError<UnknownActor>()("UnknownActor", {
  name: Schema.String,
  known: Schema.Array(Schema.String),
  path: Schema.String
}) {
  override get message(): string {
    return `no actor named ${JSON.stringify(this.name)} in ${this.path}; known actors: ${this.known.join(", ")}`
  }
}

/**
 * The errors of building the pool (`InvalidOptions`: an option passed in code is wrong).
 *
 * @since 0.1.0
 * @category errors
 */
export type VllmError = VllmConfigError | UnknownActor | InvalidOptions

/**
 * How an actor is served: `openai` (`vllm serve`, the OpenAI-compatible API) or `generate` (the legacy demo
 * server's `POST /generate`).
 *
 * @since 0.1.0
 * @category models
 */
export type Api = Config.Api

/**
 * One actor as configured.
 *
 * @since 0.1.0
 * @category models
 */
export interface ActorConfig {
  readonly name: string
  readonly baseUrl: string
  readonly model: string | undefined
  readonly tensorParallelSize: number
  readonly gpuId: number
  readonly api: Api | undefined
  readonly maxInFlight: number | undefined
}

/**
 * The pool's settings.
 *
 * @since 0.1.0
 * @category models
 */
export interface PoolConfig {
  /** Where it was read from (or would have been: the default pool has no file). */
  readonly path: string
  /** Whether the file existed (false: the single-actor default). */
  readonly fromFile: boolean
  readonly actors: ReadonlyArray<ActorConfig>
  readonly timeoutSec: number
  readonly maxTokens: number
  readonly maxAttempts: number
}

/**
 * An actor's state: health from `GET /health`, the API (configured or detected), requests in flight.
 *
 * @since 0.1.0
 * @category models
 */
export interface ActorStatus {
  readonly name: string
  readonly baseUrl: string
  readonly model: string | undefined
  readonly healthy: boolean
  /** `ok`, or why not (`HTTP 503`, `status: "loading"`, a connection error). */
  readonly detail: string
  /** Configured or detected; `undefined` when it could not be detected (the actor did not answer). */
  readonly api: Api | undefined
  readonly inFlight: number
}

/**
 * The pool, beside the `Model` it provides.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly config: PoolConfig
  /** `GET /health` of one actor now, or of all of them. */
  readonly health: (name?: string) => Effect.Effect<ReadonlyArray<ActorStatus>, UnknownActor>
  /**
   * A model over the same actors — their `max_in_flight`, routing and health shared with the pool's own `Model` —
   * asking for the token data `tokens` says instead of what the pool was made with: a reward's judge beside an actor
   * whose calls record token ids (the judge's are not trained on, so they ask for none).
   */
  readonly modelWith: (options: { readonly tokens?: Options["tokens"] }) => Model.Service
}

/**
 * The actor pool service, provided beside `Model` by `layer`.
 *
 * @since 0.1.0
 * @category services
 */
export class Vllm extends Context.Service<Vllm, Service>()("valet/Vllm") {}

/**
 * Options of `layer`.
 *
 * @since 0.1.0
 * @category options
 */
export interface Options {
  /** The pool file; default `configs/vllm_actors.yaml`. A missing file is the single-actor default. */
  readonly configPath?: string | undefined
  /** Send every call to this actor (an unknown name fails with `UnknownActor`); default: route across the pool. */
  readonly actorName?: string | undefined
  /**
   * Retries, timeouts and body caps; by default from the file (`timeout_sec` per attempt, `max_attempts`), the
   * rest as in `OpenAiCompatible` (10 min per call, `Retry-After` up to 60 s, 32 MiB per body).
   */
  readonly resilience?: Omit<Resilience.Options, "maxInFlight"> | undefined
  /**
   * Ask every `vllm serve` actor for token-level data, for trainers: `return_token_ids` (the prompt's ids, chat
   * template applied, on `Response.promptTokenIds`; the completion's on `Choice.tokenIds`; vLLM ≥ 0.10.2),
   * `return_tokens_as_token_ids` and `logprobs` (each completion token's log-probability on `Choice.logprobs`, its id
   * on `tokenId`), and with `{ promptLogprobs: true }` `prompt_logprobs: 0` (on `Response.promptLogprobs`; it costs
   * the server a pass over the prompt's logits). What a server does not send stays absent, never made up; the first
   * answer lacking what was asked logs one warning per pool. The legacy `/generate` server answers text only: with
   * it every token field is absent. Default: off (nothing extra is sent).
   *
   * @since 0.2.0
   */
  readonly tokens?: boolean | { readonly promptLogprobs?: boolean | undefined } | undefined
}

const { maxInFlight: _maxInFlight, ...resilienceFields } = Resilience.optionFields
const OptionsSchema = Schema.Struct({
  configPath: Schema.optional(Schema.String),
  actorName: Schema.optional(Schema.String),
  resilience: Schema.optional(Schema.Struct(resilienceFields)),
  tokens: Schema.optional(Schema.Union([Schema.Boolean, Schema.Struct({ promptLogprobs: Schema.optional(Schema.Boolean) })]))
})

/** What an answer lacks of the token data asked for (`promptLogprobs`: whether those were asked too). */
const missingTokens = (response: Model.Response, promptLogprobs: boolean): Array<string> => {
  const missing: Array<string> = []
  if (response.promptTokenIds === undefined) missing.push("prompt token ids")
  if (response.choices.some((choice) => choice.tokenIds === undefined)) missing.push("completion token ids")
  if (response.choices.some((choice) => choice.logprobs === undefined)) missing.push("completion logprobs")
  if (promptLogprobs && response.promptLogprobs === undefined) missing.push("prompt logprobs")
  return missing
}

const toConfig = (file: Config.PoolFile, path: string, fromFile: boolean): PoolConfig => ({
  path,
  fromFile,
  actors: file.actors.map((actor) => ({
    name: actor.name,
    baseUrl: actor.base_url,
    model: actor.model,
    tensorParallelSize: actor.tensor_parallel_size,
    gpuId: actor.gpu_id,
    api: actor.api,
    maxInFlight: actor.max_in_flight
  })),
  timeoutSec: file.timeout_sec,
  maxTokens: file.max_tokens,
  maxAttempts: file.max_attempts
})

const configError = (path: string, problem: Config.Problem): VllmConfigError =>
  new VllmConfigError({
    path,
    detail: problem.message,
    ...(problem.field !== undefined ? { field: problem.field } : {}),
    ...(problem.line !== undefined ? { line: problem.line } : {}),
    ...(problem.column !== undefined ? { column: problem.column } : {})
  })

/**
 * Parses the text of a pool file (`path` is only used in errors).
 *
 * @since 0.1.0
 * @category config
 */
export const parseConfig = (text: string, path: string): Result.Result<PoolConfig, VllmConfigError> =>
  Result.mapBoth(Config.parse(text), {
    onFailure: (problem) => configError(path, problem),
    onSuccess: (file) => toConfig(file, path, true)
  })

const readPoolFile = (path: string): Effect.Effect<Config.PoolFile | undefined, VllmConfigError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const exists = yield* fs.exists(path).pipe(Effect.orElseSucceed(() => false))
    if (!exists) return undefined
    // Capped before it is read, as a valet.yaml is: a pool file is a few lines.
    const text = yield* YamlDocument.readFile(path, { maxBytes: 1_048_576, what: "a pool file" }).pipe(
      Effect.mapError((problem) => configError(path, problem))
    )
    const parsed = Config.parse(text)
    if (Result.isSuccess(parsed)) return parsed.success
    return yield* configError(path, parsed.failure)
  })

/**
 * Reads the pool file (the single-actor default when it does not exist).
 *
 * @since 0.1.0
 * @category config
 */
export const loadConfig = (configPath?: string): Effect.Effect<PoolConfig, VllmConfigError, FileSystem.FileSystem> => {
  const path = configPath ?? defaultConfigPath
  return Effect.map(readPoolFile(path), (file) => toConfig(file ?? Config.defaultPool, path, file !== undefined))
}

const statusOf = (actor: Pool.Actor, health: Pool.Health): ActorStatus => ({
  name: actor.name,
  baseUrl: actor.entry.base_url,
  model: actor.model,
  healthy: health.healthy,
  detail: health.detail,
  api: actor.api,
  inFlight: actor.inFlight
})

/**
 * Builds the pool's `Model` and service over the `HttpClient` and `FileSystem` in context.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: Options = {}
): Effect.Effect<{ readonly model: Model.Service; readonly pool: Service }, VllmError, HttpClient.HttpClient | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    yield* Opts.decode("Vllm", OptionsSchema, options)
    const path = options.configPath ?? defaultConfigPath
    const file = (yield* readPoolFile(path)) ?? Config.defaultPool
    const config = toConfig(file, path, file !== Config.defaultPool)
    const http = Client.quiet(yield* HttpClient.HttpClient)
    const limits = Resilience.limitsOf(options.resilience ?? {})
    const actors = file.actors.map((entry) => new Pool.Actor(entry, http, file, limits))
    const known = actors.map((actor) => actor.name)
    const byName = (name: string) =>
      Option.match(Pool.find(actors, name), {
        onNone: () => Effect.fail(new UnknownActor({ name, known, path })),
        onSome: Effect.succeed
      })
    const fixed = options.actorName !== undefined ? yield* byName(options.actorName) : undefined
    // One router over the actors for every model of the pool: their in-flight caps count all of its calls.
    const router = Pool.makeRouter(actors, fixed)

    const statusNow = (actor: Pool.Actor) =>
      Effect.gen(function*() {
        const health = yield* actor.probe
        // A healthy actor tells its API too (detected now if not yet known); a failure leaves it unknown.
        if (health.healthy) yield* Effect.ignore(actor.resolve)
        return statusOf(actor, health)
      })

    const span = { attributes: { "valet.actor": options.actorName ?? "pool" }, captureStackTrace: false }
    // Token data asked for and not sent is recorded as absent; the first such answer says so, once per pool.
    let warned = false
    const modelWith = (asked: Options["tokens"]): Model.Service => {
      const tokens = asked === undefined || asked === false
        ? undefined
        : { promptLogprobs: typeof asked === "object" && asked.promptLogprobs === true }
      const service = Resilience.makeWith(Pool.makeAttempt(router, file, tokens), {
        attemptTimeout: Duration.seconds(file.timeout_sec),
        maxAttempts: file.max_attempts,
        ...options.resilience
      }, undefined)
      const checkTokens = (response: Model.Response): Effect.Effect<void> => {
        if (tokens === undefined || warned) return Effect.void
        const missing = missingTokens(response, tokens.promptLogprobs)
        if (missing.length === 0) return Effect.void
        warned = true
        return Effect.logWarning(
          `vLLM pool ${path}: asked for token data (tokens: true) but the answer has no ${missing.join(", ")}; ` +
            "recorded as absent (return_token_ids needs vLLM >= 0.10.2; the legacy /generate server answers text only). " +
            "Said once."
        )
      }
      const model = Model.make({
        // vLLM samples a request's `n` choices from one prompt pass (both APIs forward `n`).
        choicesPerRequest: true,
        generate: (request) =>
          Effect.withSpan(Effect.tap(service.generate(request), checkTokens), "valet/Vllm.generate", span),
        stream: (request) =>
          Stream.unwrap(Effect.sync(() => {
            // Once warned there is nothing left to check: no fold on the side (a copy of every token's data).
            if (tokens === undefined || warned) return Stream.withSpan(service.stream(request), "valet/Vllm.stream", span)
            // The stream's chunks folded on the side, so the finished answer can be checked like `generate`'s.
            const acc = ModelChunks.emptyAccumulator()
            return service.stream(request).pipe(
              Stream.tap((chunk) => Effect.sync(() => void ModelChunks.addChunk(acc, chunk))),
              Stream.onEnd(Effect.suspend(() => checkTokens(ModelChunks.toResponse(acc)))),
              Stream.withSpan("valet/Vllm.stream", span)
            )
          }))
      })
      return model
    }
    const pool: Service = {
      config,
      health: (name) =>
        name !== undefined
          ? Effect.flatMap(byName(name), (actor) => Effect.map(statusNow(actor), (status) => [status]))
          : Effect.forEach(actors, statusNow, { concurrency: "unbounded" }),
      modelWith: (asked) => modelWith(asked.tokens)
    }
    return { model: modelWith(options.tokens), pool }
  })

/**
 * `GET /health` (and the API) of one actor, or of every actor, of the pool in context.
 *
 * @since 0.1.0
 * @category health
 */
export const health = (name?: string): Effect.Effect<ReadonlyArray<ActorStatus>, UnknownActor, Vllm> =>
  Effect.flatMap(Vllm, (pool) => pool.health(name))

/**
 * The pool as a `Model` (and the `Vllm` service), over the `HttpClient` and `FileSystem` in context:
 * `Vllm.layer({ configPath?, actorName? })`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: Options = {}
): Layer.Layer<Model.Model | Vllm, VllmError, HttpClient.HttpClient | FileSystem.FileSystem> =>
  Layer.effectContext(Effect.map(make(options), ({ model, pool }) =>
    Context.make(Model.Model, model).pipe(Context.add(Vllm, pool))))

/**
 * `layer` with undici's `HttpClient` and Node's file system: nothing else to provide in Node.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerNode = (options: Options = {}): Layer.Layer<Model.Model | Vllm, VllmError> =>
  Layer.provide(layer(options), Layer.merge(NodeHttpClient.layerUndici, NodeFileSystem.layer))

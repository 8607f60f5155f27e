/**
 * `Model` is the one interface between architectures and language models. It stays close to the wire
 * (`n`, `seed`, `stop`, raw prompts, log-probabilities) because RL and evaluation users need what chat-only
 * abstractions hide.
 *
 * @example
 * ```ts
 * import { Effect, Layer, Stream } from "effect"
 * import { Model, ScriptedModel } from "valet"
 *
 * // One call, close to the wire: two choices, a seed, a stop sequence.
 * const primes = Model.generate({ messages: [Model.user("Name a prime number.")], n: 2, seed: 7, stop: ["\n"] }).pipe(
 *   Effect.map((response) => response.choices.map((choice) => choice.text)), // ["2", "3"]
 *   Effect.provide(ScriptedModel.layer(["2", "3"]))
 * )
 *
 * // A provider is a layer of the `Model` service; this one answers with the last message.
 * const echo = (request: Model.Request): Model.Response => ({
 *   id: "echo-1",
 *   model: "echo",
 *   choices: [{ index: 0, text: Model.textOf(request.messages?.at(-1)?.content ?? ""), toolCalls: [], finishReason: "stop" }],
 *   usage: Model.emptyUsage
 * })
 * const Echo = Layer.succeed(Model.Model, Model.make({
 *   generate: (request) => Effect.succeed(echo(request)),
 *   stream: (request) => Stream.fromIterable(Model.toChunks(echo(request)))
 * }))
 * ```
 *
 * @since 0.1.0
 */
import { Clock, Context, Duration, Effect, Layer, Stream } from "effect"
import { InvalidOptions } from "./AgentError.js"
import * as Fallback from "./internal/model/fallback.js"
import * as internal from "./internal/modelChunks.js"
import { type Chunk, defaultMaxPartBytes, type Message, partProblem, type Request, type Response, type ToolCall } from "./internal/modelSchema.js"
import { InvalidContent, type ModelError } from "./ModelError.js"

export * from "./internal/modelSchema.js"

// ---------------------------------------------------------------------------------------------------------
// Chunks and responses
// ---------------------------------------------------------------------------------------------------------

/**
 * Folds a chunk stream into the `Response` that `generate` answers: text and reasoning joined per choice, tool
 * calls assembled by index with their arguments joined, finish reasons, usage.
 *
 * @since 0.1.0
 * @category chunks
 */
export const accumulate = <E, R>(stream: Stream.Stream<Chunk, E, R>): Effect.Effect<Response, E, R> =>
  Effect.map(
    Stream.runFold(stream, internal.emptyAccumulator, internal.addChunk),
    internal.toResponse
  )

/**
 * The chunks a streaming server would send for a response: text as word-sized deltas (a word with the
 * whitespace before it), reasoning likewise, each tool call as a header and its arguments in two pieces.
 * Test doubles and replays stream with it; `accumulate(toChunks(r))` gives `r` back.
 *
 * @since 0.1.0
 * @category chunks
 */
export const toChunks = (response: Response): ReadonlyArray<Chunk> => internal.toChunks(response)

/**
 * The text of the first choice (empty when there is none).
 *
 * @since 0.1.0
 * @category getters
 */
export const text = (response: Response): string => response.choices[0]?.text ?? ""

/**
 * The tool calls of the first choice.
 *
 * @since 0.1.0
 * @category getters
 */
export const toolCalls = (response: Response): ReadonlyArray<ToolCall> => response.choices[0]?.toolCalls ?? []

/**
 * The first content part of `messages` that cannot be sent, as an `InvalidContent` naming it (message index, part
 * index, what is wrong: see `partProblem`), or `undefined`; a tool message's `parts` are checked too. Text content is not looked at, so plain text requests
 * cost one type check per message. Providers call it before sending; `maxPartBytes` defaults to
 * `defaultMaxPartBytes`.
 *
 * @since 0.2.0
 * @category parts
 */
export const checkContent = (
  messages: ReadonlyArray<Message>,
  maxPartBytes: number = defaultMaxPartBytes
): InvalidContent | undefined => {
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i]!
    const content = message.content
    if (typeof content !== "string") {
      for (let j = 0; j < content.length; j++) {
        const reason = partProblem(content[j]!, maxPartBytes)
        if (reason !== undefined) return new InvalidContent({ messageIndex: i, partIndex: j, reason })
      }
    }
    if (message.role === "tool" && message.parts !== undefined) {
      for (let j = 0; j < message.parts.length; j++) {
        const reason = partProblem(message.parts[j]!, maxPartBytes)
        if (reason !== undefined) return new InvalidContent({ messageIndex: i, partIndex: j, reason, field: "parts" })
      }
    }
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------------------

/**
 * What a model provider implements.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly generate: (request: Request) => Effect.Effect<Response, ModelError>
  /**
   * Optional: the model's context window in tokens, when the provider knows it (configured, or said by the server):
   * what `Compaction` measures a call's input against. Without it, the compaction policy's `contextWindow`.
   */
  readonly contextWindow?: number | undefined
  /**
   * Optional: `true` when one request with `n` answers `n` independent samples of its prompt (vLLM), so that a
   * caller wanting `n` samples of one prompt (`ActorLoop.group`'s first steps) sends one request instead of `n`.
   * Absent: the caller sends separate requests. Wrappers that do not pass it on only cost the saving.
   *
   * @since 0.2.0
   */
  readonly choicesPerRequest?: boolean | undefined
  readonly stream: (request: Request) => Stream.Stream<Chunk, ModelError>
  /**
   * Optional: streams the answer by calling `onChunk` for each chunk, in order, when the chunk arrives (running the
   * effect it returns before the next chunk is handed over), and answers the accumulated
   * response — what `accumulate(stream(request).pipe(Stream.tap(onChunk)))` does, without running a `Stream`.
   * Running a `Stream` has a fixed cost per run: nothing next to a network call,
   * but it dominates a streamed run on an in-memory provider (`ScriptedModel`, a replayed `Journal`), which
   * therefore implement this. Providers without it get that fallback from `streamInto` below.
   */
  readonly streamInto?: (
    request: Request,
    onChunk: (chunk: Chunk) => Effect.Effect<void>
  ) => Effect.Effect<Response, ModelError>
}

/**
 * The model service. Providers (`OpenAiCompatible`, `Vllm`, `ScriptedModel`, `Journal`) are layers of it.
 *
 * @since 0.1.0
 * @category services
 */
export class Model extends Context.Service<Model, Service>()("valet/Model") {}

/**
 * Sends one request and waits for the whole answer.
 *
 * @since 0.1.0
 * @category calls
 */
export const generate = (request: Request): Effect.Effect<Response, ModelError, Model> =>
  Effect.flatMap(Model, (model) => model.generate(request))

/**
 * Sends one request and streams the answer as it is generated.
 *
 * @since 0.1.0
 * @category calls
 */
export const stream = (request: Request): Stream.Stream<Chunk, ModelError, Model> =>
  Stream.unwrap(Effect.map(Model, (model) => model.stream(request)))

/**
 * Streams one request, calling `onChunk` for each chunk as it arrives, and answers the accumulated `Response` (the
 * same `generate` would answer). Uses the provider's `streamInto` when it has one.
 *
 * @since 0.1.0
 * @category calls
 */
export const streamInto = (
  request: Request,
  onChunk: (chunk: Chunk) => Effect.Effect<void>
): Effect.Effect<Response, ModelError, Model> => Effect.flatMap(Model, (model) => streamIntoWith(model, request, onChunk))

/**
 * `streamInto` on a given model service rather than the one in context.
 *
 * @since 0.1.0
 * @category calls
 */
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
 *
 * @since 0.1.0
 * @category providers
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

/**
 * Builds a `Model` service from its operations (the identity: it only gives the object its type, so a provider's
 * functions are checked against `Service` where they are written).
 *
 * @since 0.1.0
 * @category providers
 */
export const make = (service: Service): Service => service

/**
 * Who is calling: the session and the step name of the call in flight. Architectures set it around each model
 * call; wrappers such as the `Journal` key their records with it. `rootSessionId` lets a wrapper name a
 * sub-agent's session relative to its run, so a recording made under one random session id replays under
 * another.
 *
 * @since 0.1.0
 * @category call context
 */
export interface CallContext {
  readonly sessionId: string
  readonly rootSessionId: string
  readonly step: string
  /**
   * Told by a `fallback` chain each time a model of it does not answer and the next one is asked (the runtime emits
   * `ModelFellBack` from it when the run is observed).
   *
   * @since 0.2.0
   */
  readonly onFallback?: ((note: FallbackNote, step: string) => Effect.Effect<void>) | undefined
}

/**
 * Why a model of a `fallback` chain did not answer a call, and which model was asked next.
 *
 * @since 0.2.0
 * @category fallback
 */
export interface FallbackNote {
  /** The model that did not answer. */
  readonly from: string
  /** The model asked next. */
  readonly to: string
  /** The error (`ServerError: 503 …`), or `circuit open (…)` when the model was not asked at all. */
  readonly reason: string
}

/**
 * The `CallContext` of the model call in flight, provided by `Architecture.generate` around each call (a
 * `Context.Reference`: read it with `yield* Model.currentCallContext`; undefined outside a call).
 *
 * @since 0.1.0
 * @category call context
 */
export const currentCallContext: Context.Reference<CallContext | undefined> = Context.Reference<CallContext | undefined>(
  "valet/Model/CallContext",
  { defaultValue: () => undefined }
)

// ---------------------------------------------------------------------------------------------------------
// Fallback chains
// ---------------------------------------------------------------------------------------------------------

/**
 * One model of a `fallback` chain: a `Model` layer (a provider) or a service, with the name the events and spans
 * give it (else the provider's model name, else `model <n>`) and its context window (else the service's own).
 *
 * @since 0.2.0
 * @category fallback
 */
export type FallbackModel<E = never, R = never> =
  | Layer.Layer<Model, E, R>
  | Service
  | {
    readonly name?: string | undefined
    readonly model: Layer.Layer<Model, E, R> | Service
    readonly contextWindow?: number | undefined
  }

/**
 * Each model's circuit breaker: after `failures` errors that say the model is unwell (rate limits, 5xx, timeouts,
 * broken connections) within `window`, the model is not asked for `coolDown`; then one call probes it (a success
 * closes the circuit, a failure opens it again). A dead server thus costs one fast failure per cool-down, not a
 * timeout per call.
 *
 * @since 0.2.0
 * @category fallback
 */
export interface BreakerOptions {
  /** Default 5. */
  readonly failures?: number | undefined
  /** Default 1 minute. */
  readonly window?: Duration.Input | undefined
  /** Default 30 seconds. */
  readonly coolDown?: Duration.Input | undefined
}

/**
 * Options of `fallback`.
 *
 * @since 0.2.0
 * @category fallback
 */
export interface FallbackOptions {
  /**
   * Which errors move on to the next model: error tags or a predicate. Default: the retryable ones (`RateLimited`,
   * `ServerError`, `Timeout`, `Transport`: a provider's own retries are spent by the time the chain sees them) and
   * `ContextLengthExceeded`, which moves on only to a model with a larger context window when both declare one.
   */
  readonly when?: ReadonlyArray<ModelError["_tag"]> | ((error: ModelError) => boolean) | undefined
  /** Each model's circuit breaker (`BreakerOptions`'s defaults), or `false` for none. */
  readonly breaker?: BreakerOptions | false | undefined
}

const defaultWhen = (error: ModelError): boolean => error.retryable || error._tag === "ContextLengthExceeded"

const isService = (u: unknown): u is Service =>
  typeof u === "object" && u !== null && typeof (u as { readonly generate?: unknown }).generate === "function"

/**
 * A `Model` that sends each call to the first model of the list that answers: when one fails with an error `when`
 * selects (before a streamed chunk went out), the next one is asked. Each model has a circuit breaker
 * (`BreakerOptions`). Each call's `ModelFellBack` events and its span (a `valet.fallback` span event per model that did not
 * answer, `valet.fallback.model` for the one asked last) say which model answered and why the others did not. An empty list fails to build with `InvalidOptions`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, Model, OpenAiCompatible } from "valet"
 *
 * const Chain = Model.fallback([
 *   OpenAiCompatible.layerNode({ baseUrl: "http://127.0.0.1:8000", model: "Qwen/Qwen2.5-7B-Instruct" }),
 *   { name: "backup", model: OpenAiCompatible.layerNode({ baseUrl: "http://127.0.0.1:8001", model: "Qwen/Qwen2.5-7B-Instruct" }) }
 * ], { breaker: { failures: 3, coolDown: "1 minute" } })
 *
 * const answer = Agent.run(Agent.make({ name: "assistant", instructions: "Be brief." }), "Hello!").pipe(Effect.provide(Chain))
 * ```
 *
 * @since 0.2.0
 * @category fallback
 */
export const fallback = <E = never, R = never>(
  models: ReadonlyArray<FallbackModel<E, R>>,
  options?: FallbackOptions
): Layer.Layer<Model, E | InvalidOptions, R> => {
  const problem = fallbackProblem(models, options)
  // The breakers belong to the chain, not to one build of its layer: an agent's model layer is built again for each
  // run, and a server that died during the last run is still dead in this one.
  const breakers = typeof problem === "string"
    ? []
    : models.map(() => problem === undefined ? undefined : new Fallback.Breaker(problem))
  return Layer.effect(Model, Effect.gen(function*() {
    if (typeof problem === "string") return yield* new InvalidOptions({ module: "Model.fallback", message: problem })
    const links: Array<Fallback.Link> = []
    for (const [i, entry] of models.entries()) {
      const spec: Exclude<FallbackModel<E, R>, Service | Layer.Layer<Model, E, R>> =
        isService(entry) || Layer.isLayer(entry) ? { model: entry as Service | Layer.Layer<Model, E, R> } : entry as Exclude<FallbackModel<E, R>, Service | Layer.Layer<Model, E, R>>
      const service = isService(spec.model)
        ? spec.model
        : Context.get(yield* Layer.build(spec.model as Layer.Layer<Model, E, R>), Model)
      const provider = (service as { readonly model?: unknown }).model
      links.push(link(
        spec.name ?? (typeof provider === "string" && provider !== "" ? provider : `model ${i + 1}`),
        spec.contextWindow ?? service.contextWindow,
        service
      ))
    }
    return fallbackOf(links, options, breakers)
  }))
}

/** The options' problem as one line, or the breaker settings (`undefined`: none). */
const fallbackProblem = (
  models: ReadonlyArray<unknown>,
  options: FallbackOptions | undefined
): string | Fallback.BreakerSettings | undefined => {
  if (models.length === 0) return "the list of models is empty: give at least one model"
  const breaker = options?.breaker
  return breaker === false ? undefined : Fallback.breakerSettings(breaker ?? {})
}

const link = (name: string, contextWindow: number | undefined, service: Service): Fallback.Link => ({
  name,
  contextWindow,
  generate: service.generate,
  stream: service.stream,
  streamInto: (request, onChunk) => streamIntoWith(service, request, onChunk)
})

const fallbackOf = (
  links: ReadonlyArray<Fallback.Link>,
  options: FallbackOptions | undefined,
  breakers: ReadonlyArray<Fallback.Breaker | undefined>
): Service => {
  const when = options?.when
  const chain: Fallback.Chain = {
    links,
    breakers,
    when: when === undefined ? defaultWhen : typeof when === "function" ? when : (error) => when.includes(error._tag),
    report: (note) =>
      Effect.flatMap(currentCallContext, (context) => {
        const told = context?.onFallback?.(note, context.step) ?? Effect.void
        return Effect.andThen(markSpan(note), told)
      })
  }
  return make({
    generate: (request) => Fallback.run(chain, (l) => l.generate(request), never),
    stream: (request) => Fallback.stream(chain, request),
    streamInto: (request, onChunk) => Fallback.streamInto(chain, request, onChunk),
    // Compaction keeps calls within the primary's window: the chain's larger windows are for when it did not.
    contextWindow: links[0]?.contextWindow
  })
}

const never = (): boolean => false

/**
 * Marks the call's span (the runtime's `chat` span, when traced): a `valet.fallback` span event per model that did
 * not answer (`from`, `to`, `reason`), and `valet.fallback.model`, the model asked last, which is the one that
 * answered when the call succeeds.
 */
const markSpan = (note: FallbackNote): Effect.Effect<void> =>
  Effect.matchEffect(Effect.currentSpan, {
    onFailure: () => Effect.void,
    onSuccess: (span) =>
      Effect.map(Clock.currentTimeNanos, (now) => {
        span.event("valet.fallback", now, { from: note.from, to: note.to, reason: note.reason })
        span.attribute("valet.fallback.model", note.to)
      })
  })

/**
 * The actor pool: per actor its API (configured, or detected once and remembered), its health (probed, cached a
 * few seconds, and marked down when a connection to it fails), its requests in flight; and the routing of each
 * attempt to the healthy actor with the fewest requests in flight.
 */
import { Channel, Clock, Duration, Effect, Option, Schema, Semaphore, Stream } from "effect"
import { type HttpClient, HttpClientRequest } from "effect/http"
import type * as Model from "../../../core/Model.js"
import * as ModelError from "../../../core/ModelError.js"
import * as Client from "../openai/client.js"
import * as Errors from "../openai/errors.js"
import * as Wire from "../openai/wire.js"
import type * as Resilience from "../resilience.js"
import type { ActorEntry, Api, PoolFile } from "./config.js"
import * as Generate from "./generate.js"

/** The result of `GET /health`. */
export interface Health {
  readonly healthy: boolean
  /** `ok`, or why not: `HTTP 503`, `status: "loading"`, the connection error. */
  readonly detail: string
  readonly checkedAt: number
}

/** How long a health result is trusted before the actor is probed again. */
const healthyFor = 10_000
const unhealthyFor = 2_000
const probeTimeout = Duration.seconds(5)

/** A `/health` body that says something: a JSON object with a `status`. */
const decodeHealthBody = Schema.decodeUnknownOption(Schema.fromJsonString(Schema.Struct({ status: Schema.Unknown })))

/** Whether a `/health` answer means healthy: 200 with an empty body, not JSON, or JSON whose `status` is missing / ok / healthy. */
export const healthOf = (status: number, body: string): { readonly healthy: boolean; readonly detail: string } => {
  if (status !== 200) return { healthy: false, detail: `HTTP ${status}` }
  const decoded = decodeHealthBody(body)
  if (Option.isNone(decoded)) return { healthy: true, detail: "ok" }
  const value = decoded.value.status
  const text = typeof value === "string" ? value.toLowerCase() : value
  return text === "ok" || text === "healthy"
    ? { healthy: true, detail: "ok" }
    : { healthy: false, detail: `status: ${JSON.stringify(value)}` }
}

const decodeModelList = Schema.decodeUnknownOption(Schema.fromJsonString(Wire.ModelList))

/** The first model a `GET /v1/models` body lists, when it is one. */
const firstModelOf = (body: string): string | undefined =>
  Option.getOrUndefined(Option.flatMap(decodeModelList(body), (list) => Option.fromNullishOr(list.data[0]?.id)))

/** The running state of one actor. */
export class Actor {
  inFlight = 0
  sent = 0
  health: Health | undefined = undefined
  api: Api | undefined
  model: string | undefined
  private attempt: Resilience.Attempt | undefined = undefined
  readonly root: string
  readonly apiBase: string
  private readonly once: Semaphore.Semaphore
  private readonly probing: Semaphore.Semaphore
  readonly limit: Semaphore.Semaphore | undefined

  constructor(
    readonly entry: ActorEntry,
    private readonly http: HttpClient.HttpClient,
    private readonly pool: PoolFile,
    private readonly limits: Resilience.Limits
  ) {
    this.apiBase = Client.apiBaseOf(entry.base_url)
    this.root = Client.rootOf(this.apiBase)
    this.api = entry.api
    this.model = entry.model
    this.once = Semaphore.makeUnsafe(1)
    this.probing = Semaphore.makeUnsafe(1)
    this.limit = entry.max_in_flight !== undefined ? Semaphore.makeUnsafe(entry.max_in_flight) : undefined
  }

  get name(): string {
    return this.entry.name
  }

  /** `GET /health` now. */
  readonly probe: Effect.Effect<Health> = Effect.gen({ self: this }, function*() {
    const url = `${this.root}/health`
    const result = yield* Client.send(this.http, HttpClientRequest.get(url)).pipe(
      Effect.flatMap((response) =>
        Effect.map(
          Effect.orElseSucceed(Client.readLimited(response, url, { limit: Client.errorBodyBytes }), () => ""),
          (body) => healthOf(response.status, body)
        )
      ),
      Effect.timeoutOrElse({
        duration: probeTimeout,
        orElse: () =>
          Effect.fail(
            new ModelError.Timeout({ message: `no answer within ${Duration.format(probeTimeout)}`, timeoutMs: Duration.toMillis(probeTimeout) })
          )
      }),
      Effect.catch((error) => Effect.succeed({ healthy: false, detail: error.message }))
    )
    const health = { ...result, checkedAt: yield* Clock.currentTimeMillis }
    this.health = health
    return health
  })

  /** Whether the last health result is recent enough to trust at `now` (else `freshHealth` probes). */
  isFresh(now: number): boolean {
    const last = this.health
    return last !== undefined && now - last.checkedAt < (last.healthy ? healthyFor : unhealthyFor)
  }

  /** The health, probed when the last result is too old (one probe at a time per actor). */
  readonly freshHealth: Effect.Effect<Health> = this.withProbeLock(Effect.gen({ self: this }, function*() {
    const now = yield* Clock.currentTimeMillis
    if (this.isFresh(now)) return this.health!
    return yield* this.probe
  }))

  private withProbeLock<A>(effect: Effect.Effect<A>): Effect.Effect<A> {
    return Effect.suspend(() => this.probing.withPermits(1)(effect))
  }

  /** Marks the actor down after a broken connection, so the next attempts go elsewhere. */
  readonly markDown = (detail: string): Effect.Effect<void> =>
    Effect.map(Clock.currentTimeMillis, (now) => {
      this.health = { healthy: false, detail, checkedAt: now }
    })

  /**
   * The actor's API: configured, else detected once (`GET /v1/models` answering 200 means `vllm serve`, any
   * other answer the legacy server) and remembered. A connection failure is not an answer: it is not remembered.
   */
  readonly resolve: Effect.Effect<Resilience.Attempt, ModelError.ModelError> = Effect.suspend(() =>
    this.attempt !== undefined ? Effect.succeed(this.attempt) : this.once.withPermits(1)(Effect.suspend(() => {
      if (this.attempt !== undefined) return Effect.succeed(this.attempt)
      const needsModel = this.api !== "generate" && this.model === undefined
      const detect: Effect.Effect<void, ModelError.ModelError> = this.api !== undefined && !needsModel
        ? Effect.void
        : Effect.flatMap(
          Client.send(this.http, HttpClientRequest.get(`${this.apiBase}/models`)),
          (response) =>
            Effect.flatMap(Effect.orElseSucceed(Client.readLimited(response, `${this.apiBase}/models`, { limit: this.limits.maxResponseBytes }), () => ""), (body) => {
              if (response.status !== 200) {
                if (this.api === "openai") {
                  return Effect.flatMap(Clock.currentTimeMillis, (now) =>
                    Effect.fail(Errors.fromResponse({ status: response.status, headers: response.headers, body, model: "", now })))
                }
                this.api = "generate"
                return Effect.void
              }
              this.api = "openai"
              if (this.model !== undefined) return Effect.void
              const first = firstModelOf(body)
              if (typeof first !== "string") {
                return Effect.fail(new ModelError.ModelNotFound({
                  model: "",
                  message: `actor ${this.name}: no model given in the config and ${this.apiBase}/models lists none`
                }))
              }
              this.model = first
              return Effect.void
            })
        ).pipe(
          // Asked outside any attempt's watchdog (before a stream opens): bounded here, so it cannot hang a call.
          Effect.timeoutOrElse({
            duration: probeTimeout,
            orElse: () =>
              Effect.fail(new ModelError.Timeout({
                message: `actor ${this.name}: ${this.apiBase}/models did not answer within ${Duration.format(probeTimeout)}`,
                timeoutMs: Duration.toMillis(probeTimeout)
              }))
          })
        )
      return Effect.map(detect, () => {
        this.attempt = this.api === "generate"
          ? Generate.makeAttempt(this.http, {
            root: this.root,
            model: this.model ?? this.name,
            actor: this.name,
            maxTokens: this.pool.max_tokens
          }, this.limits)
          : Client.makeAttempt(this.http, { apiBase: this.apiBase, model: this.model!, apiKey: undefined, headers: {} }, this.limits)
        return this.attempt
      })
    }))
  )
}

const withDefaults = (request: Model.Request, pool: PoolFile): Model.Request =>
  request.maxTokens !== undefined ? request : { ...request, maxTokens: pool.max_tokens }

/** What to ask an OpenAI-compatible actor for on every call (`Vllm.Options.tokens`). */
export interface TokenRequest {
  readonly promptLogprobs: boolean
}

/**
 * A request asking `vllm serve` for token data: `return_token_ids` (prompt and completion ids, vLLM ≥ 0.10.2),
 * `return_tokens_as_token_ids` (log-probability tokens as `"token_id:123"`), `logprobs` (the chosen token's when the
 * request asks for none) and, when asked, `prompt_logprobs: 0` (the prompt tokens' own). The caller's `extra` wins.
 * A legacy `/generate` actor gets none of it: its `SamplingParams(**body)` would take `logprobs` yet answer text
 * only, and refuses the other keys (HTTP 500).
 */
const withTokens = (request: Model.Request, actor: Actor, tokens: TokenRequest | undefined): Model.Request =>
  tokens === undefined || actor.api !== "openai"
    ? request
    : {
      ...request,
      logprobs: request.logprobs ?? 0,
      extra: {
        return_token_ids: true,
        return_tokens_as_token_ids: true,
        ...(tokens.promptLogprobs ? { prompt_logprobs: 0 } : {}),
        ...request.extra
      }
    }

/** Routing: a named actor, or the healthy one with the fewest requests in flight (then the fewest sent). */
export const makeRouter = (actors: ReadonlyArray<Actor>, fixed: Actor | undefined) => {
  const pickFrom = (candidates: ReadonlyArray<Actor>): Actor | undefined => {
    let best: Actor | undefined = undefined
    for (const actor of candidates) {
      if (actor.health?.healthy !== true) continue
      if (best === undefined || actor.inFlight < best.inFlight || (actor.inFlight === best.inFlight && actor.sent < best.sent)) {
        best = actor
      }
    }
    return best
  }

  const probed: Effect.Effect<Actor, ModelError.ModelError> = Effect.gen(function*() {
    yield* Effect.forEach(actors, (actor) => actor.freshHealth, { concurrency: "unbounded", discard: true })
    let chosen = pickFrom(actors)
    if (chosen === undefined) {
      // Every actor looked down: ask them all again now rather than waiting for the cache to expire.
      yield* Effect.forEach(actors, (actor) => actor.probe, { concurrency: "unbounded", discard: true })
      chosen = pickFrom(actors)
    }
    if (chosen === undefined) {
      return yield* new ModelError.Transport({
        message: `no healthy vLLM actor: ${actors.map((a) => `${a.name} (${a.root}: ${a.health?.detail ?? "unknown"})`).join(", ")}`
      })
    }
    return chosen
  })
  // Every health recent enough (the common case, between probes): the choice needs no probe, so none of the
  // machinery of one — `Effect.forEach` over the actors forked a fiber per actor and took each one's probe lock on
  // every call (~5 % of a loopback call's CPU at 256 in flight).
  const pick: Effect.Effect<Actor, ModelError.ModelError> = fixed !== undefined
    ? Effect.succeed(fixed)
    : Effect.clockWith((clock) => {
      const now = clock.currentTimeMillisUnsafe()
      const chosen = actors.every((actor) => actor.isFresh(now)) ? pickFrom(actors) : undefined
      return chosen !== undefined ? Effect.succeed(chosen) : probed
    })
  return pick
}

/** One attempt through the pool: route, then call the chosen actor, counting it in flight. */
export const makeAttempt = (
  pick: Effect.Effect<Actor, ModelError.ModelError>,
  pool: PoolFile,
  tokens?: TokenRequest | undefined
): Resilience.Attempt => {
  const enter = (actor: Actor) =>
    Effect.sync(() => {
      actor.inFlight++
      actor.sent++
    })
  const leave = (actor: Actor) => Effect.sync(() => void actor.inFlight--)
  const onError = (actor: Actor) => (error: ModelError.ModelError) =>
    error._tag === "Transport" ? actor.markDown(error.message) : Effect.void
  const limited = <A, E>(actor: Actor, effect: Effect.Effect<A, E>) =>
    actor.limit !== undefined ? actor.limit.withPermits(1)(effect) : effect

  const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> =>
    Effect.flatMap(pick, (actor) =>
      Effect.acquireUseRelease(
        enter(actor),
        () =>
          limited(actor, Effect.flatMap(actor.resolve, (attempt) => attempt.generate(withTokens(withDefaults(request, pool), actor, tokens)))).pipe(
            Effect.tapError(onError(actor))
          ),
        () => leave(actor)
      ))

  const stream = (
    request: Model.Request,
    control: Resilience.StreamControl
  ): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
    Stream.fromChannel(Channel.unwrap(Effect.gen(function*() {
      const actor = yield* pick
      yield* Effect.acquireRelease(enter(actor), () => leave(actor))
      if (actor.limit !== undefined) yield* Effect.acquireRelease(actor.limit.take(1), () => actor.limit!.release(1))
      const attempt = yield* Effect.tapError(actor.resolve, onError(actor))
      return Stream.toChannel(attempt.stream(withTokens(withDefaults(request, pool), actor, tokens), control).pipe(Stream.tapError(onError(actor))))
    })))

  return { generate, stream }
}

/** Finds an actor by name. */
export const find = (actors: ReadonlyArray<Actor>, name: string): Option.Option<Actor> =>
  Option.fromNullishOr(actors.find((actor) => actor.name === name))

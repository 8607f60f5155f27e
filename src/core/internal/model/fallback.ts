/**
 * `Model.fallback`'s machinery: the chain that sends a call to the first model that answers, and the circuit breaker
 * each model of it has.
 *
 * Why not effect's `ExecutionPlan`: a plan's steps provide a context and retry on a predicate of the error alone,
 * while the chain needs (1) to skip a model whose breaker is open without calling it, (2) to decide by the pair of
 * models (a `ContextLengthExceeded` moves on only to a larger window), (3) to refuse to move on once a streamed chunk
 * went out, and (4) to say which model answered and why the others did not. `Effect.withExecutionPlan` also
 * provides a context per step on every call, a cost the plain loop here does not pay when the primary answers.
 * Retries stay where they are today: in each provider (`maxAttempts`, `Schedule`), so the chain sees an error only
 * once its model's retries are spent.
 */
import { Clock, Duration, Effect, Exit, Queue, Stream } from "effect"
import type { Chunk, Request, Response } from "../modelSchema.js"
import type { ModelError } from "../../ModelError.js"
import * as ModelErrors from "../../ModelError.js"

/** One model of a chain, resolved to its service. */
export interface Link {
  readonly name: string
  readonly contextWindow: number | undefined
  readonly generate: (request: Request) => Effect.Effect<Response, ModelError>
  readonly stream: (request: Request) => Stream.Stream<Chunk, ModelError>
  readonly streamInto: (request: Request, onChunk: (chunk: Chunk) => Effect.Effect<void>) => Effect.Effect<Response, ModelError>
}

/** What a model that did not answer is reported with. */
export interface Skip {
  readonly from: string
  readonly to: string
  readonly reason: string
}

/** The breaker's settings, resolved. */
export interface BreakerSettings {
  readonly failures: number
  readonly windowMs: number
  readonly coolDownMs: number
}

/** The defaults: 5 failures within 1 minute open the circuit for 30 seconds. */
export const defaultBreaker: BreakerSettings = { failures: 5, windowMs: 60_000, coolDownMs: 30_000 }

/**
 * A circuit breaker: closed (calls go through; failures are counted in a sliding window), open (calls are refused
 * without being sent until `openUntil`), half-open (one probe call is let through; the others are refused until it
 * settles: a success closes the circuit, a failure opens it again for another cool-down).
 */
export class Breaker {
  state: "closed" | "open" | "half-open" = "closed"
  /** Times of the failures still inside the window (closed only). */
  failures: Array<number> = []
  openUntil = 0
  /** The error that opened the circuit: what a refused call fails with when no model is left. */
  lastError: ModelError | undefined = undefined
  constructor(readonly settings: BreakerSettings) {}

  /** Whether a call may go out now; a call let through an open circuit past its cool-down is the probe. */
  admit(now: number): boolean {
    if (this.state === "closed") return true
    if (this.state === "open" && now >= this.openUntil) {
      this.state = "half-open"
      return true
    }
    return false
  }

  succeeded(): void {
    if (this.state !== "closed") {
      this.state = "closed"
      this.failures = []
    }
  }

  failed(now: number, error: ModelError): void {
    this.lastError = error
    if (this.state === "half-open") {
      this.open(now)
      return
    }
    const since = now - this.settings.windowMs
    const kept = this.failures.filter((at) => at > since)
    kept.push(now)
    this.failures = kept
    if (kept.length >= this.settings.failures) this.open(now)
  }

  private open(now: number): void {
    this.state = "open"
    this.openUntil = now + this.settings.coolDownMs
    this.failures = []
  }
}

/** Whether an error says the model is unwell (what a breaker counts), rather than that the request is wrong for it. */
const countsAgainstModel = (error: ModelError): boolean => ModelErrors.isRetryable(error)

const describe = (error: ModelError): string => `${error._tag}: ${error.message}`

/** The chain's decisions and bookkeeping, shared by its three call shapes. */
export interface Chain {
  readonly links: ReadonlyArray<Link>
  readonly breakers: ReadonlyArray<Breaker | undefined>
  readonly when: (error: ModelError) => boolean
  readonly report: (skip: Skip) => Effect.Effect<void>
}

/** The index of the next model after `from` that may take a request `error` refused, or -1. */
const nextAfter = (chain: Chain, from: number, error: ModelError | undefined): number => {
  if (from + 1 >= chain.links.length) return -1
  if (error === undefined || error._tag !== "ContextLengthExceeded") return from + 1
  // Too long for this model: only a model with a larger window may take it, when the windows are declared.
  const window = chain.links[from]!.contextWindow
  for (let i = from + 1; i < chain.links.length; i++) {
    const next = chain.links[i]!.contextWindow
    if (window === undefined || next === undefined || next > window) return i
  }
  return -1
}

/**
 * Runs `attempt` on the models in order: a model whose breaker refuses is skipped at once; an error `when`
 * selects moves on (`stop()` true: a streamed chunk went out, so it fails instead). Each skip is reported.
 */
export const run = <A>(
  chain: Chain,
  attempt: (link: Link) => Effect.Effect<A, ModelError>,
  stop: () => boolean
): Effect.Effect<A, ModelError> => {
  const from = (i: number, refused: ModelError | undefined): Effect.Effect<A, ModelError> => {
    const link = chain.links[i]!
    const breaker = chain.breakers[i]
    // Closed breaker: no clock read, nothing but the call (the primary answering is the common case).
    if (breaker !== undefined && breaker.state !== "closed") {
      return Effect.flatMap(Clock.currentTimeMillis, (now) => {
        if (breaker.admit(now)) return attemptOn(i, link, breaker)
        const error = breaker.lastError ?? refused
        // Which model may come next depends on why the call left the previous one (a prompt too long for it).
        const next = nextAfter(chain, i, refused ?? error)
        if (next < 0 || error === undefined) return Effect.fail(error ?? circuitOpen(link))
        return Effect.andThen(
          chain.report({ from: link.name, to: chain.links[next]!.name, reason: `circuit open (${describe(error)})` }),
          Effect.suspend(() => from(next, error))
        )
      })
    }
    return attemptOn(i, link, breaker)
  }
  const attemptOn = (i: number, link: Link, breaker: Breaker | undefined): Effect.Effect<A, ModelError> => {
    const sent = attempt(link)
    // Only a probe (half-open) has anything to do on success: a closed breaker keeps no count of successes. A probe
    // must settle the breaker however it ends, or every later call is refused for good: an answer, or an error that
    // is about the request (a 400: the server is up), closes it; a counted error reopens it (in the catch below); an
    // interrupted or dying probe gives the probe back (open, cool-down over: the next call probes).
    const watched = breaker !== undefined && breaker.state === "half-open"
      ? Effect.onExit(sent, (exit) => Effect.sync(() => settleProbe(breaker, exit)))
      : sent
    return Effect.catch(watched, (error: ModelError) => {
      const moveOn = (): Effect.Effect<A, ModelError> => {
        if (stop() || !chain.when(error)) return Effect.fail(error)
        const next = nextAfter(chain, i, error)
        if (next < 0) return Effect.fail(error)
        return Effect.andThen(
          chain.report({ from: link.name, to: chain.links[next]!.name, reason: describe(error) }),
          Effect.suspend(() => from(next, error))
        )
      }
      if (breaker === undefined || !countsAgainstModel(error)) return moveOn()
      return Effect.flatMap(Clock.currentTimeMillis, (now) => {
        breaker.failed(now, error)
        return moveOn()
      })
    })
  }
  return from(0, undefined)
}

/** How a probe that ended settles its half-open breaker (a counted error is left to `Breaker.failed`). */
const settleProbe = (breaker: Breaker, exit: Exit.Exit<unknown, ModelError>): void => {
  if (breaker.state !== "half-open") return
  if (Exit.isSuccess(exit)) return breaker.succeeded()
  const error = Exit.findErrorOption(exit)
  if (error._tag === "None") {
    breaker.state = "open"
    return
  }
  if (!countsAgainstModel(error.value)) breaker.succeeded()
}

/** What an open circuit fails with when it never saw an error of its own (not reachable through `failed`). */
const circuitOpen = (link: Link): ModelError =>
  new ModelErrors.ServerError({ status: 503, message: `${link.name}: circuit open` })

/**
 * The stream of a chain, through its `streamInto`: the first model's chunks, or, when it fails before its first
 * chunk with an error the chain moves on for, the next one's. A model that fails after a chunk went out fails the
 * stream: the chunks are already the caller's.
 */
export const stream = (chain: Chain, request: Request): Stream.Stream<Chunk, ModelError> =>
  Stream.callback<Chunk, ModelError>((queue) =>
    Effect.matchEffect(streamInto(chain, request, (chunk) => Effect.asVoid(Queue.offer(queue, chunk))), {
      onFailure: (error) => Queue.fail(queue, error),
      onSuccess: () => Queue.end(queue)
    }))

/** The `streamInto` of a chain: moves on only while no chunk was handed to `onChunk`. */
export const streamInto = (
  chain: Chain,
  request: Request,
  onChunk: (chunk: Chunk) => Effect.Effect<void>
): Effect.Effect<Response, ModelError> =>
  Effect.suspend(() => {
    let started = false
    const watched = (chunk: Chunk): Effect.Effect<void> => {
      started = true
      return onChunk(chunk)
    }
    return run(chain, (link) => link.streamInto(request, watched), () => started)
  })

/** The breaker settings from the user's, checked: `undefined` when a setting is not a positive number. */
export const breakerSettings = (options: {
  readonly failures?: number | undefined
  readonly window?: Duration.Input | undefined
  readonly coolDown?: Duration.Input | undefined
}): BreakerSettings | string => {
  const failures = options.failures ?? defaultBreaker.failures
  if (!Number.isInteger(failures) || failures < 1) return `breaker.failures must be an integer >= 1, got ${failures}`
  const windowMs = options.window === undefined ? defaultBreaker.windowMs : Duration.toMillis(Duration.fromInputUnsafe(options.window))
  if (!(windowMs > 0)) return `breaker.window must be a positive duration, got ${String(options.window)}`
  const coolDownMs = options.coolDown === undefined ? defaultBreaker.coolDownMs : Duration.toMillis(Duration.fromInputUnsafe(options.coolDown))
  if (!(coolDownMs >= 0)) return `breaker.coolDown must be a duration >= 0, got ${String(options.coolDown)}`
  return { failures, windowMs, coolDownMs }
}

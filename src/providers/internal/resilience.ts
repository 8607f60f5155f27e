/**
 * Retries, timeouts, the in-flight cap and the body size caps, the same for every HTTP provider. An attempt is a
 * function (not a fixed effect) so that a pool can route each attempt to a different endpoint.
 *
 * - per attempt: a timeout (for a stream: until the first event, then between events — only data counts: SSE
 *   comments, blank lines and whitespace keep no call alive);
 * - per call: a timeout over all attempts and the waits between them (10 minutes by default, so no call can hang
 *   forever);
 * - retries with an exponential, jittered `Schedule`, only for errors `retryOn` accepts (by default the
 *   retryable ones), never sooner than the server's `Retry-After` asks, not at all when it asks for more than
 *   `maxRetryAfter` (the `RateLimited` error comes back at once, with `retryAfterMs`), and never once a stream has
 *   yielded a chunk (the consumer has seen it: a retry would repeat it);
 * - an optional cap on requests in flight, held for a stream until it ends;
 * - caps on the size of every body (`BodyLimits`), enforced by the attempts while they read.
 *
 * Streams are built from channels without per-element stages (`Channel.unwrap` instead of `Stream.unwrap`, the
 * watchdog instead of `Stream.timeoutOrElse` / `Stream.interruptWhen`): each stage costs a little per network
 * read, and a streamed answer is hundreds of reads.
 */
import { Channel, Clock, Duration, Effect, Pull, Schedule, Schema, type Scope, Semaphore, Stream } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import { DurationInput, FunctionSchema, IntAtLeast } from "../../core/internal/decode.js"
import type * as Model from "../../core/Model.js"
import * as ModelError from "../../core/ModelError.js"

/**
 * How large a server's answer may be. A body over its cap fails the attempt with a `MalformedResponse` that names
 * the cap, as soon as the cap is passed (the rest is not read: the request is aborted).
 */
export interface BodyLimits {
  /**
   * The largest non-streamed body (a JSON answer; an error body is only previewed). Default 32 MiB. Each cap is a
   * number of bytes > 0; `Infinity` turns it off.
   */
  readonly maxResponseBytes?: number | undefined
  /**
   * The most bytes one streamed answer may carry in all, comments and whitespace included. Default 256 MiB. (The
   * legacy `/generate` stream repeats the whole text so far on every line: its total grows with the square of the
   * answer.)
   */
  readonly maxStreamBytes?: number | undefined
  /**
   * The largest single SSE event (or `/generate` line). Default 8 MiB. Counted in UTF-16 code units once
   * decoded, which are never more than the bytes: an event of up to this many bytes always passes.
   */
  readonly maxEventBytes?: number | undefined
}

/** Retries, timeouts, the in-flight cap and the body caps of a provider. Every field is optional. */
export interface Options extends BodyLimits {
  /**
   * How long one attempt may take: a non-streamed answer in all; a stream until its first event, and then between
   * two events (SSE comments and whitespace do not count as events). Default 60 s. `Duration.infinity`: no limit.
   */
  readonly attemptTimeout?: Duration.Input | undefined
  /** How long the whole call may take, all attempts and waits included. Default 10 min. `Duration.infinity`: no limit. */
  readonly callTimeout?: Duration.Input | undefined
  /** Attempts in all, the first included (1: no retries). Default 3. */
  readonly maxAttempts?: number | undefined
  /** The wait before the first retry; it doubles after each retry, with ±20 % jitter. Default 500 ms. */
  readonly initialDelay?: Duration.Input | undefined
  /** The longest wait between attempts (a server's `Retry-After` may ask for more, up to `maxRetryAfter`). Default 30 s. */
  readonly maxDelay?: Duration.Input | undefined
  /**
   * The longest `Retry-After` (or `retry-after-ms`) that is waited out. A server that asks for more gets no retry:
   * the call fails at once with its `RateLimited` error, whose `retryAfterMs` says when the server would take
   * the request again. Default 60 s.
   */
  readonly maxRetryAfter?: Duration.Input | undefined
  /** Which errors to retry. Default: `error.retryable` (rate limits, 5xx, timeouts, broken connections). */
  readonly retryOn?: ((error: ModelError.ModelError) => boolean) | undefined
  /** At most this many requests in flight to the endpoint; more wait their turn. Default: no cap. */
  readonly maxInFlight?: number | undefined
}

export { DurationInput } from "../../core/internal/decode.js"

// A cap is bytes > 0, or Infinity (no cap).
const ByteCap = Schema.Number.check(Schema.isGreaterThan(0))

/** The fields of `Options` as a schema: what `OpenAiCompatible.make` and `Vllm.make` check before anything runs. */
export const optionFields = {
  attemptTimeout: Schema.optional(DurationInput),
  callTimeout: Schema.optional(DurationInput),
  maxAttempts: Schema.optional(IntAtLeast(1)),
  initialDelay: Schema.optional(DurationInput),
  maxDelay: Schema.optional(DurationInput),
  maxRetryAfter: Schema.optional(DurationInput),
  retryOn: Schema.optional(FunctionSchema<(error: ModelError.ModelError) => boolean>("error => boolean")),
  maxInFlight: Schema.optional(IntAtLeast(1)),
  maxResponseBytes: Schema.optional(ByteCap),
  maxStreamBytes: Schema.optional(ByteCap),
  maxEventBytes: Schema.optional(ByteCap)
}

/** The defaults of `Options`. */
export const defaults = {
  attemptTimeout: Duration.seconds(60),
  callTimeout: Duration.minutes(10),
  maxAttempts: 3,
  initialDelay: Duration.millis(500),
  maxDelay: Duration.seconds(30),
  maxRetryAfter: Duration.seconds(60),
  maxResponseBytes: 32 * 1024 * 1024,
  maxStreamBytes: 256 * 1024 * 1024,
  maxEventBytes: 8 * 1024 * 1024
} as const

/** `BodyLimits` with every default filled in. */
export interface Limits {
  readonly maxResponseBytes: number
  readonly maxStreamBytes: number
  readonly maxEventBytes: number
}

/** A size cap as given: a number of bytes > 0 (`Infinity` turns it off); anything else is the default. */
const cap = (value: number | undefined, fallback: number): number =>
  value !== undefined && value > 0 ? value : fallback

/** The body caps of some options, defaults filled in. */
export const limitsOf = (options: BodyLimits): Limits => ({
  maxResponseBytes: cap(options.maxResponseBytes, defaults.maxResponseBytes),
  maxStreamBytes: cap(options.maxStreamBytes, defaults.maxStreamBytes),
  maxEventBytes: cap(options.maxEventBytes, defaults.maxEventBytes)
})

/** Whether an error is a rate limit whose `Retry-After` asks for a longer wait than `maxRetryAfterMs`. */
const beyondRetryAfter = (error: ModelError.ModelError, maxRetryAfterMs: number): error is ModelError.RateLimited =>
  error._tag === "RateLimited" && error.retryAfterMs !== undefined && error.retryAfterMs > maxRetryAfterMs

const maxRetryAfterOf = (options: Options): number =>
  Duration.toMillis(Duration.fromInputUnsafe(options.maxRetryAfter ?? defaults.maxRetryAfter))

/**
 * The error a call ends with: a rate limit that was not waited out because its `Retry-After` is beyond the cap
 * says so (the same `RateLimited`, `retryAfterMs` kept, the server's message first).
 */
export const finalError = (options: Options): (error: ModelError.ModelError) => ModelError.ModelError => {
  const maxRetryAfterMs = maxRetryAfterOf(options)
  const retryOn = options.retryOn ?? ModelError.isRetryable
  return (error) =>
    beyondRetryAfter(error, maxRetryAfterMs) && retryOn(error)
      ? new ModelError.RateLimited({
        message: `${error.message} (the server asks to retry after ${Duration.format(Duration.millis(error.retryAfterMs!))}, more than maxRetryAfter ${Duration.format(Duration.millis(maxRetryAfterMs))}: not retried)`,
        retryAfterMs: error.retryAfterMs!
      })
      : error
}

/**
 * The retry schedule: exponential from `initialDelay`, jittered, capped at `maxDelay`, at most `maxAttempts - 1`
 * retries, only while the error is one to retry, never sooner than a `RateLimited` error's `retryAfterMs`, and
 * not at all when that is beyond `maxRetryAfter`.
 */
export const retrySchedule = (options: Options): Schedule.Schedule<Duration.Duration, ModelError.ModelError> => {
  const maxDelay = Duration.fromInputUnsafe(options.maxDelay ?? defaults.maxDelay)
  const maxRetryAfterMs = maxRetryAfterOf(options)
  const retryOn = options.retryOn ?? ModelError.isRetryable
  const retries = Math.max(0, Math.floor(options.maxAttempts ?? defaults.maxAttempts) - 1)
  return Schedule.exponential(options.initialDelay ?? defaults.initialDelay, 2).pipe(
    Schedule.jittered,
    Schedule.setInputType<ModelError.ModelError>(),
    Schedule.modifyDelay(({ duration, input }) => {
      const capped = Duration.min(duration, maxDelay)
      return Effect.succeed(
        input._tag === "RateLimited" && input.retryAfterMs !== undefined
          ? Duration.max(capped, Duration.millis(input.retryAfterMs))
          : capped
      )
    }),
    Schedule.while(({ attempt, input }) =>
      attempt <= retries && retryOn(input) && !beyondRetryAfter(input, maxRetryAfterMs)
    )
  )
}

const attemptTimeoutError = (timeout: Duration.Duration) =>
  new ModelError.Timeout({
    message: `no answer within ${Duration.format(timeout)} (the per-attempt timeout)`,
    timeoutMs: Duration.toMillis(timeout)
  })

const callTimeoutError = (timeout: Duration.Duration) =>
  new ModelError.Timeout({
    message: `the call did not finish within ${Duration.format(timeout)} (the per-call timeout, retries included)`,
    timeoutMs: Duration.toMillis(timeout)
  })

/** A single request outside the retried calls (`GET /models`): bounded by the attempt timeout, so it cannot hang. */
export const withAttemptTimeout = (options: Options) =>
<A>(effect: Effect.Effect<A, ModelError.ModelError>): Effect.Effect<A, ModelError.ModelError> => {
  const timeout = Duration.fromInputUnsafe(options.attemptTimeout ?? defaults.attemptTimeout)
  return Duration.isFinite(timeout)
    ? Effect.timeoutOrElse(effect, { duration: timeout, orElse: () => Effect.fail(attemptTimeoutError(timeout)) })
    : effect
}

/**
 * Retries and timeouts for a single request that is not a model call (`POST /embeddings`): `attempt` is bounded by
 * the attempt timeout, retried by `retrySchedule`, the whole bounded by the call timeout, the in-flight cap held
 * around each attempt — the same rules as `generate`, for any answer type.
 */
export const makeCall = (options: Options): Effect.Effect<<A>(attempt: Effect.Effect<A, ModelError.ModelError>) => Effect.Effect<A, ModelError.ModelError>> =>
  Effect.map(
    options.maxInFlight !== undefined ? Effect.map(Semaphore.make(Math.max(1, options.maxInFlight)), (s) => s as Semaphore.Semaphore | undefined) : Effect.succeed(undefined),
    (semaphore) => {
      const attemptTimeout = Duration.fromInputUnsafe(options.attemptTimeout ?? defaults.attemptTimeout)
      const callLimit = Duration.fromInputUnsafe(options.callTimeout ?? defaults.callTimeout)
      const schedule = retrySchedule(options)
      const final = finalError(options)
      return <A>(attempt: Effect.Effect<A, ModelError.ModelError>) => {
        const bounded = Duration.isFinite(attemptTimeout)
          ? Effect.timeoutOrElse(attempt, { duration: attemptTimeout, orElse: () => Effect.fail(attemptTimeoutError(attemptTimeout)) })
          : attempt
        const one = semaphore !== undefined ? semaphore.withPermits(1)(bounded) : bounded
        const retried = Effect.mapError(Effect.retry(one, schedule), final)
        return Duration.isFinite(callLimit)
          ? Effect.timeoutOrElse(retried, { duration: callLimit, orElse: () => Effect.fail(callTimeoutError(callLimit)) })
          : retried
      }
    }
  )

/** What a streamed attempt is told by the resilience layer. */
export interface StreamControl {
  /** How long the attempt may go without an event (before its first, or between two). */
  readonly idle: Duration.Duration | undefined
  /** The `Clock` time at which the whole call times out. */
  readonly deadline: number | undefined
  /** The error for a silence (`idle`) or for the deadline (`call`). */
  readonly timeoutError: (kind: "idle" | "call") => ModelError.ModelError
  /** Called whenever the attempt hands chunks to the consumer (from then on it is never retried). */
  readonly onEmit: () => void
}

/** The watchdog of one streamed attempt. */
export interface Watchdog {
  /** Call on every event read from the network (not on comments or whitespace: those are no progress). */
  readonly touch: () => void
  /** Replaces an error caused by the watchdog's abort with the timeout that made it abort. */
  readonly explain: (error: ModelError.ModelError) => ModelError.ModelError
}

const noWatchdog: Watchdog = { touch: () => {}, explain: (error) => error }

/**
 * Starts a watchdog for the life of the scope: when the attempt goes `control.idle` without an event, or the call's
 * deadline passes, it runs `abort` once (which aborts the request, so the attempt's read fails, and `explain`
 * turns that failure into the timeout). One fiber per attempt waking once per period, reading the `Clock` (so
 * `TestClock` drives it); a timeout per pull (`Stream.timeoutOrElse`) instead races a timer on every pull, which
 * cost a quarter of the client's CPU on a 200-chunk stream on effect 3.
 */
export const watchdog = (control: StreamControl, abort: Effect.Effect<void>, scope: Scope.Scope): Effect.Effect<Watchdog> => {
  const idle = control.idle
  const deadline = control.deadline
  if (idle === undefined && deadline === undefined) return Effect.succeed(noWatchdog)
  return Effect.clockWith((clock) =>
    Effect.gen(function*() {
      const idleMillis = idle !== undefined ? Duration.toMillis(idle) : Infinity
      let last = clock.currentTimeMillisUnsafe()
      let fired: "idle" | "call" | undefined = undefined
      const loop: Effect.Effect<void> = Effect.suspend(() => {
        const now = clock.currentTimeMillisUnsafe()
        if (deadline !== undefined && now >= deadline) fired = "call"
        else if (now - last >= idleMillis) fired = "idle"
        if (fired !== undefined) return abort
        const wake = Math.min(last + idleMillis, deadline ?? Infinity)
        return Effect.andThen(Effect.sleep(Duration.millis(wake - now)), loop)
      })
      yield* Effect.forkIn(loop, scope)
      return {
        touch: () => {
          last = clock.currentTimeMillisUnsafe()
        },
        explain: (error) => (fired !== undefined ? control.timeoutError(fired) : error)
      }
    })
  )
}

/**
 * The one-attempt operations a provider gives to `make`. A streamed attempt enforces `control`'s timeouts itself
 * (with `watchdog`), because only it can abort its request, and calls `control.onEmit` when it yields chunks.
 */
export interface Attempt {
  readonly generate: (request: Model.Request) => Effect.Effect<Model.Response, ModelError.ModelError>
  readonly stream: (request: Model.Request, control: StreamControl) => Stream.Stream<Model.Chunk, ModelError.ModelError>
}

/** A `StreamControl` with no timeouts, for calling an `Attempt` directly. */
export const uncontrolled: StreamControl = {
  idle: undefined,
  deadline: undefined,
  timeoutError: () => new ModelError.Timeout({ message: "timed out", timeoutMs: 0 }),
  onEmit: () => {}
}

/** Wraps one-attempt operations with retries, timeouts and the in-flight cap. */
export const make = (attempt: Attempt, options: Options = {}): Effect.Effect<Model.Service> =>
  options.maxInFlight !== undefined
    ? Effect.map(Semaphore.make(Math.max(1, options.maxInFlight)), (semaphore) => makeWith(attempt, options, semaphore))
    : Effect.sync(() => makeWith(attempt, options, undefined))

type Out = Channel.Channel<NonEmptyReadonlyArray<Model.Chunk>, ModelError.ModelError, void, unknown, unknown, unknown>

/** `make` with a semaphore shared with other callers (one per endpoint). */
export const makeWith = (
  attempt: Attempt,
  options: Options,
  semaphore: Semaphore.Semaphore | undefined
): Model.Service => {
  const attemptTimeout = Duration.fromInputUnsafe(options.attemptTimeout ?? defaults.attemptTimeout)
  const callLimit = Duration.fromInputUnsafe(options.callTimeout ?? defaults.callTimeout)
  const callTimeout = Duration.isFinite(callLimit) ? callLimit : undefined
  const schedule = retrySchedule(options)
  const final = finalError(options)
  const retryOn = options.retryOn ?? ModelError.isRetryable
  const bounded = Duration.isFinite(attemptTimeout)
  const idle = bounded ? attemptTimeout : undefined
  const timeoutError = (kind: "idle" | "call") =>
    kind === "call" && callTimeout !== undefined ? callTimeoutError(callTimeout) : attemptTimeoutError(attemptTimeout)
  const onAttemptTimeout = () => Effect.fail(attemptTimeoutError(attemptTimeout))
  const onCallTimeout = () => Effect.fail(callTimeoutError(callTimeout!))

  const attemptMillis = Duration.toMillis(attemptTimeout)
  const callMillis = callTimeout !== undefined ? Duration.toMillis(callTimeout) : undefined

  /**
   * What to do after a failed attempt: the schedule sleeps before it answers, so the wait before a retry counts
   * against the call's deadline too ("deadline" when it passes first).
   */
  const nextAfter = (
    step: (error: ModelError.ModelError) => Pull.Pull<Duration.Duration, never, Duration.Duration>,
    deadline: number | undefined
  ) => {
    const decide = (error: ModelError.ModelError): Effect.Effect<"retry" | "done"> =>
      Pull.matchEffect(step(error), {
        onSuccess: () => Effect.succeed("retry" as const),
        onFailure: () => Effect.succeed("done" as const),
        onDone: () => Effect.succeed("done" as const)
      })
    return (error: ModelError.ModelError): Effect.Effect<"retry" | "done" | "deadline"> =>
      deadline === undefined
        ? decide(error)
        : Effect.flatMap(Clock.currentTimeMillis, (now) =>
          now >= deadline
            // Past the deadline: an error that would have been retried ends the call as its timeout; any other
            // is the call's error.
            ? Effect.succeed(retryOn(error) ? "deadline" as const : "done" as const)
            : Effect.timeoutOrElse(decide(error), {
              duration: Duration.millis(deadline - now),
              orElse: () => Effect.succeed("deadline" as const)
            }))
  }

  const oneGenerate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> => {
    const call = bounded
      ? Effect.timeoutOrElse(attempt.generate(request), { duration: attemptTimeout, orElse: onAttemptTimeout })
      : attempt.generate(request)
    return semaphore !== undefined ? semaphore.withPermits(1)(call) : call
  }

  /**
   * One attempt with a single timer: the attempt timeout, or what is left of the call when that is shorter. (A
   * timer over the whole call beside the attempt's would cost a second race on every call: a fifth of the
   * client's CPU on a loopback call, measured with bench/client.ts's worker.)
   */
  const attemptBefore = (request: Model.Request, deadline: number): Effect.Effect<Model.Response, ModelError.ModelError> =>
    Effect.clockWith((clock) => {
      const left = deadline - clock.currentTimeMillisUnsafe()
      if (left <= 0) return onCallTimeout()
      return left < attemptMillis
        ? Effect.timeoutOrElse(attempt.generate(request), { duration: Duration.millis(left), orElse: onCallTimeout })
        : Effect.timeoutOrElse(attempt.generate(request), { duration: attemptTimeout, orElse: onAttemptTimeout })
    })

  const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> => {
    if (callMillis === undefined || semaphore !== undefined) {
      // Without a deadline, or with a permit to wait for (which the call's deadline bounds too): retry, and one
      // timer over the whole call.
      const retried = Effect.mapError(Effect.retry(oneGenerate(request), schedule), final)
      return callTimeout !== undefined
        ? Effect.timeoutOrElse(retried, { duration: callTimeout, orElse: onCallTimeout })
        : retried
    }
    return Effect.flatMap(Clock.currentTimeMillis, (start) => {
      const deadline = start + callMillis
      const first = attemptBefore(request, deadline)
      // Only a failed attempt pays for the schedule.
      return Effect.catch(first, (error) =>
        Effect.flatMap(Schedule.toStepWithSleep(schedule), (step) => {
          const next = nextAfter(step, deadline)
          const retry = (error: ModelError.ModelError): Effect.Effect<Model.Response, ModelError.ModelError> =>
            Effect.flatMap(next(error), (decision) =>
              decision === "retry"
                ? Effect.catch(attemptBefore(request, deadline), retry)
                : decision === "deadline"
                ? onCallTimeout()
                : Effect.fail(final(error)))
          return retry(error)
        }))
    })
  }

  const oneStream = (request: Model.Request, control: StreamControl): Out => {
    const body = Stream.toChannel(attempt.stream(request, control))
    if (semaphore === undefined) return body
    return Channel.unwrap(
      Effect.as(Effect.acquireRelease(semaphore.take(1), () => semaphore.release(1)), body)
    )
  }

  const stream = (request: Model.Request): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
    Stream.fromChannel(Channel.unwrap(Effect.gen(function*() {
      const step = yield* Schedule.toStepWithSleep(schedule)
      const deadline = callTimeout !== undefined ? (yield* Clock.currentTimeMillis) + Duration.toMillis(callTimeout) : undefined
      let emitted = false
      const control: StreamControl = {
        idle,
        deadline,
        timeoutError,
        onEmit: () => {
          emitted = true
        }
      }
      const next = nextAfter(step, deadline)
      const loop = (): Out =>
        Channel.catch(oneStream(request, control), (error) =>
          emitted ? Channel.fail(error) : Channel.unwrap(Effect.map(next(error), (decision) =>
            decision === "retry" ? loop() : Channel.fail(decision === "deadline" ? timeoutError("call") : final(error))
          )))
      return loop()
    })))

  return { generate, stream }
}

/**
 * Retries, timeouts and the in-flight cap, the same for every HTTP provider. An attempt is a function (not a
 * fixed effect) so that a pool can route each attempt to a different endpoint.
 *
 * - per attempt: a timeout (for a stream: until the first chunk, then between chunks);
 * - per call: a timeout over all attempts and the waits between them;
 * - retries with an exponential, jittered `Schedule`, only for errors `retryOn` accepts (by default the
 *   retryable ones), never longer apart than the server's `Retry-After` asks, and never once a stream has
 *   yielded a chunk (the consumer has seen it: a retry would repeat it);
 * - an optional cap on requests in flight, held for a stream until it ends.
 */
import { Duration, Effect, Option, Schedule, Stream } from "effect"
import type * as Model from "../Model.js"
import * as ModelError from "../ModelError.js"

/** Retries, timeouts and the in-flight cap of a provider. Every field is optional. */
export interface Options {
  /** How long one attempt may take (a stream: until its first chunk, and then between chunks). Default 60 s. */
  readonly attemptTimeout?: Duration.DurationInput | undefined
  /** How long the whole call may take, all attempts and waits included. Default: no limit beyond the attempts'. */
  readonly callTimeout?: Duration.DurationInput | undefined
  /** Attempts in all, the first included (1: no retries). Default 3. */
  readonly maxAttempts?: number | undefined
  /** The wait before the first retry; it doubles after each retry, with ±20 % jitter. Default 500 ms. */
  readonly initialDelay?: Duration.DurationInput | undefined
  /** The longest wait between attempts (a server's `Retry-After` may ask for more and is honoured). Default 30 s. */
  readonly maxDelay?: Duration.DurationInput | undefined
  /** Which errors to retry. Default: `error.retryable` (rate limits, 5xx, timeouts, broken connections). */
  readonly retryOn?: ((error: ModelError.ModelError) => boolean) | undefined
  /** At most this many requests in flight to the endpoint; more wait their turn. Default: no cap. */
  readonly maxInFlight?: number | undefined
}

/** The defaults of `Options`. */
export const defaults = {
  attemptTimeout: Duration.seconds(60),
  maxAttempts: 3,
  initialDelay: Duration.millis(500),
  maxDelay: Duration.seconds(30)
} as const

/**
 * The retry schedule: exponential from `initialDelay`, jittered, capped at `maxDelay`, at most `maxAttempts - 1`
 * retries, only while the error is one to retry, and never sooner than a `RateLimited` error's `retryAfterMs`.
 */
export const retrySchedule = (options: Options): Schedule.Schedule<unknown, ModelError.ModelError> => {
  const maxDelay = Duration.decode(options.maxDelay ?? defaults.maxDelay)
  const retryOn = options.retryOn ?? ModelError.isRetryable
  const retries = Math.max(0, Math.floor(options.maxAttempts ?? defaults.maxAttempts) - 1)
  return Schedule.exponential(options.initialDelay ?? defaults.initialDelay, 2).pipe(
    Schedule.jittered,
    Schedule.modifyDelay((_, delay) => Duration.min(delay, maxDelay)),
    Schedule.intersect(Schedule.recurs(retries)),
    Schedule.intersect(Schedule.identity<ModelError.ModelError>()),
    Schedule.modifyDelay(([, error], delay) =>
      error._tag === "RateLimited" && error.retryAfterMs !== undefined
        ? Duration.max(delay, Duration.millis(error.retryAfterMs))
        : delay
    ),
    Schedule.whileInput(retryOn)
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

/** The one-attempt operations a provider gives to `make`. */
export interface Attempt {
  readonly generate: (request: Model.Request) => Effect.Effect<Model.Response, ModelError.ModelError>
  readonly stream: (request: Model.Request) => Stream.Stream<Model.Chunk, ModelError.ModelError>
}

/** Wraps one-attempt operations with retries, timeouts and the in-flight cap. */
export const make = (attempt: Attempt, options: Options = {}): Effect.Effect<Model.Service> =>
  Effect.map(
    options.maxInFlight !== undefined ? Effect.map(Effect.makeSemaphore(Math.max(1, options.maxInFlight)), Option.some) : Effect.succeed(Option.none()),
    (semaphore) => makeWith(attempt, options, Option.getOrUndefined(semaphore))
  )

/** `make` with a semaphore shared with other callers (one per endpoint). */
export const makeWith = (
  attempt: Attempt,
  options: Options,
  semaphore: Effect.Semaphore | undefined
): Model.Service => {
  const attemptTimeout = Duration.decode(options.attemptTimeout ?? defaults.attemptTimeout)
  const callTimeout = options.callTimeout !== undefined ? Duration.decode(options.callTimeout) : undefined
  const schedule = retrySchedule(options)
  const bounded = Duration.isFinite(attemptTimeout)

  const oneGenerate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> => {
    const call = bounded
      ? Effect.timeoutFail(attempt.generate(request), {
        duration: attemptTimeout,
        onTimeout: () => attemptTimeoutError(attemptTimeout)
      })
      : attempt.generate(request)
    return semaphore !== undefined ? semaphore.withPermits(1)(call) : call
  }

  const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> => {
    const retried = Effect.retry(oneGenerate(request), schedule)
    return callTimeout !== undefined
      ? Effect.timeoutFail(retried, { duration: callTimeout, onTimeout: () => callTimeoutError(callTimeout) })
      : retried
  }

  const oneStream = (request: Model.Request): Stream.Stream<Model.Chunk, ModelError.ModelError> => {
    const body = bounded
      ? Stream.timeoutFail(attempt.stream(request), () => attemptTimeoutError(attemptTimeout), attemptTimeout)
      : attempt.stream(request)
    if (semaphore === undefined) return body
    return Stream.unwrapScoped(
      Effect.as(Effect.acquireRelease(semaphore.take(1), () => semaphore.release(1)), body)
    )
  }

  const stream = (request: Model.Request): Stream.Stream<Model.Chunk, ModelError.ModelError> => {
    const retried = Stream.unwrap(Effect.map(Schedule.driver(schedule), (driver) => {
      let emitted = false
      const loop = (): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
        oneStream(request).pipe(
          Stream.mapChunks((chunks) => {
            if (chunks.length > 0) emitted = true
            return chunks
          }),
          Stream.catchAll((error) =>
            emitted
              ? Stream.fail(error)
              : Stream.unwrap(Effect.matchEffect(driver.next(error), {
                onFailure: () => Effect.succeed(Stream.fail(error)),
                onSuccess: () => Effect.succeed(Stream.suspend(loop))
              }))
          )
        )
      return loop()
    }))
    return callTimeout !== undefined
      ? Stream.interruptWhen(
        retried,
        Effect.zipRight(Effect.sleep(callTimeout), Effect.fail(callTimeoutError(callTimeout)))
      )
      : retried
  }

  return { generate, stream }
}

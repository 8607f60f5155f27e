/**
 * Retries, timeouts and the in-flight cap, the same for every HTTP provider. An attempt is a function (not a
 * fixed effect) so that a pool can route each attempt to a different endpoint.
 *
 * - per attempt: a timeout (for a stream: until the first chunk, then between chunks);
 * - per call: a timeout over all attempts and the waits between them;
 * - retries with an exponential, jittered `Schedule`, only for errors `retryOn` accepts (by default the
 *   retryable ones), never sooner than the server's `Retry-After` asks, and never once a stream has yielded a
 *   chunk (the consumer has seen it: a retry would repeat it);
 * - an optional cap on requests in flight, held for a stream until it ends.
 *
 * Streams are built from channels without per-element stages (`Channel.unwrap` instead of `Stream.unwrap`, the
 * watchdog instead of `Stream.timeoutFail` / `Stream.interruptWhen`): each stage costs a few microseconds per
 * network read, and a streamed answer is hundreds of reads.
 */
import { Channel, type Chunk, Clock, Duration, Effect, Option, Schedule, type Scope, Stream } from "effect"
import type * as Model from "../../core/Model.js"
import * as ModelError from "../../core/ModelError.js"

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

/** What a streamed attempt is told by the resilience layer. */
export interface StreamControl {
  /** How long the attempt may stay silent (before its first chunk, or between two). */
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
  /** Call on every read from the network. */
  readonly touch: () => void
  /** Replaces an error caused by the watchdog's abort with the timeout that made it abort. */
  readonly explain: (error: ModelError.ModelError) => ModelError.ModelError
}

const noWatchdog: Watchdog = { touch: () => {}, explain: (error) => error }

/**
 * Starts a watchdog for the life of the scope: when the attempt stays silent for `control.idle`, or the call's
 * deadline passes, it runs `abort` once (which aborts the request, so the attempt's read fails, and `explain`
 * turns that failure into the timeout). One fiber per attempt waking once per period, reading the `Clock` (so
 * `TestClock` drives it); `Stream.timeoutFail` instead races a new fiber and timer on every pull, which cost a
 * quarter of the client's CPU on a 200-chunk stream.
 */
export const watchdog = (control: StreamControl, abort: Effect.Effect<void>): Effect.Effect<Watchdog, never, Scope.Scope> => {
  const idle = control.idle
  const deadline = control.deadline
  if (idle === undefined && deadline === undefined) return Effect.succeed(noWatchdog)
  return Effect.clockWith((clock) =>
    Effect.gen(function*() {
      const idleMillis = idle !== undefined ? Duration.toMillis(idle) : Infinity
      let last = clock.unsafeCurrentTimeMillis()
      let fired: "idle" | "call" | undefined = undefined
      const loop: Effect.Effect<void> = Effect.suspend(() => {
        const now = clock.unsafeCurrentTimeMillis()
        if (deadline !== undefined && now >= deadline) fired = "call"
        else if (now - last >= idleMillis) fired = "idle"
        if (fired !== undefined) return abort
        const wake = Math.min(last + idleMillis, deadline ?? Infinity)
        return Effect.zipRight(Effect.sleep(Duration.millis(wake - now)), loop)
      })
      yield* Effect.forkScoped(loop)
      return {
        touch: () => {
          last = clock.unsafeCurrentTimeMillis()
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
  const idle = bounded ? attemptTimeout : undefined
  const timeoutError = (kind: "idle" | "call") =>
    kind === "call" && callTimeout !== undefined ? callTimeoutError(callTimeout) : attemptTimeoutError(attemptTimeout)

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

  type Out = Channel.Channel<Chunk.Chunk<Model.Chunk>, unknown, ModelError.ModelError, unknown, unknown, unknown>

  const oneStream = (request: Model.Request, control: StreamControl): Out => {
    const body = Stream.toChannel(attempt.stream(request, control))
    if (semaphore === undefined) return body
    return Channel.unwrapScoped(
      Effect.as(Effect.acquireRelease(semaphore.take(1), () => semaphore.release(1)), body)
    )
  }

  const stream = (request: Model.Request): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
    Stream.fromChannel(Channel.unwrap(Effect.gen(function*() {
      const driver = yield* Schedule.driver(schedule)
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
      // The wait before a retry counts against the call's deadline too.
      const next = (error: ModelError.ModelError): Effect.Effect<"retry" | "done" | "deadline"> =>
        deadline === undefined
          ? Effect.match(driver.next(error), { onFailure: () => "done" as const, onSuccess: () => "retry" as const })
          : Effect.flatMap(Clock.currentTimeMillis, (now) =>
            driver.next(error).pipe(
              Effect.timeoutTo({
                duration: Duration.millis(Math.max(0, deadline - now)),
                onTimeout: () => "deadline" as const,
                onSuccess: () => "retry" as const
              }),
              Effect.orElseSucceed(() => "done" as const)
            ))
      const loop = (): Out =>
        Channel.catchAll(oneStream(request, control), (error) =>
          emitted ? Channel.fail(error) : Channel.unwrap(Effect.map(next(error), (decision) =>
            decision === "retry" ? loop() : Channel.fail(decision === "deadline" ? timeoutError("call") : error)
          )))
      return loop()
    })))

  return { generate, stream }
}

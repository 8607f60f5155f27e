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
 * watchdog instead of `Stream.timeoutOrElse` / `Stream.interruptWhen`): each stage costs a little per network
 * read, and a streamed answer is hundreds of reads.
 */
import { Channel, Clock, Duration, Effect, Pull, Schedule, type Scope, Semaphore, Stream } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import type * as Model from "../../core/Model.js"
import * as ModelError from "../../core/ModelError.js"

/** Retries, timeouts and the in-flight cap of a provider. Every field is optional. */
export interface Options {
  /** How long one attempt may take (a stream: until its first chunk, and then between chunks). Default 60 s. */
  readonly attemptTimeout?: Duration.Input | undefined
  /** How long the whole call may take, all attempts and waits included. Default: no limit beyond the attempts'. */
  readonly callTimeout?: Duration.Input | undefined
  /** Attempts in all, the first included (1: no retries). Default 3. */
  readonly maxAttempts?: number | undefined
  /** The wait before the first retry; it doubles after each retry, with ±20 % jitter. Default 500 ms. */
  readonly initialDelay?: Duration.Input | undefined
  /** The longest wait between attempts (a server's `Retry-After` may ask for more and is honoured). Default 30 s. */
  readonly maxDelay?: Duration.Input | undefined
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
export const retrySchedule = (options: Options): Schedule.Schedule<Duration.Duration, ModelError.ModelError> => {
  const maxDelay = Duration.fromInputUnsafe(options.maxDelay ?? defaults.maxDelay)
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
    Schedule.while(({ attempt, input }) => attempt <= retries && retryOn(input))
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
  const callTimeout = options.callTimeout !== undefined ? Duration.fromInputUnsafe(options.callTimeout) : undefined
  const schedule = retrySchedule(options)
  const bounded = Duration.isFinite(attemptTimeout)
  const idle = bounded ? attemptTimeout : undefined
  const timeoutError = (kind: "idle" | "call") =>
    kind === "call" && callTimeout !== undefined ? callTimeoutError(callTimeout) : attemptTimeoutError(attemptTimeout)
  const onAttemptTimeout = () => Effect.fail(attemptTimeoutError(attemptTimeout))
  const onCallTimeout = () => Effect.fail(callTimeoutError(callTimeout!))

  const oneGenerate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> => {
    const call = bounded
      ? Effect.timeoutOrElse(attempt.generate(request), { duration: attemptTimeout, orElse: onAttemptTimeout })
      : attempt.generate(request)
    return semaphore !== undefined ? semaphore.withPermits(1)(call) : call
  }

  const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> => {
    const retried = Effect.retry(oneGenerate(request), schedule)
    return callTimeout !== undefined
      ? Effect.timeoutOrElse(retried, { duration: callTimeout, orElse: onCallTimeout })
      : retried
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
      // The schedule sleeps before it answers: the wait before a retry counts against the call's deadline too.
      const decide = (error: ModelError.ModelError): Effect.Effect<"retry" | "done"> =>
        Pull.matchEffect(step(error), {
          onSuccess: () => Effect.succeed("retry" as const),
          onFailure: () => Effect.succeed("done" as const),
          onDone: () => Effect.succeed("done" as const)
        })
      const next = (error: ModelError.ModelError): Effect.Effect<"retry" | "done" | "deadline"> =>
        deadline === undefined
          ? decide(error)
          : Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Effect.timeoutOrElse(decide(error), {
              duration: Duration.millis(Math.max(0, deadline - now)),
              orElse: () => Effect.succeed("deadline" as const)
            }))
      const loop = (): Out =>
        Channel.catch(oneStream(request, control), (error) =>
          emitted ? Channel.fail(error) : Channel.unwrap(Effect.map(next(error), (decision) =>
            decision === "retry" ? loop() : Channel.fail(decision === "deadline" ? timeoutError("call") : error)
          )))
      return loop()
    })))

  return { generate, stream }
}

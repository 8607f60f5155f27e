import { Cause, Duration, Effect, Exit, Fiber, Option, Runtime } from "effect"

/**
 * `Effect.timeoutOption`, without its cost when the effect completes synchronously.
 *
 * `timeoutOption` races two forked fibers, which costs 60–100 µs per call on Effect 3: more than everything else
 * in a ReAct step when the tool is a pure function. Here the effect first runs synchronously on a fiber of the
 * current runtime (same context and fiber refs, so `TestClock` and spans still apply); if it finishes, no race is
 * needed. If it suspends, its still-running fiber is raced against the timeout on the `Clock`; on timeout or on
 * interruption of the caller that fiber is interrupted and awaited, so its finalizers have run before this ends.
 */
export const timeoutOption = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  timeout: Duration.Duration
): Effect.Effect<Option.Option<A>, E, R> =>
  Effect.flatMap(Effect.runtime<R>(), (runtime): Effect.Effect<Option.Option<A>, E> => {
    const exit = Runtime.runSyncExit(runtime, effect)
    if (Exit.isSuccess(exit)) return Effect.succeed(Option.some(exit.value))
    const defect = Cause.dieOption(exit.cause)
    if (defect._tag === "None" || !Runtime.isAsyncFiberException(defect.value)) return Effect.failCause(exit.cause)
    const fiber = defect.value.fiber as Fiber.RuntimeFiber<A, E>
    return Fiber.join(fiber).pipe(
      Effect.timeoutOption(timeout),
      Effect.flatMap((result): Effect.Effect<Option.Option<A>> =>
        Option.isNone(result) ? Effect.as(Fiber.interrupt(fiber), result) : Effect.succeed(result)
      ),
      Effect.onInterrupt(() => Fiber.interrupt(fiber))
    )
  })

import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { sleeps, trackSleeps } from "./clock.js"

/**
 * Helpers for `TestClock` tests that also do real I/O (a loopback server). `adjustWhenSleeping` in `clock.ts`
 * yields to other fibers only, which never lets a socket deliver anything; these wait in real time instead.
 * Call `trackSleeps` (clock.ts) at the start of such a test, before anything sleeps.
 */

/** Waits `ms` of real time (not the `TestClock`'s). */
export const realDelay = (ms: number): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })

/** Polls (in real time, up to `timeoutMs`) until `condition` holds; dies when it never does. */
export const eventually = (condition: () => boolean, what: string, timeoutMs = 5_000): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let waited = 0; waited < timeoutMs; waited += 5) {
      if (condition()) return
      yield* realDelay(5)
    }
    return yield* Effect.die(new Error(`timed out waiting for: ${what}`))
  })

/**
 * Waits (in real time) until some fiber sleeps on the `TestClock` until exactly `delayMs` from now, or, without
 * `delayMs`, for less than `withinMs`; then moves the clock by `adjustMs` (default: to that wake-up time).
 */
export const adjustWhenSleepingFor = (options: {
  readonly delayMs?: number
  readonly withinMs?: number
  readonly adjustMs?: number
}): Effect.Effect<void> =>
  Effect.gen(function*() {
    yield* trackSleeps
    for (let waited = 0; waited < 5_000; waited += 5) {
      const now = yield* Clock.currentTimeMillis
      const match = (yield* sleeps).find((wakeAt) =>
        // Jittered waits make the clock fractional: compare to a microsecond.
        options.delayMs !== undefined ? Math.abs(wakeAt - now - options.delayMs) < 0.001 : wakeAt - now < (options.withinMs ?? Infinity)
      )
      if (match !== undefined) return yield* TestClock.adjust(options.adjustMs ?? match - now)
      yield* realDelay(5)
    }
    const now = yield* Clock.currentTimeMillis
    const pending = (yield* sleeps).map((s) => s - now)
    return yield* Effect.die(
      new Error(`no fiber went to sleep on the TestClock for ${JSON.stringify(options)} (sleeps in: ${pending.join(", ")})`)
    )
  })

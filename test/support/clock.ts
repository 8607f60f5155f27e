import { Clock, Duration, Effect } from "effect"
import { TestClock } from "effect/testing"

/**
 * Which fibers sleep on the `TestClock`, and until when. Effect 4's `TestClock` keeps its sleeps to itself (effect
 * 3 had `TestClock.sleeps()`), so the clock's `sleep` is wrapped in place, once per clock, to record each wake-up
 * time while its sleep is pending. Wrapping the clock object itself (not providing another one) reaches every
 * fiber that uses it, those forked earlier included.
 */
const tracked = new WeakMap<Clock.Clock, Array<number>>()

const isTestClock = (clock: Clock.Clock): clock is TestClock.TestClock => "adjust" in clock && "setTime" in clock

/**
 * Starts recording the sleeps of the `TestClock` in context (idempotent) and answers the live list of pending
 * wake-up times. Sleeps that began before the first call are not in it: call it before the sleeps of interest.
 */
export const trackSleeps: Effect.Effect<ReadonlyArray<number>> = Effect.clockWith((clock) =>
  Effect.sync(() => {
    const known = tracked.get(clock)
    if (known !== undefined) return known
    const pending: Array<number> = []
    tracked.set(clock, pending)
    if (!isTestClock(clock)) return pending
    const sleep = clock.sleep.bind(clock)
    ;(clock as { sleep: Clock.Clock["sleep"] }).sleep = (duration) =>
      Effect.suspend(() => {
        const millis = Duration.toMillis(duration)
        // The TestClock returns at once from a sleep that ends now or earlier: nothing to wait for.
        if (!(millis > 0)) return sleep(duration)
        const wakeAt = clock.currentTimeMillisUnsafe() + millis
        return Effect.acquireUseRelease(
          Effect.sync(() => void pending.push(wakeAt)),
          () => sleep(duration),
          () =>
            Effect.sync(() => {
              const index = pending.indexOf(wakeAt)
              if (index >= 0) pending.splice(index, 1)
            })
        )
      })
    return pending
  })
)

/** The wake-up times of the fibers sleeping on the `TestClock` now (see `trackSleeps`). */
export const sleeps: Effect.Effect<ReadonlyArray<number>> = Effect.map(trackSleeps, (pending) => [...pending])

/**
 * Waits (yielding to other fibers) until some fiber sleeps on the `TestClock`, then moves the clock. Adjusting
 * before the sleeper has registered would let the sleep start after the jump and never end. A sleep that began
 * before the clock was tracked (see `trackSleeps`) cannot be seen: after 1,000 yields the clock is moved anyway,
 * since the sleeper has had every chance to get there.
 */
export const adjustWhenSleeping = (duration: Duration.Input) =>
  Effect.gen(function*() {
    const pending = yield* trackSleeps
    for (let i = 0; i < 1_000 && pending.length === 0; i++) yield* Effect.yieldNow
    return yield* TestClock.adjust(duration)
  })

/**
 * A clock that only moves when told: `spend(ms)` adds to what `now()` answers. For code that measures work on a
 * clock it is given (the paced scheduler's slice), so that a test says how long each piece of work "took".
 */
export const counterClock = () => {
  let now = 0
  return { now: () => now, spend: (ms: number) => void (now += ms) }
}

import { Effect } from "effect"
import { TestClock } from "effect/testing"

/**
 * Lets the other fibers run until they are parked (at a sleep on the `TestClock`, or waiting on something else),
 * then moves the clock. Adjusting before a sleeper has registered would let its sleep start after the jump and
 * never end. Effect 4's `TestClock` exposes no list of sleepers (Effect 3's `TestClock.sleeps`), so this yields a
 * fixed number of scheduler turns, which is more than any fiber in these tests needs to reach its sleep.
 */
export const adjustWhenSleeping = (duration: Parameters<typeof TestClock.adjust>[0]) =>
  Effect.andThen(Effect.forEach(Array.from({ length: 50 }), () => Effect.yieldNow, { discard: true }), TestClock.adjust(duration))

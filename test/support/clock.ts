import { Chunk, Effect, TestClock } from "effect"

/**
 * Waits (yielding to other fibers) until some fiber sleeps on the `TestClock`, then moves the clock. Adjusting
 * before the sleeper has registered would let the sleep start after the jump and never end.
 */
export const adjustWhenSleeping = (duration: Parameters<typeof TestClock.adjust>[0]) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1_000; i++) {
      if (Chunk.isNonEmpty(yield* TestClock.sleeps())) return yield* TestClock.adjust(duration)
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage("no fiber went to sleep on the TestClock")
  })

import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Scheduler, Stream } from "effect"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as ActorLoop from "../../src/rollouts/ActorLoop.js"
import * as Pacing from "../../src/rollouts/internal/pacing.js"
import { counterClock } from "../support/clock.js"

const answer = "<think>Run it.</think>\n<action>{\"command\": [\"python3\", \"-c\", \"print(1)\"]}</action>"
const testLayers = (script: ScriptedModel.Script) =>
  Layer.mergeAll(ScriptedModel.layer(script), Sandbox.layerTest(() => ({ stdout: "1\n" })), StateStore.layerMemory(), TrajectoryStore.layerMemory)

/** A probe on the event loop: one `setImmediate` a turn, `turns` times, logging "io"; resolves after the last. */
const probe = (log: Array<string>, turns: number) =>
  new Promise<void>((resolve) => {
    const tick = (left: number) => {
      log.push("io")
      if (left > 1) setImmediate(() => tick(left - 1))
      else resolve()
    }
    setImmediate(() => tick(turns))
  })

describe("paced scheduler queue", () => {
  it("runs queued work first in first out, a slice per turn of the loop, letting other work in between", async () => {
    const clock = counterClock()
    const schedule = Pacing.makeQueue({ sliceMs: 1, now: clock.now })
    const log: Array<string> = []
    for (let i = 1; i <= 6; i++) {
      schedule(() => {
        log.push(`t${i}`)
        clock.spend(0.5)
      })
    }
    await probe(log, 4)
    // Two tasks of 0.5 fill a 1 ms slice; the probe's turn comes between slices.
    expect(log).toEqual(["t1", "t2", "io", "t3", "t4", "io", "t5", "t6", "io", "io"])
  })

  it("a task longer than the slice runs whole, alone in its turn", async () => {
    const clock = counterClock()
    const schedule = Pacing.makeQueue({ sliceMs: 1, now: clock.now })
    const log: Array<string> = []
    schedule(() => {
      log.push("long")
      clock.spend(5)
    })
    schedule(() => log.push("next"))
    await probe(log, 2)
    expect(log).toEqual(["long", "io", "next", "io"])
  })

  it("a cancelled turn does not run (what MixedScheduler does when it runs the work itself)", async () => {
    const schedule = Pacing.makeQueue({ now: counterClock().now })
    const log: Array<string> = []
    const cancel = schedule(() => log.push("cancelled"))
    schedule(() => log.push("kept"))
    cancel()
    await probe(log, 1)
    expect(log).toEqual(["kept", "io"])
  })

  it("work queued while a slice runs waits for a later turn when the slice is spent", async () => {
    const clock = counterClock()
    const schedule = Pacing.makeQueue({ sliceMs: 1, now: clock.now })
    const log: Array<string> = []
    schedule(() => {
      log.push("a")
      clock.spend(1)
      schedule(() => log.push("queued by a"))
    })
    await probe(log, 2)
    expect(log).toEqual(["a", "io", "queued by a", "io"])
  })
})

describe("paced scheduler in Effect", () => {
  // Eight fibers that each yield (their work goes through the scheduler) and then spend 0.5 ms of the counter.
  const fibers = (log: Array<string>, clock: ReturnType<typeof counterClock>) =>
    Effect.forEach(
      Array.from({ length: 8 }, (_, i) => i),
      (i) =>
        Effect.andThen(
          Effect.yieldNow,
          Effect.sync(() => {
            log.push(`f${i}`)
            clock.spend(0.5)
          })
        ),
      { concurrency: "unbounded", discard: true }
    )

  it.live("Effect's default scheduler runs every ready fiber in one turn; the paced one lets the loop in every slice", () =>
    Effect.gen(function*() {
      const clock = counterClock()
      const unpaced: Array<string> = []
      const done = probe(unpaced, 3)
      yield* fibers(unpaced, clock)
      yield* Effect.promise(() => done)
      // All eight fibers ran before the probe's second turn.
      expect(unpaced.slice(0, unpaced.indexOf("f7") + 1).filter((entry) => entry === "io").length).toBeLessThanOrEqual(1)

      const paced: Array<string> = []
      const pacedDone = probe(paced, 8)
      yield* fibers(paced, clock).pipe(Effect.provideService(Scheduler.Scheduler, Pacing.make({ sliceMs: 1, now: clock.now })))
      yield* Effect.promise(() => pacedDone)
      const work = paced.filter((entry) => entry !== "io")
      expect(work).toEqual(["f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7"])
      // Between the first and the last fiber's work the loop turned at least three times: at most two 0.5 ms
      // fibers a slice.
      const between = paced.slice(paced.indexOf("f0"), paced.indexOf("f7") + 1).filter((entry) => entry === "io")
      expect(between.length).toBeGreaterThanOrEqual(3)
    }))
})

describe("ActorLoop.run, paced", () => {
  // it.live: under it.effect's TestClock scheduler `run` keeps that scheduler (see PacingReview.test.ts).
  it.live("concurrent episodes with a short slice run to the end: every step recorded, in order (whether they are paced: PacingReview)", () =>
    Effect.gen(function*() {
      const tasks = ["a", "b", "c", "d", "e", "f"].map((taskId) => ({ taskId, prompt: `task ${taskId}` }))
      const outcomes = yield* Stream.runCollect(
        ActorLoop.run(Stream.fromIterable(tasks), { concurrency: 4, group: 2, maxSteps: 3, sliceMs: 0.25 })
      )
      expect(outcomes.map((outcome) => outcome._tag)).toEqual(Array.from({ length: 12 }, () => "Recorded"))
      for (const { taskId } of tasks) {
        const records = yield* Stream.runCollect(TrajectoryStore.read(taskId))
        expect(records.map((record) => record.step)).toEqual([1, 2, 3, 4, 5, 6])
      }
    }).pipe(Effect.provide(testLayers(() => answer))))

  it.effect("pacedScheduler checks its options; the scheduler it gives runs episodes", () =>
    Effect.gen(function*() {
      const bad = yield* Effect.flip(ActorLoop.pacedScheduler({ sliceMs: -1 }))
      expect(bad.message).toBe("ActorLoop.pacedScheduler: sliceMs must be a number above 0, got -1")
      expect(() => ActorLoop.pacedSchedulerUnsafe({ slice: 1 } as unknown as ActorLoop.PacingOptions))
        .toThrow("ActorLoop.pacedScheduler: slice is not a known option")
      const episodes = yield* Effect.forEach(
        [{ taskId: "p1", prompt: "one" }, { taskId: "p2", prompt: "two" }],
        (task) => ActorLoop.episode(task, { maxSteps: 2 }),
        { concurrency: 2 }
      ).pipe(Effect.provideServiceEffect(Scheduler.Scheduler, ActorLoop.pacedScheduler({ sliceMs: 1 })))
      expect(episodes.map((episode) => episode.records.length)).toEqual([2, 2])
    }).pipe(Effect.provide(testLayers(() => answer))))

  it.effect("sliceMs must be a number above 0, named in the error", () =>
    Effect.gen(function*() {
      const zero = yield* Effect.flip(Stream.runCollect(ActorLoop.run(Stream.empty, { concurrency: 2, sliceMs: 0 })))
      expect(zero.message).toBe("ActorLoop: sliceMs must be a number above 0, got 0")
      const text = yield* Effect.flip(Stream.runCollect(ActorLoop.run(Stream.empty, { sliceMs: "1" as unknown as number })))
      expect(text.message).toBe(`ActorLoop: sliceMs must be a number, got "1"`)
    }).pipe(Effect.provide(testLayers([]))))
})

import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Scheduler, Stream } from "effect"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as ActorLoop from "../../src/rollouts/ActorLoop.js"

const answer = "<think>Run it.</think>\n<action>{\"command\": [\"python3\", \"-c\", \"print(1)\"]}</action>"
const storeLayers = Layer.mergeAll(Sandbox.layerTest(() => ({ stdout: "1\n" })), StateStore.layerMemory(), TrajectoryStore.layerMemory)

/** Runs two tasks through `ActorLoop.run` (two at a time) and answers the scheduler each model call ran on. */
const schedulersSeen = Effect.gen(function*() {
  const seen: Array<Scheduler.Scheduler> = []
  const tasks = ["a", "b"].map((taskId) => ({ taskId, prompt: `task ${taskId}` }))
  yield* Stream.runCollect(ActorLoop.run(Stream.fromIterable(tasks), { concurrency: 2 }).pipe(
    Stream.provide(ScriptedModel.layer(() => {
      seen.push(Fiber.getCurrent()!.getRef(Scheduler.Scheduler))
      return answer
    }))
  ))
  return seen
})

describe("paced scheduler review 2: ActorLoop.run keeps a scheduler the caller provided", () => {
  it.live("an asynchronous MixedScheduler of the caller's own (its own setImmediate) is kept, not replaced", () =>
    Effect.gen(function*() {
      let turns = 0
      const own = new Scheduler.MixedScheduler("async", (f) => {
        turns++
        const timer = setImmediate(f)
        return () => clearImmediate(timer)
      })
      const seen = yield* Effect.provideService(schedulersSeen, Scheduler.Scheduler, own)
      expect(seen).toEqual([own, own])
      expect(turns).toBeGreaterThan(0)
    }).pipe(Effect.provide(storeLayers)))

  it.live("the caller's own paced scheduler (ActorLoop.pacedScheduler, its sliceMs) is kept", () =>
    Effect.gen(function*() {
      const own = ActorLoop.pacedSchedulerUnsafe({ sliceMs: 5 })
      const seen = yield* Effect.provideService(schedulersSeen, Scheduler.Scheduler, own)
      expect(seen).toEqual([own, own])
    }).pipe(Effect.provide(storeLayers)))

  it.live("a run inside an episode of a paced run keeps the outer run's paced scheduler (one queue, not two)", () =>
    Effect.gen(function*() {
      const outerSeen: Array<Scheduler.Scheduler> = []
      const innerSeen: Array<ReadonlyArray<Scheduler.Scheduler>> = []
      const tasks = ["x", "y"].map((taskId) => ({ taskId, prompt: `task ${taskId}` }))
      yield* Stream.runCollect(ActorLoop.run(Stream.fromIterable(tasks), { concurrency: 2 }).pipe(
        Stream.provide(ScriptedModel.layer(() =>
          Effect.gen(function*() {
            outerSeen.push(Fiber.getCurrent()!.getRef(Scheduler.Scheduler))
            innerSeen.push(yield* schedulersSeen.pipe(Effect.provide(storeLayers), Effect.orDie))
            return answer
          })
        ))
      ))
      expect(outerSeen).toHaveLength(2)
      expect(outerSeen[1]).toBe(outerSeen[0])
      expect(innerSeen.flat().every((scheduler) => scheduler === outerSeen[0])).toBe(true)
    }).pipe(Effect.provide(storeLayers)))

  it.live("Effect's default scheduler is still replaced by a paced one", () =>
    Effect.gen(function*() {
      const outer = yield* Effect.service(Scheduler.Scheduler)
      const seen = yield* schedulersSeen
      expect(seen[0]).not.toBe(outer)
      expect(seen[1]).toBe(seen[0])
    }).pipe(Effect.provide(storeLayers)))
})

import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Scheduler, Stream } from "effect"
import { TestClock } from "effect/testing"
import { WorkflowEngine } from "effect/workflow"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as ActorLoop from "../../src/rollouts/ActorLoop.js"
import * as Durable from "../../src/rollouts/Durable.js"
import * as Pacing from "../../src/rollouts/internal/pacing.js"
import { counterClock } from "../support/clock.js"

const answer = "<think>Run it.</think>\n<action>{\"command\": [\"python3\", \"-c\", \"print(1)\"]}</action>"
const storeLayers = Layer.mergeAll(Sandbox.layerTest(() => ({ stdout: "1\n" })), StateStore.layerMemory(), TrajectoryStore.layerMemory)

/** Runs two tasks through `ActorLoop.run` and answers the scheduler in context and the one each model call ran on. */
const schedulersSeen = (concurrency: number) =>
  Effect.gen(function*() {
    const outer = yield* Effect.service(Scheduler.Scheduler)
    const seen: Array<Scheduler.Scheduler> = []
    const tasks = ["a", "b"].map((taskId) => ({ taskId, prompt: `task ${taskId}` }))
    yield* Stream.runCollect(ActorLoop.run(Stream.fromIterable(tasks), { concurrency }).pipe(
      Stream.provide(ScriptedModel.layer(() => {
        seen.push(Fiber.getCurrent()!.getRef(Scheduler.Scheduler))
        return answer
      }))
    ))
    return { outer, seen }
  })

/** Logs "io" once a turn of the event loop until `done()` says stop; resolves then. */
const probeUntil = (log: Array<string>, done: () => boolean) =>
  new Promise<void>((resolve) => {
    const tick = () => {
      log.push("io")
      if (done()) resolve()
      else setImmediate(tick)
    }
    setImmediate(tick)
  })

/** The most entries of work run between two turns of the probe. */
const mostBetweenTurns = (log: ReadonlyArray<string>): number => {
  let most = 0
  let run = 0
  for (const entry of log) {
    if (entry === "io") run = 0
    else most = Math.max(most, ++run)
  }
  return most
}

describe("paced scheduler review: one pump at a time", () => {
  it("work that queues more work while a slice runs does not start a second pump (no two slices in one turn)", async () => {
    const clock = counterClock()
    const schedule = Pacing.makeQueue({ sliceMs: 1, now: clock.now })
    const log: Array<string> = []
    let left = 4 * 6
    // Four chains of six tasks; each task fills a whole slice and queues its chain's next one (as a fiber that
    // yields queues its continuation, a fork its child, a semaphore release its waiter).
    const chain = (name: string, n: number): void => {
      schedule(() => {
        log.push(`${name}${n}`)
        left--
        clock.spend(1)
        if (n < 6) chain(name, n + 1)
      })
    }
    for (const name of ["a", "b", "c", "d"]) chain(name, 1)
    await probeUntil(log, () => left === 0)
    expect(log.filter((entry) => entry !== "io")).toHaveLength(24)
    // One slice a turn: a task that fills the slice runs alone between two turns of the loop.
    expect(mostBetweenTurns(log)).toBe(1)
  })

  it.live("fibers that yield repeatedly on the paced scheduler run at most a slice between turns of the loop", () =>
    Effect.gen(function*() {
      const clock = counterClock()
      const log: Array<string> = []
      let left = 8 * 5
      const probe = probeUntil(log, () => left === 0)
      yield* Effect.forEach(
        Array.from({ length: 8 }, (_, i) => i),
        (i) =>
          Effect.forEach(Array.from({ length: 5 }, (_, j) => j), (j) =>
            Effect.andThen(
              Effect.yieldNow,
              Effect.sync(() => {
                log.push(`f${i}.${j}`)
                left--
                clock.spend(0.5)
              })
            ), { discard: true }),
        { concurrency: "unbounded", discard: true }
      ).pipe(Effect.provideService(Scheduler.Scheduler, Pacing.make({ sliceMs: 1, now: clock.now })))
      yield* Effect.promise(() => probe)
      expect(log.filter((entry) => entry !== "io")).toHaveLength(40)
      // Two 0.5 ms pieces of work fill a 1 ms slice.
      expect(mostBetweenTurns(log)).toBeLessThanOrEqual(2)
    }))
})

describe("paced scheduler review: TestClock", () => {
  // TestClock's `adjust` waits for the work a wake starts only when that work goes through TestClock's scheduler
  // (it counts the tasks scheduled on it). Work on the paced scheduler is not counted: once it needs more than a
  // slice, `adjust` returns before it is done.
  it.effect("TestClock.adjust does not wait for woken work on a paced scheduler that needs more than a slice", () =>
    Effect.gen(function*() {
      const clock = counterClock()
      let done = 0
      const work = Effect.gen(function*() {
        yield* Effect.sleep("1 second")
        for (let i = 0; i < 5; i++) {
          yield* Effect.yieldNow
          clock.spend(1)
        }
        done++
      })
      yield* Effect.forkChild(
        Effect.provideService(work, Scheduler.Scheduler, Pacing.make({ sliceMs: 1, now: clock.now }))
      )
      yield* TestClock.adjust("1 second")
      // On TestClock's own scheduler `done` would be 1 here (see the next test); paced, the work is still queued.
      expect(done).toBe(0)
    }))

  it.effect("…so ActorLoop.run keeps a scheduler the caller provided (TestClock's) instead of pacing", () =>
    Effect.gen(function*() {
      const outer = yield* Effect.service(Scheduler.Scheduler)
      const seen: Array<Scheduler.Scheduler> = []
      const tasks = ["a", "b", "c"].map((taskId) => ({ taskId, prompt: `task ${taskId}` }))
      const fiber = yield* Effect.forkChild(Stream.runCollect(
        ActorLoop.run(Stream.fromIterable(tasks), { concurrency: 3, maxSteps: 2, sliceMs: 0.001 }).pipe(
          Stream.provide(ScriptedModel.layer(() => {
            seen.push(Fiber.getCurrent()!.getRef(Scheduler.Scheduler))
            return { text: answer, delay: "1 second" }
          }))
        )
      ))
      yield* TestClock.adjust("1 second")
      yield* TestClock.adjust("1 second")
      expect(seen.length).toBe(6)
      expect(seen.every((scheduler) => scheduler === outer)).toBe(true)
      for (const { taskId } of tasks) expect(yield* TrajectoryStore.count(taskId)).toBe(2)
      expect((yield* Fiber.join(fiber)).map((outcome) => outcome._tag)).toEqual(["Recorded", "Recorded", "Recorded"])
    }).pipe(Effect.provide(storeLayers)))

  it.live("ActorLoop.run still paces over Effect's default scheduler", () =>
    Effect.gen(function*() {
      const { outer, seen } = yield* schedulersSeen(2)
      expect(seen.length).toBe(2)
      expect(outer).toBeInstanceOf(Scheduler.MixedScheduler)
      expect(seen[0]).not.toBe(outer)
      expect(seen[0]).toBeInstanceOf(Scheduler.MixedScheduler)
      expect(seen[1]).toBe(seen[0])
    }).pipe(Effect.provide(storeLayers)))
})

describe("ActorLoop.run, one episode at a time", () => {
  it.live("is not paced: nothing to interleave, the caller's scheduler is kept", () =>
    Effect.gen(function*() {
      const { outer, seen } = yield* schedulersSeen(1)
      expect(seen).toEqual([outer, outer])
    }).pipe(Effect.provide(storeLayers)))
})

describe("paced scheduler review: Durable.actorLoop", () => {
  it.effect("Durable.ActorLoopOptions does not offer sliceMs, which Durable.actorLoop refuses", () =>
    Effect.gen(function*() {
      const options: Durable.ActorLoopOptions = { loop: "l" }
      // @ts-expect-error sliceMs is ActorLoop.run's (the paced scheduler), not a durable loop's option
      const paced: Durable.ActorLoopOptions = { loop: "l", sliceMs: 1 }
      const error = yield* Stream.runCollect(Durable.actorLoop(Stream.empty, { ...options, ...paced })).pipe(
        Effect.flip,
        Effect.provide(WorkflowEngine.layerMemory)
      )
      expect(error.message).toBe("Durable.actorLoop: sliceMs is not a known option")
    }))
})

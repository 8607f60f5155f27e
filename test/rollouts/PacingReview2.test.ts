import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, FileSystem, Layer, Scheduler, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as ActorLoop from "../../src/rollouts/ActorLoop.js"
import { record } from "../support/trajectories.js"

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

describe("paced scheduler review 2: the JSONL store's write-did-not-complete error, made only when needed", () => {
  const root = mkdtempSync(join(tmpdir(), "valet-rev2-"))
  afterAll(() => rmSync(root, { recursive: true, force: true }))

  it.live("a write stopped by a defect still answers every append it carried (none left waiting)", () =>
    Effect.gen(function*() {
      // The Node file system whose writes through an open `.jsonl` file die (a defect, not a failure).
      const layer = Layer.effect(
        FileSystem.FileSystem,
        Effect.map(FileSystem.FileSystem, (fs): FileSystem.FileSystem => ({
          ...fs,
          open: (path, options) =>
            Effect.map(fs.open(path, options), (file): FileSystem.File =>
              Object.assign(Object.create(file) as FileSystem.File, {
                writeAll: (buffer: Uint8Array) => path.endsWith(".jsonl") ? Effect.die(new Error("torn")) : file.writeAll(buffer)
              }))
        }))
      ).pipe(Layer.provide(NodeServices.layer))
      const exits = yield* Effect.forEach([1, 2, 3], (n) => Effect.exit(TrajectoryStore.append(record("torn", n))), {
        concurrency: "unbounded"
      }).pipe(
        Effect.provide(TrajectoryStore.layerFile({ root }).pipe(Layer.provide(layer))),
        Effect.timeout("5 seconds")
      )
      expect(exits).toHaveLength(3)
      // Whoever held the lock dies of the defect; the appends riding on its write fail with the store's error.
      const failures = exits.flatMap((exit) => exit._tag === "Failure" ? [String(exit.cause)] : ["success"])
      expect(failures.some((text) => text.includes("the write did not complete"))).toBe(true)
      expect(failures).not.toContain("success")
    }))
})

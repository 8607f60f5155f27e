/**
 * Issue 12, item 6: two writers to one trajectory file wrote duplicate step numbers with no warning (263 of 600
 * appends). A task's file now has one writer at a time: the second is refused with an error naming the first.
 */
import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Scope, Stream } from "effect"
import { spawn } from "node:child_process"
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs"
import { hostname, tmpdir } from "node:os"
import { join } from "node:path"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import { record } from "../support/trajectories.js"

const root = mkdtempSync(join(tmpdir(), "valet-trajectory-writers-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))
let roots = 0
const freshRoot = () => join(root, `r${++roots}`)

/** A store whose scope the test closes itself (a second process, as far as the file is concerned). */
const openStore = (dir: string) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    const store = yield* TrajectoryStore.makeFile({ root: dir }).pipe(
      Effect.provide(NodeServices.layer),
      Scope.provide(scope)
    )
    return { store, close: Scope.close(scope, Exit.void) }
  })

const stepsIn = (dir: string, taskId: string) =>
  readFileSync(join(dir, "raw", `${taskId}.jsonl`), "utf8").split("\n").filter((l) => l !== "").map((l) =>
    JSON.parse(l).step as number
  )

describe("reliability: one writer per trajectory file", () => {
  it.effect("two stores appending 300 records each to one task: no duplicate step, the second is refused", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const a = yield* openStore(dir)
      const b = yield* openStore(dir)
      const appendAll = (store: TrajectoryStore.Service) =>
        Effect.forEach(
          Array.from({ length: 300 }, (_, i) => i),
          (i) => Effect.exit(store.append(record("shared", i))),
          { concurrency: 4 }
        )
      const [fromA, fromB] = yield* Effect.all([appendAll(a.store), appendAll(b.store)], { concurrency: 2 })
      const written = [...fromA, ...fromB].filter(Exit.isSuccess).length
      const refused = [...fromA, ...fromB].filter(Exit.isFailure)
      const steps = stepsIn(dir, "shared")
      expect(new Set(steps).size).toBe(steps.length)
      expect(steps).toEqual(Array.from({ length: written }, (_, i) => i + 1))
      // One store wrote all 300; every append of the other was refused, naming the holder.
      expect(written).toBe(300)
      expect(refused).toHaveLength(300)
      const error = refused[0]!.cause.toString()
      expect(error).toContain("another TrajectoryStore in this process")
      expect(error).toContain("shared.jsonl.lock")
      yield* a.close
      yield* b.close
      expect(existsSync(join(dir, "raw", "shared.jsonl.lock"))).toBe(false)
    }))

  it.effect("the lock is given back when the writer's scope closes: the next writer continues the numbering", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const first = yield* openStore(dir)
      yield* first.store.append(record("handover", 1))
      const second = yield* openStore(dir)
      expect((yield* Effect.flip(second.store.append(record("handover", 2)))).operation).toBe("lock")
      yield* first.close
      expect((yield* second.store.append(record("handover", 2))).step).toBe(2)
      yield* second.close
      expect(stepsIn(dir, "handover")).toEqual([1, 2])
    }))

  it.effect("a lock held by another live process is refused with its pid; one left by a dead process is taken over", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      mkdirSync(join(dir, "raw"), { recursive: true })
      const lockPath = join(dir, "raw", "other.jsonl.lock")
      const child = spawn("sleep", ["30"], { stdio: "ignore" })
      yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
      writeFileSync(lockPath, JSON.stringify({ pid: child.pid, host: hostname(), store: "x", since: 0 }))
      const store = yield* openStore(dir)
      const refused = yield* Effect.flip(store.store.append(record("other", 1)))
      expect(refused.message).toContain(`process ${child.pid} on ${hostname()}`)
      expect(readFileSync(lockPath, "utf8")).toContain(`"pid":${child.pid}`)

      // The holder dies (kill -9): its lock is stale, and the next append takes it over.
      child.kill("SIGKILL")
      yield* Effect.promise(() => new Promise((resolve) => child.once("exit", resolve)))
      expect((yield* store.store.append(record("other", 1))).step).toBe(1)
      expect(JSON.parse(readFileSync(lockPath, "utf8")).pid).toBe(process.pid)
      yield* store.close
      expect(existsSync(lockPath)).toBe(false)
    }))

  it.effect("a reader sees whole lines only while another process is mid-write", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const writer = yield* openStore(dir)
      yield* writer.store.append(record("live", 1))
      yield* writer.store.append(record("live", 2))
      // Half a line, as a writer in another process leaves it between two writes.
      appendFileSync(join(dir, "raw", "live.jsonl"), "{\"task_id\":\"live\",\"st")
      const reader = yield* openStore(dir)
      const steps = yield* Stream.runCollect(reader.store.read("live")).pipe(Effect.map((rs) => rs.map((r) => r.step)))
      expect(steps).toEqual([1, 2])
      expect(yield* reader.store.count("live")).toBe(2)
      // Reading took no lock, so the writer is undisturbed.
      expect(existsSync(join(dir, "raw", "live.jsonl.lock"))).toBe(true)
      yield* reader.close
      yield* writer.close
    }))

  it.effect("the layer holds its locks for as long as it is provided", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const layer = TrajectoryStore.layerFile({ root: dir }).pipe(Layer.provide(NodeServices.layer))
      yield* TrajectoryStore.append(record("scoped", 1)).pipe(
        Effect.tap(() => Effect.sync(() => expect(existsSync(join(dir, "raw", "scoped.jsonl.lock"))).toBe(true))),
        Effect.provide(layer)
      )
      expect(existsSync(join(dir, "raw", "scoped.jsonl.lock"))).toBe(false)
    }))
})

import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, FileSystem, Layer, PlatformError, Schema, Stream } from "effect"
import { appendFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as RecordJson from "../../src/environment/internal/recordJson.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import { record } from "../support/trajectories.js"

const collect = (taskId: string) => Stream.runCollect(TrajectoryStore.read(taskId))

const root = mkdtempSync(join(tmpdir(), "valet-trajectories-"))
let roots = 0
const freshRoot = () => join(root, `r${++roots}`)

/** The Node file system with the writes through an open `.jsonl` file made by `writeAll`. */
const jsonlWrites = (
  writeAll: (file: FileSystem.File, buffer: Uint8Array) => Effect.Effect<void, PlatformError.PlatformError>
) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (fs): FileSystem.FileSystem => ({
      ...fs,
      open: (path, options) =>
        Effect.map(fs.open(path, options), (file): FileSystem.File =>
          Object.assign(Object.create(file) as FileSystem.File, {
            writeAll: (buffer: Uint8Array) => (path.endsWith(".jsonl") ? writeAll(file, buffer) : file.writeAll(buffer))
          }))
    }))
  ).pipe(Layer.provide(NodeServices.layer))
const fileLayer = (dir: string) => TrajectoryStore.layerFile({ root: dir }).pipe(Layer.provide(NodeServices.layer))

const contract = (name: string, makeLayer: () => Layer.Layer<TrajectoryStore.TrajectoryStore, TrajectoryStore.TrajectoryStoreError>) =>
  describe(`TrajectoryStore conformance [${name}]`, () => {
    it.effect("appends records with step numbers and reads them back schema-checked", () =>
      Effect.gen(function*() {
        const first = yield* TrajectoryStore.append(record("task-a", 1))
        const second = yield* TrajectoryStore.append(record("task-a", 2))
        yield* TrajectoryStore.append(record("task-b", 3))
        expect([first.step, second.step]).toEqual([1, 2])
        const records = yield* collect("task-a")
        expect(records).toEqual([{ ...record("task-a", 1), step: 1 }, { ...record("task-a", 2), step: 2 }])
        expect(yield* TrajectoryStore.count("task-b")).toBe(1)
        expect(yield* collect("nobody")).toEqual([])
      }).pipe(Effect.provide(makeLayer())))

    it.effect("numbers steps 1..20 under 20 concurrent appends to one task", () =>
      Effect.gen(function*() {
        const appended = yield* Effect.forEach(Array.from({ length: 20 }, (_, i) => i), (i) => TrajectoryStore.append(record("busy", i)), {
          concurrency: "unbounded"
        })
        expect(appended.map((r) => r.step).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1))
        const read = yield* collect("busy")
        expect(read.map((r) => r.step)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1))
        expect(new Set(read.map((r) => r.prompt)).size).toBe(20)
      }).pipe(Effect.provide(makeLayer())))

    it.effect("refuses a task id that is not a safe file name, and a record that breaks the schema", () =>
      Effect.gen(function*() {
        const unsafe = yield* Effect.flip(TrajectoryStore.append(record("../../etc/passwd")))
        expect(unsafe).toMatchObject({ _tag: "TrajectoryStoreError", operation: "append" })
        expect(unsafe.message).toContain("not a safe name")
        const bad = { ...record("t"), metrics: { actorLatencySec: Number.NaN, sandboxFailed: false } }
        const invalid = yield* Effect.flip(TrajectoryStore.append(bad))
        expect(invalid.message).toContain("actorLatencySec")
        expect(invalid.message).toContain("metrics.actorLatencySec must be a finite number, got NaN")
        expect(yield* TrajectoryStore.count("t")).toBe(0)
      }).pipe(Effect.provide(makeLayer())))
  })

contract("memory", () => TrajectoryStore.layerMemory)
contract("file", () => fileLayer(freshRoot()))

describe("TrajectoryStore [file] specifics", () => {
  it.effect("writes snake-case JSON lines to <root>/raw/<task_id>.jsonl", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      yield* TrajectoryStore.append(record("snake", 7)).pipe(Effect.provide(fileLayer(dir)))
      const lines = readFileSync(join(dir, "raw", "snake.jsonl"), "utf8").split("\n")
      expect(lines).toHaveLength(2)
      expect(lines[1]).toBe("")
      const json = JSON.parse(lines[0]!)
      expect(Object.keys(json)).toEqual([
        "task_id", "step", "prompt", "state_before", "state_after", "model_output", "sandbox_result", "reward", "metrics"
      ])
      expect(json.model_output).toMatchObject({ state_update: null, parse_error: null })
      expect(json.state_after).toMatchObject({ open_issues: ["issue 7"], next_focus: "next" })
      expect(json.sandbox_result).toMatchObject({ exit_code: 0, timed_out: false, duration_ms: 12.5, changed_files: [] })
      expect(json.metrics).toEqual({ actor_latency_sec: 0.25, sandbox_failed: false, input_tokens: 10, output_tokens: 20 })
      expect(json.reward).toBeNull()
    }))

  it.effect("continues the numbering of an existing file after a restart", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      yield* TrajectoryStore.append(record("again", 1)).pipe(Effect.provide(fileLayer(dir)))
      const next = yield* TrajectoryStore.append(record("again", 2)).pipe(Effect.provide(fileLayer(dir)))
      expect(next.step).toBe(2)
    }))

  it.effect("repairs a torn last line on open: moved aside, never glued to the next record", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      yield* Effect.forEach([1, 2], (n) => TrajectoryStore.append(record("torn", n)), { discard: true }).pipe(
        Effect.provide(fileLayer(dir))
      )
      const path = join(dir, "raw", "torn.jsonl")
      const third = JSON.stringify({ task_id: "torn", step: 3, prompt: "half" })
      appendFileSync(path, third.slice(0, 25)) // the crash
      const appended = yield* TrajectoryStore.append(record("torn", 4)).pipe(Effect.provide(fileLayer(dir)))
      expect(appended.step).toBe(3)
      expect(readFileSync(`${path}.torn`, "utf8")).toBe(third.slice(0, 25) + "\n")
      const records = yield* collect("torn").pipe(Effect.provide(fileLayer(dir)))
      expect(records.map((r) => [r.step, r.prompt])).toEqual([[1, "prompt 1"], [2, "prompt 2"], [3, "prompt 4"]])
    }))

  it.effect("completes a last record that only lacks its newline", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      yield* TrajectoryStore.append(record("newline", 1)).pipe(Effect.provide(fileLayer(dir)))
      const path = join(dir, "raw", "newline.jsonl")
      writeFileSync(path, readFileSync(path, "utf8").trimEnd())
      const appended = yield* TrajectoryStore.append(record("newline", 2)).pipe(Effect.provide(fileLayer(dir)))
      expect(appended.step).toBe(2)
      expect(existsSync(`${path}.torn`)).toBe(false)
      expect((yield* collect("newline").pipe(Effect.provide(fileLayer(dir)))).map((r) => r.step)).toEqual([1, 2])
    }))

  it.effect("a line that is not a record fails the read with the file and line number", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const path = join(dir, "raw", "bad.jsonl")
      yield* TrajectoryStore.append(record("bad", 1)).pipe(Effect.provide(fileLayer(dir)))
      appendFileSync(path, "\n{\"task_id\": \"bad\", \"step\": \"two\"}\n")
      const error = yield* Effect.flip(collect("bad").pipe(Effect.provide(fileLayer(dir))))
      expect(error).toMatchObject({ _tag: "TrajectoryStoreError", operation: "read", path, line: 3 })
      expect(error.message).toContain(`${path} line 3 is not a trajectory record`)
      expect(error.message).toContain(`step must be`)
      expect(error.message).toContain(`got "two"`)
    }))

  it.effect("a line that is not JSON fails the read with the file and line number; the records before it stream first", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const path = join(dir, "raw", "garbled.jsonl")
      yield* Effect.forEach([1, 2], (n) => TrajectoryStore.append(record("garbled", n)), { discard: true }).pipe(
        Effect.provide(fileLayer(dir))
      )
      appendFileSync(path, "{not json\n")
      const seen: Array<number> = []
      const error = yield* Effect.flip(
        Stream.runForEach(TrajectoryStore.read("garbled"), (r) => Effect.sync(() => seen.push(r.step))).pipe(Effect.provide(fileLayer(dir)))
      )
      expect(seen).toEqual([1, 2])
      expect(error).toMatchObject({ _tag: "TrajectoryStoreError", operation: "read", path, line: 3 })
      expect(error.message).toContain(`${path} line 3 is not JSON`)
    }))
})

describe("TrajectoryStore tokens: packed beside the step", () => {
  const Ids = Schema.Array(Schema.Int.check(Schema.isBetween({ minimum: -2147483648, maximum: 2147483647 })))
  const Logprobs = Schema.Array(Schema.NullOr(Schema.Finite))

  it.prop(
    "encodeTokens then decodeTokens: ids exactly, log-probabilities as float32 (null as NaN), through a JSON line",
    { promptIds: Ids, completionIds: Ids, completionLogprobs: Schema.Array(Schema.Finite), promptLogprobs: Logprobs },
    ({ completionIds, completionLogprobs, promptIds, promptLogprobs }) => {
      const packed = TrajectoryStore.encodeTokens({ promptIds, completionIds, completionLogprobs, promptLogprobs })!
      const encoded = Schema.encodeSync(TrajectoryStore.StepTokens)(packed)
      const back = TrajectoryStore.decodeTokens(Schema.decodeUnknownSync(TrajectoryStore.StepTokens)(JSON.parse(JSON.stringify(encoded))))
      expect(Array.from(back.promptIds!)).toEqual(promptIds)
      expect(Array.from(back.completionIds!)).toEqual(completionIds)
      expect(Array.from(back.completionLogprobs!)).toEqual(completionLogprobs.map(Math.fround))
      expect(Array.from(back.promptLogprobs!)).toEqual(promptLogprobs.map((lp) => (lp === null ? Number.NaN : Math.fround(lp))))
    }
  )

  it.effect("a record keeps its fields and gains `tokens` (snake case, base64 strings); nothing to store is no key", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const tokens = TrajectoryStore.encodeTokens({ promptIds: [785, 6722], completionIds: [12095, 13], completionLogprobs: [-0.5, -0.25] })!
      expect(TrajectoryStore.encodeTokens({})).toBeUndefined()
      yield* TrajectoryStore.append({ ...record("tok", 1), tokens }).pipe(Effect.provide(fileLayer(dir)))
      const json = JSON.parse(readFileSync(join(dir, "raw", "tok.jsonl"), "utf8"))
      expect(Object.keys(json)).toEqual([
        "task_id", "step", "prompt", "state_before", "state_after", "model_output", "sandbox_result", "reward", "metrics", "tokens"
      ])
      // int32 little-endian: 785 = 0x311, 6722 = 0x1a42.
      expect(json.tokens).toEqual({
        prompt_ids: Buffer.from([0x11, 0x03, 0, 0, 0x42, 0x1a, 0, 0]).toString("base64"),
        completion_ids: Buffer.from(new Int32Array([12095, 13]).buffer).toString("base64"),
        completion_logprobs: Buffer.from(new Float32Array([-0.5, -0.25]).buffer).toString("base64")
      })
      const [read] = yield* collect("tok").pipe(Effect.provide(fileLayer(dir)))
      expect(Array.from(TrajectoryStore.decodeTokens(read!.tokens!).completionIds!)).toEqual([12095, 13])
    }))

  it.effect("a `tokens` field that is not packed 4-byte values fails the read naming the field", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const path = join(dir, "raw", "badtok.jsonl")
      yield* TrajectoryStore.append(record("badtok", 1)).pipe(Effect.provide(fileLayer(dir)))
      const line = JSON.parse(readFileSync(path, "utf8"))
      appendFileSync(path, JSON.stringify({ ...line, step: 2, tokens: { completion_ids: "AAA=" } }) + "\n")
      const error = yield* Effect.flip(collect("badtok").pipe(Effect.provide(fileLayer(dir))))
      expect(error).toMatchObject({ operation: "read", line: 2 })
      expect(error.message).toContain("completion_ids: expected base64 of 4-byte little-endian values")
    }))
})

describe("TrajectoryStore [file] per-append cost", () => {
  /**
   * The Node file system, counting how often a `.jsonl` file is opened, written through an open file (`writeAll`)
   * or written whole (`writeFileString`).
   */
  const counting = () => {
    const counts = { opens: 0, wholeWrites: 0, writes: 0 }
    const layer = Layer.effect(
      FileSystem.FileSystem,
      Effect.map(FileSystem.FileSystem, (fs): FileSystem.FileSystem => ({
        ...fs,
        open: (path, options) => {
          if (!path.endsWith(".jsonl")) return fs.open(path, options)
          counts.opens++
          // The file as opened, its `writeAll` counted (its other methods its own, through the prototype).
          return Effect.map(fs.open(path, options), (file): FileSystem.File =>
            Object.assign(Object.create(file) as FileSystem.File, {
              writeAll: (buffer: Uint8Array) => {
                counts.writes++
                return file.writeAll(buffer)
              }
            }))
        },
        writeFileString: (path, data, options) => {
          if (path.endsWith(".jsonl")) counts.wholeWrites++
          return fs.writeFileString(path, data, options)
        }
      }))
    ).pipe(Layer.provide(NodeServices.layer))
    return { counts, layer }
  }
  /** File descriptors of this process open on files under `dir` (Linux: /proc/self/fd). */
  const fdsUnder = (dir: string) =>
    readdirSync("/proc/self/fd").filter((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`).startsWith(dir)
      } catch {
        return false // the directory's own descriptor, closed as we listed
      }
    }).length

  it.effect("a task's file is opened once for its records, not opened, written and closed per record", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const { counts, layer } = counting()
      yield* Effect.forEach([1, 2, 3, 4, 5, 6], (n) => TrajectoryStore.append(record("kept", n)), { discard: true }).pipe(
        Effect.provide(TrajectoryStore.layerFile({ root: dir }).pipe(Layer.provide(layer)))
      )
      expect(counts).toEqual({ opens: 1, wholeWrites: 0, writes: 6 })
      const lines = readFileSync(join(dir, "raw", "kept.jsonl"), "utf8").trimEnd().split("\n")
      expect(lines.map((line) => JSON.parse(line).step)).toEqual([1, 2, 3, 4, 5, 6])
    }))

  it.effect("appends asked while a line is being written share one write, in the order asked (a group's members)", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const { counts, layer } = counting()
      // Eight members finishing their steps at once; the fourth's record breaks the schema.
      const bad = { ...record("group", 4), metrics: { actorLatencySec: Number.NaN, sandboxFailed: false } }
      const results = yield* Effect.forEach(
        [1, 2, 3, 4, 5, 6, 7, 8],
        (n) => Effect.result(TrajectoryStore.append(n === 4 ? bad : record("group", n))),
        { concurrency: "unbounded" }
      ).pipe(Effect.provide(TrajectoryStore.layerFile({ root: dir }).pipe(Layer.provide(layer))))
      // One write for the seven good records (each wrote its own: seven); the refused one failed alone, no step taken.
      expect(counts).toEqual({ opens: 1, wholeWrites: 0, writes: 1 })
      expect(results.map((r) => (r._tag === "Success" ? r.success.step : r.failure.message.includes("actorLatencySec")))).toEqual(
        [1, 2, 3, true, 4, 5, 6, 7]
      )
      const lines = readFileSync(join(dir, "raw", "group.jsonl"), "utf8").trimEnd().split("\n").map((line) => JSON.parse(line))
      expect(lines.map((line) => [line.step, line.prompt])).toEqual(
        [1, 2, 3, 5, 6, 7, 8].map((n, i) => [i + 1, record("group", n).prompt])
      )
    }))

  it.effect("a write that fails fails every append it carried, naming the file; the next append writes and numbers anew", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      // The Node file system whose first write through an open `.jsonl` file fails (a full disk).
      let failures = 1
      const layer = jsonlWrites((file, buffer) =>
        failures-- > 0
          ? Effect.fail(PlatformError.systemError({ _tag: "Unknown", module: "FileSystem", method: "writeAll", description: "no space left on device" }))
          : file.writeAll(buffer)
      )
      yield* Effect.gen(function*() {
        const failed = yield* Effect.forEach([1, 2, 3], (n) => Effect.flip(TrajectoryStore.append(record("full", n))), { concurrency: "unbounded" })
        for (const error of failed) {
          expect(error).toMatchObject({ _tag: "TrajectoryStoreError", operation: "append", taskId: "full" })
          expect(error.message).toContain(join(dir, "raw", "full.jsonl"))
          expect(error.message).toContain("no space left on device")
        }
        expect((yield* TrajectoryStore.append(record("full", 4))).step).toBe(1)
      }).pipe(Effect.provide(TrajectoryStore.layerFile({ root: dir }).pipe(Layer.provide(layer))))
      const lines = readFileSync(join(dir, "raw", "full.jsonl"), "utf8").trimEnd().split("\n").map((line) => JSON.parse(line))
      expect(lines.map((line) => [line.step, line.prompt])).toEqual([[1, "prompt 4"]])
    }))

  it.live("a write stopped by a defect still answers every append it carried (none left waiting)", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      // Writes through an open `.jsonl` file die (a defect, not a failure).
      const layer = jsonlWrites(() => Effect.die(new Error("torn")))
      const exits = yield* Effect.forEach([1, 2, 3], (n) => Effect.exit(TrajectoryStore.append(record("torn", n))), {
        concurrency: "unbounded"
      }).pipe(
        Effect.provide(TrajectoryStore.layerFile({ root: dir }).pipe(Layer.provide(layer))),
        Effect.timeout("5 seconds")
      )
      expect(exits).toHaveLength(3)
      // Whoever held the lock dies of the defect; the appends riding on its write fail with the store's error.
      const failures = exits.flatMap((exit) => exit._tag === "Failure" ? [String(exit.cause)] : ["success"])
      expect(failures.some((text) => text.includes("the write did not complete"))).toBe(true)
      expect(failures).not.toContain("success")
    }))

  it.effect("an append interrupted while it waits for the task's write is not written; the next one takes its step", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* TrajectoryStore.makeFile({ root: dir })
        // The first append opens the file; the second waits for it, and is interrupted while it waits.
        const first = yield* Effect.forkChild(store.append(record("waits", 1)), { startImmediately: true })
        const second = yield* Effect.forkChild(store.append(record("waits", 2)), { startImmediately: true })
        yield* Fiber.interrupt(second)
        expect((yield* Fiber.join(first)).step).toBe(1)
        expect((yield* store.append(record("waits", 3))).step).toBe(2)
      })).pipe(Effect.provide(NodeServices.layer))
      const lines = readFileSync(join(dir, "raw", "waits.jsonl"), "utf8").trimEnd().split("\n").map((line) => JSON.parse(line))
      expect(lines.map((line) => [line.step, line.prompt])).toEqual([[1, "prompt 1"], [2, "prompt 3"]])
    }))

  it.effect("keeps at most 64 task files open (the oldest idle one closed), and none once the store is closed", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const raw = join(dir, "raw")
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* TrajectoryStore.makeFile({ root: dir })
        yield* Effect.forEach(Array.from({ length: 80 }, (_, i) => i), (i) => store.append(record(`many-${i}`, i)), {
          concurrency: 8,
          discard: true
        })
        expect(fdsUnder(raw)).toBe(64)
        // A closed task opens again, and its numbering goes on.
        expect((yield* store.append(record("many-0", 99))).step).toBe(2)
        expect(fdsUnder(raw)).toBe(64)
      })).pipe(Effect.provide(NodeServices.layer))
      expect(fdsUnder(raw)).toBe(0)
    }))

  it.effect("more appends in flight than the cap: no file is lost track of (all closed with the store), the count back to 64 at the next open", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const raw = join(dir, "raw")
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* TrajectoryStore.makeFile({ root: dir })
        yield* Effect.forEach(Array.from({ length: 300 }, (_, i) => i), (i) => store.append(record(`burst-${i}`, i)), {
          concurrency: 200,
          discard: true
        })
        // One open after the burst makes room: back to the cap.
        yield* store.append(record("after", 1))
        expect(fdsUnder(raw)).toBe(64)
      })).pipe(Effect.provide(NodeServices.layer))
      expect(fdsUnder(raw)).toBe(0)
    }))
})

describe("TrajectoryStore.encode", () => {
  it.effect("an appended record's JSON is the encoding the store wrote, not encoded again; another record is encoded", () =>
    Effect.gen(function*() {
      const dir = freshRoot()
      const appended = yield* TrajectoryStore.append(record("enc", 1)).pipe(Effect.provide(fileLayer(dir)))
      const line = JSON.parse(readFileSync(join(dir, "raw", "enc.jsonl"), "utf8"))
      const encoded = TrajectoryStore.encode(appended)
      expect(encoded).toEqual(line)
      expect(TrajectoryStore.encode(appended)).toBe(encoded)
      const copy = { ...appended }
      expect(TrajectoryStore.encode(copy)).toEqual(line)
      expect(TrajectoryStore.encode(copy)).not.toBe(encoded)
    }))
})

describe("TrajectoryStore: a record's JSON without the schema walk (internal/recordJson.ts)", () => {
  const bySchema = Schema.encodeSync(TrajectoryStore.TrajectoryRecord)
  const tokens = TrajectoryStore.encodeTokens({ promptIds: [1, 2], completionIds: [3], completionLogprobs: [-0.5] })!
  const full: TrajectoryStore.TrajectoryRecord = {
    ...record("full", 3),
    step: 3,
    rewardParts: [{ name: "tests", value: 1, weight: 0.5 }, { name: "judge", value: null, weight: 0.5, error: { reason: "timeout", message: "slow" } }],
    reward: 0.5,
    metrics: { actorLatencySec: 0.2, sandboxFailed: false, inputTokens: 60, outputTokens: 40, finishReason: "stop", model: "m", sandboxDurationSec: 0.001, sandboxError: "x" },
    sessionId: "s",
    createdAt: 1_700_000_000_000,
    tokens,
    episodeId: "e",
    episodeStep: 3,
    groupId: "g",
    seed: 102,
    episodeEnd: "max_steps",
    episodeReward: null
  }

  it("the records the actor loop writes take the fast path, and it writes the schema's text, key for key in order", () => {
    for (const value of [{ ...record("plain", 1), step: 1 }, full, { ...full, modelOutput: { ...full.modelOutput, parseErrorDetail: "bad" } }]) {
      const fast = RecordJson.encodeRecord(value)
      expect(fast).toBeDefined()
      expect(JSON.stringify(fast)).toBe(JSON.stringify(bySchema(value)))
    }
    // Key order in the input does not matter: the line's order is the schema's.
    const reversed = Object.fromEntries(Object.entries(full).reverse())
    expect(JSON.stringify(RecordJson.encodeRecord(reversed))).toBe(JSON.stringify(bySchema(full)))
  })

  it("what the schema would refuse, or the fast path does not know, is left to the schema", () => {
    const unusual: ReadonlyArray<unknown> = [
      { ...full, step: 0 },
      { ...full, metrics: { ...full.metrics, actorLatencySec: Number.NaN } },
      { ...full, sandboxResult: { ...full.sandboxResult!, error: "timeout" } },
      { ...full, sandboxResult: { ...full.sandboxResult!, isolation: "vm" } },
      { ...full, tokens: { completionIds: "AAA=" } },
      { ...full, episodeEnd: "later" },
      { ...full, stateAfter: { ...full.stateAfter, goals: [1] } },
      { ...full, modelOutput: { raw: "r", think: null, parseError: null, stateUpdate: null } },
      // A sparse array: the hole is not skipped (it would be written as null, a line no reader decodes).
      // eslint-disable-next-line no-sparse-arrays
      { ...full, rewardParts: [, full.rewardParts![0]] }
    ]
    for (const value of unusual) expect(RecordJson.encodeRecord(value)).toBeUndefined()
  })

  it.prop("any record: the fast path answers the schema's text, or leaves it to the schema", { value: TrajectoryStore.TrajectoryRecord }, ({ value }) => {
    const fast = RecordJson.encodeRecord(value)
    if (fast !== undefined) expect(JSON.stringify(fast)).toBe(JSON.stringify(bySchema(value)))
  }, { arbitrary: { runs: 500 } })
})

afterAll(() => rmSync(root, { recursive: true, force: true }))

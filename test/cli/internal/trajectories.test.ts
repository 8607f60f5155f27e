import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer, PlatformError, Schema, Sink, Stdio } from "effect"
import { CliOutput, Command } from "effect/cli"
import { parquetReadObjects } from "hyparquet"
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describeFailure } from "../../../src/cli/internal/main.js"
import { valet, version } from "../../../src/cli/internal/root.js"
import { skippedText } from "../../../src/cli/internal/trajectories.js"
import * as StateStore from "../../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../../src/environment/TrajectoryStore.js"
import * as Export from "../../../src/rollouts/Export.js"

const dir = mkdtempSync(join(tmpdir(), "valet-cli-trajectories-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const step = (taskId: string, raw: string, fields: Partial<TrajectoryStore.NewRecord> = {}): TrajectoryStore.NewRecord => ({
  taskId,
  prompt: `Do ${taskId}.`,
  stateBefore: StateStore.empty,
  stateAfter: StateStore.empty,
  modelOutput: { raw, think: null, action: null, stateUpdate: null, parseError: null },
  sandboxResult: null,
  reward: null,
  metrics: { actorLatencySec: 0.1, sandboxFailed: true },
  ...fields
})

/**
 * A store as `valet actor-loop --group 2 --max-steps 2` leaves it: task g, one group of two complete episodes and one
 * interrupted; task h, a plain step; then a corrupt line in g's file.
 */
const makeStore = (root: string) =>
  Effect.gen(function*() {
    for (
      const record of [
        step("g", "e1 s1", { episodeId: "e1", episodeStep: 1, groupId: "G", seed: 1, reward: 0 }),
        step("g", "e2 s1", { episodeId: "e2", episodeStep: 1, groupId: "G", seed: 2, reward: 1, episodeEnd: "done", episodeReward: 1 }),
        step("g", "e1 s2", { episodeId: "e1", episodeStep: 2, groupId: "G", seed: 1, reward: 0, episodeEnd: "max_steps", episodeReward: 0 }),
        step("g", "e3 s1", { episodeId: "e3", episodeStep: 1, groupId: "G", seed: 3, reward: 0 }),
        step("h", "plain", { reward: 1 })
      ]
    ) yield* TrajectoryStore.append(record)
  }).pipe(
    Effect.scoped,
    Effect.provide(TrajectoryStore.layerFile({ root }).pipe(Layer.provide(NodeServices.layer))),
    Effect.andThen(Effect.sync(() => appendFileSync(join(root, "raw", "g.jsonl"), "{\"task_id\": \"g\", oops\n")))
  )

/** Runs `valet …` in process, keeping what it writes to stdout and stderr. */
const valetRun = (args: ReadonlyArray<string>, stdoutSink?: Stdio.Stdio["stdout"]) =>
  Effect.gen(function*() {
    const stdout: Array<Uint8Array> = []
    const stderr: Array<string> = []
    const text = (chunk: string | Uint8Array) => (typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk)
    const stdio = Stdio.layerTest({
      stdout: stdoutSink ?? (() => Sink.forEach((chunk: string | Uint8Array) => Effect.sync(() => void stdout.push(text(chunk))))),
      stderr: () => Sink.forEach((chunk: string | Uint8Array) => Effect.sync(() => void stderr.push(new TextDecoder().decode(text(chunk)))))
    })
    const exit = yield* Command.runWith(valet, { version })(args).pipe(
      Effect.provide(CliOutput.layerPresenter({ present: () => Effect.void })),
      Effect.provide(stdio),
      Effect.provide(NodeServices.layer),
      Effect.exit
    )
    return { exit, stdout: Buffer.concat(stdout), stderr: stderr.join("").split("\n").filter((line) => line !== "") }
  })

const decodeGrpo = Schema.decodeUnknownSync(Schema.fromJsonString(Export.GrpoRow))
const decodeSft = Schema.decodeUnknownSync(Schema.fromJsonString(Export.SftChatRow))

const readParquet = (bytes: Buffer) =>
  Effect.promise(() => parquetReadObjects({ file: new Uint8Array(bytes).buffer })).pipe(
    Effect.map((rows) => JSON.parse(JSON.stringify(rows, (_, value) => (typeof value === "bigint" ? Number(value) : value)))))

describe("valet trajectories export", () => {
  it.live("--format grpo --out: a group's complete episodes to the file; the corrupt line and what was left out on stderr", () =>
    Effect.gen(function*() {
      const root = join(dir, "grpo")
      yield* makeStore(root)
      const out = join(dir, "grpo.jsonl")
      const { exit, stderr, stdout } = yield* valetRun(["trajectories", "export", "--format", "grpo", "--trajectories", root, "--out", out])
      expect(exit._tag).toBe("Success")
      expect(stdout.length).toBe(0)
      const rows = readFileSync(out, "utf8").trimEnd().split("\n").map((line) => decodeGrpo(line))
      expect(rows.map((row) => [row.extra_info.episode_id, row.extra_info.episode_step, row.reward, row.group_size])).toEqual([
        ["e1", 1, 0, 2],
        ["e1", 2, 0, 2],
        ["e2", 1, 1, 2]
      ])
      expect(stderr).toEqual([
        expect.stringMatching(new RegExp(`^skipped ${join(root, "raw", "g.jsonl")}:5: not JSON \\(`)),
        `exported 3 rows (grpo) from ${root} to ${out}; skipped 1 corrupt line, 1 interrupted episode (1 record, no episode_end), ` +
        "1 record outside any group (no group_id: run with --group)"
      ])
    }))

  it.live("JSONL to stdout by default; --task and --min-reward filter", () =>
    Effect.gen(function*() {
      const root = join(dir, "stdout")
      yield* makeStore(root)
      const all = yield* valetRun(["trajectories", "export", "--format", "sft-chat", "--trajectories", root])
      const contents = (bytes: Buffer) => bytes.toString("utf8").trimEnd().split("\n").map((line) => decodeSft(line).messages[1]!.content)
      expect(contents(all.stdout)).toEqual(["e1 s1", "e2 s1", "e1 s2", "e3 s1", "plain"])
      expect(all.stderr.at(-1)).toBe(`exported 5 rows (sft-chat) from ${root} to stdout; skipped 1 corrupt line`)
      const filtered = yield* valetRun(["trajectories", "export", "--format", "sft-chat", "--trajectories", root, "--task", "g", "--min-reward", "1"])
      expect(contents(filtered.stdout)).toEqual(["e2 s1"])
      expect(filtered.stderr.at(-1)).toBe(
        `exported 1 row (sft-chat) from ${root} to stdout; skipped 1 corrupt line, 3 records below --min-reward or without a reward`
      )
    }))

  it.live("Parquet when --out ends in .parquet, or with --parquet on stdout: the rows the JSONL has", () =>
    Effect.gen(function*() {
      const root = join(dir, "parquet")
      yield* makeStore(root)
      const jsonl = yield* valetRun(["trajectories", "export", "--format", "grpo", "--trajectories", root])
      const rows = jsonl.stdout.toString("utf8").trimEnd().split("\n").map((line) => JSON.parse(line))
      const out = join(dir, "grpo.parquet")
      const file = yield* valetRun(["trajectories", "export", "--format", "grpo", "--trajectories", root, "--out", out])
      expect(file.stderr.at(-1)).toMatch(new RegExp(`^exported 3 rows \\(grpo, Parquet\\) from ${root} to ${out};`))
      expect(yield* readParquet(readFileSync(out))).toEqual(rows)
      const piped = yield* valetRun(["trajectories", "export", "--format", "grpo", "--trajectories", root, "--parquet"])
      expect(yield* readParquet(piped.stdout)).toEqual(rows)
    }))

  it.live("a reader that closes the pipe (| head) ends the export quietly, said on stderr", () =>
    Effect.gen(function*() {
      const root = join(dir, "epipe")
      yield* makeStore(root)
      // What NodeStdio's stdout fails with when the reader is gone.
      const epipe = Object.assign(new Error("write EPIPE"), { code: "EPIPE" })
      const closed = () =>
        Sink.forEach((_: string | Uint8Array) =>
          Effect.fail(PlatformError.systemError({ _tag: "Unknown", module: "Stdio", method: "stdout", cause: epipe }))
        )
      const { exit, stderr } = yield* valetRun(["trajectories", "export", "--format", "sft-chat", "--trajectories", root], closed)
      expect(exit._tag).toBe("Success")
      expect(stderr.at(-1)).toMatch(new RegExp(`^exported \\d+ rows? \\(sft-chat\\) from ${root} to stdout \\(closed by its reader\\);`))
    }))

  it.live("a missing trajectories directory fails with one line naming it, and leaves no --out file", () =>
    Effect.gen(function*() {
      const root = join(dir, "absent")
      const out = join(dir, "absent.jsonl")
      const { exit } = yield* valetRun(["trajectories", "export", "--format", "tokens", "--trajectories", root, "--out", out])
      // No file, whole or half.
      expect(readdirSync(dir).filter((name) => name.startsWith("absent"))).toEqual([])
      if (exit._tag !== "Failure") return expect.unreachable("the export succeeded")
      expect(describeFailure(exit.cause, "valet trajectories export")).toEqual({
        line: `valet trajectories export: ExportError: no trajectories at ${root}: ${join(root, "raw")} does not exist ` +
          `(records are ${join(root, "raw")}/<task_id>.jsonl)`,
        exitCode: 1
      })
    }))
})

describe("the export's last line", () => {
  it("names what a failed reward left out: episodes (grpo) or records (the formats that rank by reward)", () => {
    expect(skippedText({ rows: 2, skipped: { reward_failed: { records: 3, episodes: 1 } } })).toBe(
      "; skipped 1 episode whose reward failed (3 records: reward_parts says why)"
    )
    expect(skippedText({ rows: 0, skipped: { reward_failed: { records: 1, episodes: 0 }, below_min_reward: { records: 2, episodes: 0 } } })).toBe(
      "; skipped 2 records below --min-reward or without a reward, 1 record whose reward failed (reward_parts says why)"
    )
  })
})

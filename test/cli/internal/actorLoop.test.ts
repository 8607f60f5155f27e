import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { Command } from "effect/cli"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { makeCommand, runTasksFile } from "../../../src/cli/internal/actorLoop.js"
import type { Output } from "../../../src/cli/internal/output.js"
import { dumpState, stateCommand } from "../../../src/cli/internal/state.js"
import type * as Model from "../../../src/core/Model.js"
import * as ModelError from "../../../src/core/ModelError.js"
import * as ScriptedModel from "../../../src/core/ScriptedModel.js"
import * as Sandbox from "../../../src/environment/Sandbox.js"
import * as StateStore from "../../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../../src/environment/TrajectoryStore.js"
import { testIsolation } from "../../support/processes.js"

const dir = mkdtempSync(join(tmpdir(), "valet-cli-actor-loop-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const memoryOutput = (tty = false): Output & { readonly lines: Array<string> } => {
  const lines: Array<string> = []
  return {
    tty,
    lines,
    line: (text) => Effect.sync(() => void lines.push(text)),
    status: (text) => Effect.sync(() => void lines.push(`\r${text}`))
  }
}

const tasksFile = (name: string, lines: ReadonlyArray<string>) => {
  const path = join(dir, name)
  writeFileSync(path, lines.join("\n") + "\n")
  return path
}

const task = (taskId: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ task_id: taskId, prompt: `Do ${taskId}.`, workspace_files: { "in.txt": `${taskId}\n` }, ...extra })

const answer = "<think>read it</think><action>{\"command\": [\"python3\", \"-c\", \"print(open('in.txt').read().upper(), end='')\"]}</action>" +
  "<state_update>{\"history\": [\"printed the input\"]}</state_update>"

const layers = (script: ScriptedModel.Script) =>
  Layer.mergeAll(
    ScriptedModel.layer(script),
    Sandbox.layerTest(({ files }) => ({ stdout: (files["in.txt"] ?? "").toUpperCase() })),
    StateStore.layerMemory(),
    TrajectoryStore.layerMemory
  )

describe("valet actor-loop (runTasksFile)", () => {
  it.effect("skips blank lines, reports a malformed line by number and runs the others", () =>
    Effect.gen(function*() {
      const path = tasksFile("mixed.jsonl", [task("t1"), "", "{\"task_id\": \"t2\", \"prompt\": ", "   ", task("t3"), task("t4", { temperature: 9 })])
      const output = memoryOutput()
      const summary = yield* runTasksFile(path, { concurrency: 2 }, layers(() => answer), output)
      expect(summary).toMatchObject({ total: 2, recorded: 2, failed: 0, skippedLines: 2, sandboxFailed: 0, parseErrors: 0 })
      expect(output.lines[0]).toMatch(new RegExp(`^skipped ${path}:3: `))
      expect(output.lines[1]).toBe(`skipped ${path}:6: temperature must be a value between 0 and 2, got 9`)
      expect(output.lines[2]).toBe(`actor-loop: 2 tasks from ${path}, 2 at a time`)
      expect(output.lines.filter((line) => /^\[\d\/2\] t[13] step 1: exit 0 · parsed · model 0\.00 s$/.test(line))).toHaveLength(2)
      expect(output.lines.at(-1)).toMatch(
        /^actor-loop: 2 tasks · 2 recorded · 0 failed · 2 malformed lines skipped · sandbox failed in 0 · parse errors in 0 · /
      )
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a task line with an unknown field or a bad seed is skipped with its line number; the run goes on", () =>
    Effect.gen(function*() {
      const path = tasksFile("fields.jsonl", [task("u1", { colour: "red" }), task("s1", { seed: 1.5 }), task("s2", { seed: "7" }), task("ok", { seed: 7 })])
      const output = memoryOutput()
      const summary = yield* runTasksFile(path, { concurrency: 1 }, layers(() => answer), output)
      expect(summary).toMatchObject({ total: 1, recorded: 1, failed: 0, skippedLines: 3 })
      expect(output.lines.slice(0, 3)).toEqual([
        `skipped ${path}:1: colour is not a known task field`,
        `skipped ${path}:2: seed must be an integer, got 1.5`,
        `skipped ${path}:3: seed must be a number, got "7"`
      ])
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("--max-steps and --group: each task runs as that many episodes, each until <done/> or max-steps", () =>
    Effect.gen(function*() {
      const path = tasksFile("episodes.jsonl", [task("e1", { seed: 3 })])
      const output = memoryOutput()
      let calls = 0
      const summary = yield* runTasksFile(path, { concurrency: 1, maxSteps: 3, group: 2 }, layers(() => (++calls === 2 ? `${answer}<done/>` : answer)), output)
      expect(summary).toMatchObject({ total: 1, episodes: 2, recorded: 2, failed: 0 })
      expect(calls).toBe(5)
      expect(output.lines[0]).toBe(`actor-loop: 1 tasks from ${path}, 2 rollouts each, up to 3 steps, 1 at a time`)
      expect(output.lines.filter((line) => line.startsWith("[")).map((line) => line.replace(/: exit.* · (\d steps)/, ": $1").replace(/ · parsed.*/, "")))
        .toEqual(["[1/2] e1 step 2: 2 steps (done)", "[2/2] e1 step 5: 3 steps (max_steps)"])
      expect(output.lines.at(-1)).toMatch(/^actor-loop: 1 tasks \(2 episodes\) · 2 recorded · 0 failed · /)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.live("--durable <sqlite file>: every step a workflow; run again, the steps done answer their outcome (no model call, no record appended)", () =>
    Effect.gen(function*() {
      const path = tasksFile("durable.jsonl", [task("d1"), task("d2"), task("d1")])
      const store = join(dir, "durable.db")
      let calls = 0
      const counted = Layer.mergeAll(
        ScriptedModel.layer(() => (calls++, answer)),
        Sandbox.layerTest(({ files }) => ({ stdout: (files["in.txt"] ?? "").toUpperCase() })),
        StateStore.layerMemory(),
        TrajectoryStore.layerMemory
      )
      const first = memoryOutput()
      const summary = yield* runTasksFile(path, { concurrency: 2 }, counted, first, store)
      expect(summary).toMatchObject({ total: 3, recorded: 3, failed: 0 })
      expect(first.lines.filter((line) => / d1 step [12]: exit 0/.test(line))).toHaveLength(2)
      expect(calls).toBe(3)
      const second = memoryOutput()
      expect(yield* runTasksFile(path, { concurrency: 2 }, counted, second, store)).toMatchObject({ recorded: 3, failed: 0 })
      // The same records (steps 1 and 2 of d1), answered from the store.
      const d1Steps = (lines: ReadonlyArray<string>) =>
        lines.filter((line) => / d1 step [12]: exit 0/.test(line)).map((line) => line.replace(/^\[\d+\/\d+\] /, "")).sort()
      expect(d1Steps(second.lines)).toEqual(d1Steps(first.lines))
      expect(calls).toBe(3)
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("on a terminal, shows a status line with done / total, failures and rate", () =>
    Effect.gen(function*() {
      const path = tasksFile("tty.jsonl", [task("a"), task("b")])
      const output = memoryOutput(true)
      yield* runTasksFile(path, { concurrency: 1 }, layers([answer, { error: new ModelError.ServerError({ status: 500, message: "boom" }) }]), output)
      expect(output.lines).toContain("\r1/2 done · 0 failed · 0.00 tasks/s · ETA ?")
      expect(output.lines.some((line) => line.startsWith("[2/2] b FAILED: ServerError: boom"))).toBe(true)
      expect(output.lines).toContain("\r2/2 done · 1 failed · 0.00 tasks/s · ETA 0 s")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("fails (non-zero exit) only when no task could run", () =>
    Effect.gen(function*() {
      const allFail = tasksFile("all-fail.jsonl", [task("x"), task("y")])
      const failed = yield* Effect.flip(runTasksFile(allFail, { concurrency: 2 }, layers(() => ({ error: new ModelError.Transport({ message: "refused" }) })), memoryOutput()))
      expect(failed).toMatchObject({ _tag: "ActorLoopFailed", path: allFail })
      expect(failed.message).toBe("no task could run: all 2 failed (first: Transport: refused)")
      const malformed = tasksFile("malformed.jsonl", ["nope", "{}"])
      const none = yield* Effect.flip(runTasksFile(malformed, { concurrency: 2 }, layers([]), memoryOutput()))
      expect(none.message).toBe(`no task could run: ${malformed} has no valid task line (2 malformed)`)
      const missing = yield* Effect.flip(runTasksFile(join(dir, "nope.jsonl"), { concurrency: 1 }, layers([]), memoryOutput()))
      expect(missing.message).toContain("cannot read the tasks file")
    }).pipe(Effect.provide(NodeServices.layer)))
})

describe("valet actor-loop and valet state dump (commands)", () => {
  it.live("runs the file with real processes, SQLite state and JSONL trajectories; state dump prints the state", () =>
    Effect.gen(function*() {
      const path = tasksFile("real.jsonl", [task("r1"), "not json", task("r2")])
      const scripted: Layer.Layer<Model.Model> = Layer.orDie(ScriptedModel.layer(() => answer))
      const outputs = memoryOutput()
      const actorLoop = makeCommand(() => scripted, () => outputs)
      const root = Command.make("valet").pipe(Command.withSubcommands([actorLoop, stateCommand]))
      // The command's sandbox reads VALET_SANDBOX_ISOLATION: where bubblewrap does not work, the test opts into plain
      // processes the way a user would (the sandbox fails closed and would refuse to build).
      const run = (args: ReadonlyArray<string>) =>
        Command.runWith(root, { version: "test" })(args).pipe(
          Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: { ...process.env, VALET_SANDBOX_ISOLATION: testIsolation } })))
        )
      const stateDb = join(dir, "real", "state.sqlite3")
      const trajectories = join(dir, "real", "trajectories")
      yield* run([
        "actor-loop", path,
        "--concurrency", "2",
        "--state-db", stateDb,
        "--trajectories", trajectories,
        "--work-root", join(dir, "real", "work")
      ])
      expect(outputs.lines.at(-1)).toMatch(/^actor-loop: 2 tasks · 2 recorded · 0 failed · 1 malformed line skipped · /)
      const line = JSON.parse(readFileSync(join(trajectories, "raw", "r1.jsonl"), "utf8").trim())
      expect(line).toMatchObject({ task_id: "r1", step: 1, sandbox_result: { exit_code: 0, stdout: "R1\n" }, metrics: { sandbox_failed: false } })
      expect(existsSync(stateDb)).toBe(true)

      const printed: Array<string> = []
      const original = console.log
      console.log = (...args: Array<unknown>) => void printed.push(args.map(String).join(" "))
      yield* run(["state", "dump", "r2", "--state-db", stateDb]).pipe(
        Effect.andThen(run(["state", "dump", "r2", "--state-db", stateDb, "--render"])),
        Effect.ensuring(Effect.sync(() => (console.log = original)))
      )
      expect(JSON.parse(printed[0]!)).toEqual({
        goals: [],
        constraints: [],
        decisions: [],
        hypotheses: [],
        history: ["printed the input"],
        open_issues: [],
        next_focus: ""
      })
      expect(printed[1]).toBe("History:\n- printed the input")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("state dump of a task with no state prints the empty state", () =>
    Effect.gen(function*() {
      expect(yield* dumpState("nobody", true)).toBe("(empty state)")
      expect(JSON.parse(yield* dumpState("nobody", false))).toMatchObject({ goals: [], next_focus: "" })
    }).pipe(Effect.provide(StateStore.layerMemory())))
})

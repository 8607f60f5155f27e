import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Schema, Stream } from "effect"
import { Agent, AgentEvent, Model, ScriptedModel, Tool } from "../../src/index.js"
import * as DeepAgent from "../../src/architectures/DeepAgent.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as Workspace from "../../src/environment/Workspace.js"
import { bwrapWorks, skippedWithoutBwrap } from "../support/processes.js"

const todos = (...steps: ReadonlyArray<readonly [string, "pending" | "in_progress" | "done"]>) => ({
  todos: steps.map(([content, status]) => ({ content, status }))
})
const steps = ["Write calc.py", "Fix the operator", "Read it back", "Report"] as const
const plan = (...statuses: ReadonlyArray<"pending" | "in_progress" | "done">) =>
  todos(...steps.map((step, i) => [step, statuses[i]!] as const))

const systemText = (request: Model.Request): string => {
  const first = request.messages?.[0]
  return first?.role === "system" ? Model.textOf(first.content) : ""
}
const toolResults = (request: Model.Request) =>
  (request.messages ?? []).filter((message) => message.role === "tool").map((message) => Model.textOf(message.content))

const agent = Agent.make({ name: "coder", instructions: "You write Python.", architecture: DeepAgent.makeUnsafe({ maxTurns: 20 }) })

describe("DeepAgent", () => {
  it.effect("writes, edits and reads a file while keeping a plan of 4 steps, shown to the model on every turn", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(agent, "Write calc.py with add(a, b)"))
      const completed = events.find((event) => event._tag === "RunCompleted")
      expect(completed?._tag === "RunCompleted" && completed.result.output).toBe("calc.py adds.")
      expect(completed?._tag === "RunCompleted" && completed.result.metadata.todos).toEqual(plan("done", "done", "done", "done").todos)
      expect(completed?._tag === "RunCompleted" && completed.result.interrupted).toBe(false)

      // Each change of the plan is one event, with the whole plan.
      const updates = events.filter((event): event is AgentEvent.Of<"PlanUpdated"> => event._tag === "PlanUpdated")
      expect(updates.map((event) => event.todos.map((todo) => todo.status))).toEqual([
        ["in_progress", "pending", "pending", "pending"],
        ["done", "in_progress", "pending", "pending"],
        ["done", "done", "done", "done"]
      ])
      expect(updates.every((event) => event.sessionId === completed?.sessionId)).toBe(true)
      expect(AgentEvent.format(updates[1]!)).toMatch(/plan: 1 of 4 done, now: Fix the operator$/)

      // The plan is in the system message of every call after the first write_todos, as it stands then.
      const calls = yield* ScriptedModel.calls
      expect(calls).toHaveLength(7)
      expect(systemText(calls[0]!)).toContain("You write Python.")
      expect(systemText(calls[0]!)).not.toContain("Your plan")
      expect(systemText(calls[1]!)).toContain("1. [in_progress] Write calc.py\n2. [pending] Fix the operator")
      expect(systemText(calls[3]!)).toContain("1. [done] Write calc.py\n2. [in_progress] Fix the operator")
      expect(systemText(calls[6]!)).toContain("4. [done] Report")
      // While the plan stands, the same message is sent (compaction's size check measures only what is new).
      expect(calls[4]!.messages![0]).toBe(calls[3]!.messages![0])
      expect(calls[5]!.messages![0]).toBe(calls[3]!.messages![0])
      // Never written into the conversation: one system message, the plan in it once.
      for (const call of calls) {
        expect((call.messages ?? []).filter((message) => message.role === "system")).toHaveLength(1)
        expect((call.messages ?? []).filter((message) => Model.textOf(message.content).includes("Your plan")).length).toBeLessThanOrEqual(1)
      }
      expect(calls[0]!.tools?.map((tool) => tool.name)).toEqual(["ls", "read_file", "write_file", "edit_file", "glob", "grep", "execute", "write_todos", "task"])

      // The tools' answers, as the model read them.
      expect(toolResults(calls[6]!)).toEqual([
        "Plan updated: 0 of 4 steps done. In progress: Write calc.py",
        "Wrote 32 bytes to calc.py (a new file).",
        "Plan updated: 1 of 4 steps done. In progress: Fix the operator",
        "Edited calc.py: 1 replacement.",
        "     1\tdef add(a, b):\n     2\t    return a + b",
        "Plan updated: 4 of 4 steps done."
      ])
      // The file is in the workspace the run was given.
      expect(yield* Workspace.readText("calc.py")).toBe("def add(a, b):\n    return a + b\n")
      yield* ScriptedModel.assertConsumed
    }).pipe(
      Effect.provide(Workspace.layerMemory()),
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "write_todos", arguments: plan("in_progress", "pending", "pending", "pending") }] },
        { toolCalls: [{ name: "write_file", arguments: { path: "calc.py", content: "def add(a, b):\n    return a - b\n" } }] },
        { toolCalls: [{ name: "write_todos", arguments: plan("done", "in_progress", "pending", "pending") }] },
        { toolCalls: [{ name: "edit_file", arguments: { path: "calc.py", old_string: "a - b", new_string: "a + b" } }] },
        { toolCalls: [{ name: "read_file", arguments: { path: "calc.py" } }] },
        { toolCalls: [{ name: "write_todos", arguments: plan("done", "done", "done", "done") }] },
        "calc.py adds."
      ]))
    ))

  it.effect("what goes wrong in a tool is a result the model reads; a bad plan changes nothing and emits nothing", () =>
    Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(agent, "Edit"))
      expect(events.filter((event) => event._tag === "PlanUpdated")).toEqual([])
      const calls = yield* ScriptedModel.calls
      const results = toolResults(calls.at(-1)!)
      expect(results[0]).toMatch(/^ERROR: tool "edit_file" failed: string_not_unique: the string to replace occurs 2 times in a\.txt/)
      expect(results[1]).toMatch(/^ERROR: tool "read_file" failed: parent_path: /)
      expect(results[2]).toMatch(/^ERROR: invalid arguments for tool "write_todos"/)
      expect(results[3]).toMatch(/^ERROR: tool "write_todos" failed: todos\[0\]\.content is empty/)
      expect(systemText(calls.at(-1)!)).not.toContain("Your plan")
      const completed = events.at(-1)
      expect(completed?._tag === "RunCompleted" && completed.result.output).toBe("Gave up.")
    }).pipe(
      Effect.provide(Workspace.layerMemory({ "a.txt": "x\nx\n" })),
      Effect.provide(ScriptedModel.layer([
        {
          toolCalls: [
            { name: "edit_file", arguments: { path: "a.txt", old_string: "x", new_string: "y" } },
            { name: "read_file", arguments: { path: "../secret" } },
            { name: "write_todos", arguments: { todos: [{ content: "a", status: "started" }] } },
            { name: "write_todos", arguments: { todos: [{ content: " ", status: "pending" }] } }
          ]
        },
        "Gave up."
      ]))
    ))

  it.effect("the agent's own tools keep a large result out of the context too: a file in the workspace, its path and head", () =>
    Effect.gen(function*() {
      const big = Array.from({ length: 400 }, (_, i) => `row ${i}`).join("\n")
      const dump = Tool.make({ name: "dump", description: "Dumps rows", parameters: Schema.Struct({}), handler: () => Effect.succeed(big) })
      const small = Tool.make({ name: "small", description: "One row", parameters: Schema.Struct({}), handler: () => Effect.succeed("row") })
      const withTools = Agent.make({ name: "d", instructions: "", tools: [dump, small], architecture: DeepAgent.makeUnsafe({ largeResultChars: 500, headChars: 20 }) })
      yield* Agent.run(withTools, "dump")
      const [dumped, kept] = toolResults((yield* ScriptedModel.calls).at(-1)!)
      expect(dumped).toContain("written to .valet/tool_results/dump_1.txt")
      expect(dumped).toContain("row 0\nrow 1\nrow 2")
      expect(dumped!.length).toBeLessThan(500)
      expect(kept).toBe("row")
      expect(yield* Workspace.readText(".valet/tool_results/dump_1.txt")).toBe(big)
    }).pipe(
      Effect.provide(Workspace.layerMemory()),
      Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "dump", arguments: {} }, { name: "small", arguments: {} }] }, "ok"]))
    ))

  it.effect("without a Workspace in context each run gets a fresh one in memory", () =>
    Effect.gen(function*() {
      yield* Agent.run(agent, "write")
      const second = yield* Agent.run(agent, "look")
      expect(second.output).toBe("empty")
      const calls = yield* ScriptedModel.calls
      expect(toolResults(calls.at(-1)!)).toEqual(["(empty directory)"])
    }).pipe(Effect.provide(ScriptedModel.layer([
      { toolCalls: [{ name: "write_file", arguments: { path: "a.txt", content: "a" } }] },
      "written",
      { toolCalls: [{ name: "ls", arguments: {} }] },
      "empty"
    ]))))

  it.effect("options are checked (one line naming the field), and execute can be left out", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(DeepAgent.make({ largeResultChars: 0 }))
      expect(error.message).toMatch(/largeResultChars/)
      const quiet = Agent.make({ name: "q", instructions: "", architecture: DeepAgent.makeUnsafe({ execute: false, systemPrompt: "" }) })
      yield* Agent.run(quiet, "hi")
      const [call] = yield* ScriptedModel.calls
      expect(call!.tools?.map((tool) => tool.name)).toEqual(["ls", "read_file", "write_file", "edit_file", "glob", "grep", "write_todos", "task"])
      expect(call!.messages).toEqual([Model.user("hi")])
    }).pipe(Effect.provide(ScriptedModel.layer(["hello"]))))
})

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true })
})

describe("DeepAgent in a real sandbox (bubblewrap)", () => {
  const name = "a failing Python test, a fix, the test passing, on a plan of 4 steps; the workspace's files checked"
  if (!bwrapWorks) {
    it.skip(`${name}${skippedWithoutBwrap}`, () => {})
    return
  }
  it.live(name, () => {
    const workRoot = mkdtempSync(join(tmpdir(), "valet-deep-"))
    roots.push(workRoot)
    const test = "from calc import add\nassert add(2, 3) == 5, add(2, 3)\nprint('passed')\n"
    return Effect.gen(function*() {
      const result = yield* Agent.run(agent, "Make test_calc.py pass")
      expect(result.output).toBe("The test passes.")
      expect(result.metadata.todos).toEqual(todos(["Write calc.py", "done"], ["Run the test", "done"], ["Fix add", "done"], ["Run it again", "done"]).todos)
      const results = toolResults((yield* ScriptedModel.calls).at(-1)!)
      expect(results[3]).toMatch(/^exit code 1\n--- stderr ---\n[\s\S]*AssertionError: -1/)
      expect(results[5]).toBe("exit code 0\n--- stdout ---\npassed")
      expect(yield* Workspace.readText("calc.py")).toBe("def add(a, b):\n    return a + b\n")
      expect((yield* Workspace.glob("**/*")).paths).toEqual(["calc.py", "test_calc.py"])
    }).pipe(
      Effect.provide(Workspace.layerSandbox("deep-agent", { files: { "test_calc.py": test } })),
      Effect.provide(Sandbox.layerProcess({ isolation: "bwrap", workRoot, allow: ["python3"] })),
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "write_todos", arguments: todos(["Write calc.py", "in_progress"], ["Run the test", "pending"], ["Fix add", "pending"], ["Run it again", "pending"]) }] },
        { toolCalls: [{ name: "write_file", arguments: { path: "calc.py", content: "def add(a, b):\n    return a - b\n" } }] },
        { toolCalls: [{ name: "write_todos", arguments: todos(["Write calc.py", "done"], ["Run the test", "in_progress"], ["Fix add", "pending"], ["Run it again", "pending"]) }] },
        { toolCalls: [{ name: "execute", arguments: { command: ["python3", "test_calc.py"] } }] },
        { toolCalls: [{ name: "edit_file", arguments: { path: "calc.py", old_string: "a - b", new_string: "a + b" } }] },
        { toolCalls: [{ name: "execute", arguments: { command: ["python3", "test_calc.py"] } }] },
        { toolCalls: [{ name: "write_todos", arguments: todos(["Write calc.py", "done"], ["Run the test", "done"], ["Fix add", "done"], ["Run it again", "done"]) }] },
        "The test passes."
      ]))
    )
  }, 60_000)
})

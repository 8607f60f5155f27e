/**
 * DeepAgent end to end in a real bubblewrap sandbox (issue 30): a scripted model does real work — a plan of five
 * steps, a sub-agent's research, a file written then edited, a Python test that fails, a fix, the test passing — and
 * the workspace's diff is checked exactly. Then bad input in such a workspace: each a result the model reads, the run
 * going on. Skipped where bubblewrap does not work (a failure under VALET_REQUIRE_BWRAP=1).
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { Agent, type AgentEvent, Model, ScriptedModel } from "../../src/index.js"
import * as DeepAgent from "../../src/architectures/DeepAgent.js"
import * as Snapshot from "../../src/environment/internal/sandbox/snapshot.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as Workspace from "../../src/environment/Workspace.js"
import { bwrapWorks, skippedWithoutBwrap } from "../support/processes.js"

type Status = "pending" | "in_progress" | "done"
const steps = ["Research the slug rules", "Write slug.py", "Write and run test_slug.py", "Fix the failure", "Run the test again"] as const
const plan = (...statuses: ReadonlyArray<Status>) => ({ todos: steps.map((content, i) => ({ content, status: statuses[i]! })) })

/** The prompt of a request: the parent's task, or a sub-agent's description. */
const promptOf = (request: Model.Request): string =>
  Model.textOf((request.messages ?? []).find((message) => message.role === "user")?.content ?? "")
const toolResults = (request: Model.Request): ReadonlyArray<string> =>
  (request.messages ?? []).filter((message) => message.role === "tool").map((message) => Model.textOf(message.content))
/** How many times the model already answered in this request's conversation: the turn it is on. */
const turnOf = (request: Model.Request): number => (request.messages ?? []).filter((message) => message.role === "assistant").length
const systemText = (request: Model.Request): string => {
  const first = request.messages?.[0]
  return first?.role === "system" ? Model.textOf(first.content) : ""
}

/** The workspace's files as the sandbox snapshots them (what its per-command diffs are made from). */
const snapshot = Workspace.Workspace.use((workspace) =>
  Effect.promise(() => Snapshot.take(workspace.location, { maxDiffBytes: 1 << 20, maxFiles: 1_000 })))

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true })
})
const sandbox = (allow: ReadonlyArray<string>) => {
  const workRoot = mkdtempSync(join(tmpdir(), "valet-deep-e2e-"))
  roots.push(workRoot)
  return Sandbox.layerProcess({ isolation: "bwrap", workRoot, allow })
}

const rules = "# Slugs\n- lower case\n- words joined by one hyphen\n- no spaces at either end\n"
const research = "Slugs are lower case, words joined by one hyphen, no spaces at the ends (RULES.md)."
const buggy = "def slug(text):\n    return text.lower().replace(' ', '_')\n"
const test = "from slug import slug\nassert slug(' Hello World ') == 'hello-world', slug(' Hello World ')\nprint('ok')\n"

/** The main run's turns, by turn: what the model asks for. */
const mainTurns: ReadonlyArray<ScriptedModel.Turn> = [
  { toolCalls: [{ name: "write_todos", arguments: plan("in_progress", "pending", "pending", "pending", "pending") }] },
  { toolCalls: [{ name: "task", arguments: { description: "Read RULES.md and say in one line what a slug is." } }] },
  { toolCalls: [{ name: "write_todos", arguments: plan("done", "in_progress", "pending", "pending", "pending") }] },
  { toolCalls: [{ name: "write_file", arguments: { path: "slug.py", content: buggy } }] },
  // Written, then edited: the rules say no spaces at the ends.
  { toolCalls: [{ name: "edit_file", arguments: { path: "slug.py", old_string: "text.lower()", new_string: "text.strip().lower()" } }] },
  { toolCalls: [{ name: "write_todos", arguments: plan("done", "done", "in_progress", "pending", "pending") }] },
  { toolCalls: [{ name: "write_file", arguments: { path: "test_slug.py", content: test } }] },
  { toolCalls: [{ name: "execute", arguments: { command: ["python3", "test_slug.py"] } }] },
  { toolCalls: [{ name: "write_todos", arguments: plan("done", "done", "done", "in_progress", "pending") }] },
  { toolCalls: [{ name: "edit_file", arguments: { path: "slug.py", old_string: "'_'", new_string: "'-'" } }] },
  { toolCalls: [{ name: "write_todos", arguments: plan("done", "done", "done", "done", "in_progress") }] },
  { toolCalls: [{ name: "execute", arguments: { command: ["python3", "test_slug.py"] } }] },
  { toolCalls: [{ name: "write_todos", arguments: plan("done", "done", "done", "done", "done") }] }
]

describe("DeepAgent end to end in a real sandbox (bubblewrap)", () => {
  const name = "a plan of 5 steps, a sub-agent's research, a file written then edited, a failing Python test, a fix, the test passing; the diff exact"
  const badName = "bad input in a sandbox workspace: a missing file, a string not unique, ../x, an absolute path, a symlink out made by execute (read, write, ls refused; grep, glob not led out) — each read by the model, the run goes on"
  const largeName = "a command's large output goes to a file of the sandbox workspace: the model gets its path and head, reads on with read_file, and a command reads it there"
  if (!bwrapWorks) {
    it.skip(`${name}${skippedWithoutBwrap}`, () => {})
    it.skip(`${badName}${skippedWithoutBwrap}`, () => {})
    it.skip(`${largeName}${skippedWithoutBwrap}`, () => {})
    return
  }

  it.live(name, () => {
    const agent = Agent.make({ name: "coder", instructions: "You write Python.", architecture: DeepAgent.makeUnsafe({ maxTurns: 30 }) })
    const script: ScriptedModel.Script = (request) => {
      if (promptOf(request).startsWith("Read RULES.md")) {
        // The sub-agent, in its own context over the same workspace: reads the rules, answers.
        return turnOf(request) === 0 ? { toolCalls: [{ name: "read_file", arguments: { path: "RULES.md" } }] } : research
      }
      const turn = turnOf(request)
      if (turn < mainTurns.length) return mainTurns[turn]!
      // The sub-agent's answer, as the model read it, folded into the final answer.
      return `slug.py makes slugs and test_slug.py passes. Research: ${toolResults(request)[1]}`
    }
    return Effect.gen(function*() {
      const before = yield* snapshot
      const events = Array.from(yield* Stream.runCollect(Agent.stream(agent, "Write slug(text) in slug.py, following RULES.md, with a passing test")))
      const completed = events.find((event): event is AgentEvent.Of<"RunCompleted"> => event._tag === "RunCompleted" && !event.sessionId.includes("__"))!
      const session = completed.sessionId
      expect(completed.result.output).toBe(`slug.py makes slugs and test_slug.py passes. Research: ${research}`)
      expect(completed.result.interrupted).toBe(false)
      expect(completed.result.metadata.todos).toEqual(plan("done", "done", "done", "done", "done").todos)

      // The plan: each change one event of the run's own session, in order.
      const updates = events.filter((event): event is AgentEvent.Of<"PlanUpdated"> => event._tag === "PlanUpdated")
      expect(updates.map((event) => event.todos.map((todo) => todo.status).join(" "))).toEqual([
        "in_progress pending pending pending pending",
        "done in_progress pending pending pending",
        "done done in_progress pending pending",
        "done done done in_progress pending",
        "done done done done in_progress",
        "done done done done done"
      ])
      expect(updates.every((event) => event.sessionId === session)).toBe(true)

      // The sub-agent: its own session id, its read of RULES.md among its events, its answer the task's result.
      const started = events.filter((event): event is AgentEvent.Of<"SubRunStarted"> => event._tag === "SubRunStarted")
      expect(started.map((event) => [event.sessionId, event.childSessionId])).toEqual([[session, `${session}__task_1`]])
      const child = started[0]!.childSessionId
      const returned = events.filter((event): event is AgentEvent.Of<"ToolReturned"> => event._tag === "ToolReturned")
      expect(returned.filter((event) => event.sessionId === child).map((event) => [event.name, event.content])).toEqual([
        ["read_file", "     1\t# Slugs\n     2\t- lower case\n     3\t- words joined by one hyphen\n     4\t- no spaces at either end"]
      ])
      expect(events.some((event) => event._tag === "SubRunCompleted" && event.childSessionId === child && event.error === undefined)).toBe(true)
      const taskReturned = returned.find((event) => event.name === "task")!
      expect([taskReturned.sessionId, taskReturned.content, taskReturned.isError]).toEqual([session, research, false])

      // The two runs of the test, with their exit codes: the failure names the wrong slug; then it passes.
      const executed = returned.filter((event) => event.name === "execute")
      expect(executed.map((event) => [event.sessionId, event.isError, event.content.split("\n")[0]])).toEqual([
        [session, false, "exit code 1"],
        [session, false, "exit code 0"]
      ])
      expect(executed[0]!.content).toMatch(/^exit code 1\n--- stderr ---\nTraceback[\s\S]*AssertionError: hello_world$/)
      expect(executed[1]!.content).toBe("exit code 0\n--- stdout ---\nok")

      // The model's next request after the failure holds the failing output, and the plan as it stood.
      const calls = yield* ScriptedModel.calls
      const mainCalls = calls.filter((call) => !promptOf(call).startsWith("Read RULES.md"))
      const afterFailure = mainCalls[8]!
      expect(toolResults(afterFailure).at(-1)).toBe(executed[0]!.content)
      expect(systemText(afterFailure)).toContain("3. [in_progress] Write and run test_slug.py\n4. [pending] Fix the failure")
      expect(toolResults(mainCalls.at(-1)!)).toEqual([
        "Plan updated: 0 of 5 steps done. In progress: Research the slug rules",
        research,
        "Plan updated: 1 of 5 steps done. In progress: Write slug.py",
        `Wrote ${buggy.length} bytes to slug.py (a new file).`,
        "Edited slug.py: 1 replacement.",
        "Plan updated: 2 of 5 steps done. In progress: Write and run test_slug.py",
        `Wrote ${test.length} bytes to test_slug.py (a new file).`,
        executed[0]!.content,
        "Plan updated: 3 of 5 steps done. In progress: Fix the failure",
        "Edited slug.py: 1 replacement.",
        "Plan updated: 4 of 5 steps done. In progress: Run the test again",
        "exit code 0\n--- stdout ---\nok",
        "Plan updated: 5 of 5 steps done."
      ])
      // The sub-agent read only its task, not the parent's conversation.
      const subCalls = calls.filter((call) => promptOf(call).startsWith("Read RULES.md"))
      expect(subCalls).toHaveLength(2)
      expect(subCalls.every((call) => (call.messages ?? []).filter((message) => message.role === "user").length === 1)).toBe(true)

      // What the run changed in the workspace, as the sandbox diffs it: two new files, nothing else.
      const changes = Snapshot.compare(before, yield* snapshot)
      expect(changes.changedFiles).toEqual(["slug.py", "test_slug.py"])
      expect(changes.diff).toBe(
        "--- /dev/null\n+++ b/slug.py\n@@ -0,0 +1,2 @@\n+def slug(text):\n+    return text.strip().lower().replace(' ', '-')\n" +
          "--- /dev/null\n+++ b/test_slug.py\n@@ -0,0 +1,3 @@\n" + test.split("\n").slice(0, -1).map((line) => `+${line}\n`).join("")
      )
    }).pipe(
      Effect.provide(Workspace.layerSandbox("deep-e2e", { files: { "RULES.md": rules } })),
      Effect.provide(sandbox(["python3"])),
      Effect.provide(ScriptedModel.layer(script))
    )
  }, 60_000)

  it.live(badName, () => {
    const agent = Agent.make({ name: "coder", instructions: "", architecture: DeepAgent.makeUnsafe({ maxTurns: 10 }) })
    return Effect.gen(function*() {
      const before = yield* snapshot
      const result = yield* Agent.run(agent, "Try things")
      expect(result.output).toBe("Recovered.")
      const calls = yield* ScriptedModel.calls
      const results = toolResults(calls.at(-1)!)
      expect(results).toHaveLength(12)
      expect(results[0]).toMatch(/^ERROR: tool "edit_file" failed: not_found: .*missing\.py/)
      expect(results[1]).toMatch(/^ERROR: tool "edit_file" failed: string_not_unique: the string to replace occurs 2 times in notes\.txt/)
      expect(results[2]).toMatch(/^ERROR: tool "edit_file" failed: string_not_found: .*notes\.txt/)
      expect(results[3]).toMatch(/^ERROR: tool "write_file" failed: parent_path: .*\.\.\/x/)
      expect(results[4]).toMatch(/^ERROR: tool "read_file" failed: absolute_path: .*\/etc\/hostname/)
      // The model made a link out of the workspace with a command; the file tools refuse to follow it.
      expect(results[5]).toBe("exit code 0\n--- changed files ---\nout")
      expect(results[6]).toMatch(/^ERROR: tool "read_file" failed: symlink_escape: .*out\/hostname/)
      expect(results[7]).toMatch(/^ERROR: tool "write_file" failed: symlink_escape: .*out\/evil/)
      // grep and glob do not follow it out (/etc has lines with "root"); ls refuses it.
      expect(results.slice(8, 10)).toEqual(["No lines contain \"root\".", "notes.txt"])
      expect(results[10]).toMatch(/^ERROR: tool "ls" failed: symlink_escape: .*out/)
      // And the run goes on: the next edit works.
      expect(results[11]).toBe("Edited notes.txt: 2 replacements.")
      expect(yield* Workspace.readText("notes.txt")).toBe("y\ny\n")
      const changes = Snapshot.compare(before, yield* snapshot)
      expect(changes.changedFiles).toEqual(["notes.txt", "out"])
    }).pipe(
      Effect.provide(Workspace.layerSandbox("deep-e2e-bad", { files: { "notes.txt": "x\nx\n" } })),
      Effect.provide(sandbox(["python3", "ln"])),
      Effect.provide(ScriptedModel.layer([
        {
          toolCalls: [
            { name: "edit_file", arguments: { path: "missing.py", old_string: "a", new_string: "b" } },
            { name: "edit_file", arguments: { path: "notes.txt", old_string: "x", new_string: "y" } },
            { name: "edit_file", arguments: { path: "notes.txt", old_string: "z", new_string: "y" } },
            { name: "write_file", arguments: { path: "../x", content: "out" } },
            { name: "read_file", arguments: { path: "/etc/hostname" } }
          ]
        },
        { toolCalls: [{ name: "execute", arguments: { command: ["ln", "-s", "/etc", "out"] } }] },
        {
          toolCalls: [
            { name: "read_file", arguments: { path: "out/hostname" } },
            { name: "write_file", arguments: { path: "out/evil", content: "x" } },
            { name: "grep", arguments: { pattern: "root" } },
            { name: "glob", arguments: { pattern: "**/*" } },
            { name: "ls", arguments: { path: "out" } }
          ]
        },
        { toolCalls: [{ name: "edit_file", arguments: { path: "notes.txt", old_string: "x", new_string: "y", replace_all: true } }] },
        "Recovered."
      ]))
    )
  }, 60_000)

  it.live(largeName, () => {
    const agent = Agent.make({ name: "coder", instructions: "", architecture: DeepAgent.makeUnsafe({ maxTurns: 10, largeResultChars: 1_000, headChars: 100 }) })
    const rows = "for i in range(500):\n    print(f'row {i:04d}')\n"
    return Effect.gen(function*() {
      const before = yield* snapshot
      yield* Agent.run(agent, "Print the rows")
      const calls = yield* ScriptedModel.calls
      const [printed, part, counted] = toolResults(calls.at(-1)!)
      // 4,500 characters of rows and the status line: over 1,000, so a file; the model read 100 of them.
      expect(printed).toMatch(/^The result is too large for the context \(\d+ characters\): it was written to \.valet\/tool_results\/execute_1\.txt\./)
      expect(printed).toContain("exit code 0\n--- stdout ---\nrow 0000\nrow 0001")
      expect(printed!.length).toBeLessThan(1_000)
      expect(JSON.stringify(calls[1]!.messages)).not.toContain("row 0499")
      expect(part).toBe("   502\trow 0499")
      expect(counted).toBe("exit code 0\n--- stdout ---\n502")
      // On disk in the workspace: what the run left there.
      const changes = Snapshot.compare(before, yield* snapshot)
      expect(changes.changedFiles).toEqual([".valet/tool_results/execute_1.txt"])
    }).pipe(
      Effect.provide(Workspace.layerSandbox("deep-e2e-large", { files: { "rows.py": rows } })),
      Effect.provide(sandbox(["python3"])),
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "execute", arguments: { command: ["python3", "rows.py"] } }] },
        { toolCalls: [{ name: "read_file", arguments: { path: ".valet/tool_results/execute_1.txt", offset: 502, limit: 1 } }] },
        { toolCalls: [{ name: "execute", arguments: { command: ["python3", "-c", "print(len(open('.valet/tool_results/execute_1.txt').readlines()))"] } }] },
        "Printed."
      ]))
    )
  }, 60_000)
})

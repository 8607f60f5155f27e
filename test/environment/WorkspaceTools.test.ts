import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as ToolCalls from "../../src/core/internal/toolCalls.js"
import * as Agent from "../../src/core/Agent.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as Workspace from "../../src/environment/Workspace.js"
import { bwrapWorks, skippedWithoutBwrap } from "../support/processes.js"

const kit = Tool.toolkit(Workspace.tools())
let ids = 0
/** One call as a model writes it, answered as the model reads it. */
const call = (name: string, args: Record<string, unknown>) =>
  Effect.map(Tool.execute(kit, { id: `call_${++ids}`, name, arguments: JSON.stringify(args) }), (result) => result.content)

describe("Workspace.tools", () => {
  it.effect("the file tools, and what goes wrong as results the model reads (reason and message)", () =>
    Effect.gen(function*() {
      expect(kit.definitions.map((d) => d.name)).toEqual(["ls", "read_file", "write_file", "edit_file", "glob", "grep", "execute"])
      expect(yield* call("write_file", { path: "calc.py", content: "def add(a, b):\n    return a - b\n" })).toBe("Wrote 32 bytes to calc.py (a new file).")
      expect(yield* call("read_file", { path: "calc.py" })).toBe("     1\tdef add(a, b):\n     2\t    return a - b")
      expect(yield* call("read_file", { path: "calc.py", offset: 2 })).toBe("     2\t    return a - b")
      expect(yield* call("read_file", { path: "calc.py", limit: 1 })).toBe("     1\tdef add(a, b):\n[lines 1-1 of 2; read on with offset 2]")
      expect(yield* call("edit_file", { path: "calc.py", old_string: "a - b", new_string: "a + b" })).toBe("Edited calc.py: 1 replacement.")
      expect(yield* call("edit_file", { path: "calc.py", old_string: "a", new_string: "x" })).toMatch(
        /^ERROR: tool "edit_file" failed: string_not_unique: the string to replace occurs 3 times in calc.py/
      )
      expect(yield* call("edit_file", { path: "calc.py", old_string: "a * b", new_string: "x" })).toMatch(
        /^ERROR: tool "edit_file" failed: string_not_found: the string to replace was not found in calc.py/
      )
      expect(yield* call("edit_file", { path: "nope.py", old_string: "a", new_string: "x" })).toBe(
        "ERROR: tool \"edit_file\" failed: not_found: nope.py does not exist"
      )
      expect(yield* call("read_file", { path: "../../etc/passwd" })).toMatch(/^ERROR: tool "read_file" failed: parent_path: /)
      expect(yield* call("write_file", { path: "/tmp/x", content: "" })).toMatch(/^ERROR: tool "write_file" failed: absolute_path: /)
      yield* call("write_file", { path: "tests/test_calc.py", content: "from calc import add\nassert add(2, 2) == 4\n" })
      expect(yield* call("ls", {})).toBe("calc.py (32 bytes)\ntests/")
      expect(yield* call("ls", { path: "tests" })).toBe("tests/test_calc.py (43 bytes)")
      expect(yield* call("glob", { pattern: "**/*.py" })).toBe("calc.py\ntests/test_calc.py")
      expect(yield* call("glob", { pattern: "*.rs" })).toBe("No files match *.rs.")
      expect(yield* call("grep", { pattern: "add(", glob: "test_*.py" })).toBe("tests/test_calc.py:2: assert add(2, 2) == 4")
      expect(yield* call("grep", { pattern: "ADD", ignore_case: true, path: "calc.py" })).toBe("calc.py:1: def add(a, b):")
      expect(yield* call("grep", { pattern: "zzz" })).toBe("No lines contain \"zzz\".")
      // Arguments that do not decode are an error result too, naming what is missing.
      expect(yield* call("write_file", { path: "a.txt" })).toMatch(/^ERROR: invalid arguments for tool "write_file"/)
      // Without a sandbox, execute says so.
      expect(yield* call("execute", { command: ["python3", "-c", "print(1)"] })).toBe(
        "ERROR: tool \"execute\" failed: execute is not available: this workspace (memory) has no sandbox to run commands in"
      )
    }).pipe(Effect.provide(Workspace.layerMemory())))

  it.effect("a result too large for the context goes to a file in the workspace: the model gets its path and head", () =>
    Effect.gen(function*() {
      const small = Tool.toolkit(Workspace.tools({ largeResultChars: 300, headChars: 40 }))
      const run = (name: string, args: Record<string, unknown>) =>
        Effect.map(Tool.execute(small, { id: "c", name, arguments: JSON.stringify(args) }), (result) => result.content)
      const lines = Array.from({ length: 50 }, (_, i) => `needle ${i}`).join("\n")
      yield* Workspace.write("hay.txt", `${lines}\n`)
      const found = yield* run("grep", { pattern: "needle" })
      expect(found).toContain("The result is too large for the context (")
      expect(found).toContain("written to .valet/tool_results/grep_1.txt")
      expect(found).toContain("hay.txt:1: needle 0\nhay.txt:2: needle 1")
      expect(found.length).toBeLessThan(400)
      // The whole result is in the file, which the model reads on with read_file.
      const saved = yield* Workspace.readText(".valet/tool_results/grep_1.txt")
      expect(saved.split("\n")).toHaveLength(50)
      expect(saved).toContain("hay.txt:50: needle 49")
      expect(yield* run("grep", { pattern: "needle" })).toContain(".valet/tool_results/grep_2.txt")
      // A file read is never copied to another: it is cut at a line, with where to read on.
      const read = yield* run("read_file", { path: "hay.txt" })
      expect(read.length).toBeLessThanOrEqual(300)
      expect(read).toMatch(/\n\[lines 1-\d+ of 50; read on with offset \d+\]$/)
      // Small results stay in the context.
      expect(yield* run("glob", { pattern: "*.txt" })).toBe("hay.txt")
    }).pipe(Effect.provide(Workspace.layerMemory())))

  it.effect("withLargeResults: any tool's large result goes to the workspace; errors and the call-id-aware call are kept", () =>
    Effect.gen(function*() {
      const echo = Tool.make({
        name: "echo",
        description: "Echoes",
        parameters: Schema.Struct({ text: Schema.String }),
        handler: ({ text }) => (text === "fail" ? Effect.fail("failed on purpose") : Effect.succeed(text))
      })
      // A wrapper that knows the call's id (as the durable tools register theirs): the large-result tool keeps using it.
      ToolCalls.withCallId.set(echo.call as never, (id: string, argumentsText: string) =>
        Effect.map(echo.call(argumentsText), (outcome) => ({ ...outcome, content: `${id}:${outcome.content}` })) as never)
      const wrapped = Tool.toolkit([Workspace.withLargeResults(echo, { largeResultChars: 50, headChars: 10 })])
      const run = (text: string) => Effect.map(Tool.execute(wrapped, { id: "c7", name: "echo", arguments: JSON.stringify({ text }) }), (r) => r.content)
      expect(yield* run("short")).toBe("c7:short")
      const long = yield* run("x".repeat(100))
      expect(long).toContain("written to .valet/tool_results/echo_1.txt")
      expect(yield* Workspace.readText(".valet/tool_results/echo_1.txt")).toBe(`c7:${"x".repeat(100)}`)
      expect(yield* run("fail")).toMatch(/^c7:ERROR: tool "echo" failed: failed on purpose$/)
      expect(() => Workspace.withLargeResults(echo, { headChars: -1 })).toThrow(/^Workspace\.withLargeResults: headChars/)
    }).pipe(Effect.provide(Workspace.layerMemory())))

  it.effect("a large result never overwrites one an earlier wrapper (run) wrote to the same workspace", () =>
    Effect.gen(function*() {
      const echo = Tool.make({
        name: "echo",
        description: "Echoes",
        parameters: Schema.Struct({ text: Schema.String }),
        handler: ({ text }) => Effect.succeed(text)
      })
      // Two runs of one agent on one workspace (a thread's two turns): each wraps the tool anew (DeepAgent does).
      const run = (text: string) =>
        Effect.map(
          Tool.execute(Tool.toolkit([Workspace.withLargeResults(echo, { largeResultChars: 50, headChars: 10 })]), { id: "c1", name: "echo", arguments: JSON.stringify({ text }) }),
          (r) => r.content
        )
      expect(yield* run("a".repeat(100))).toContain("written to .valet/tool_results/echo_1.txt")
      // Before: the second run wrote echo_1.txt again, and the first run's transcript pointed at the second's result.
      expect(yield* run("b".repeat(100))).toContain("written to .valet/tool_results/echo_2.txt")
      expect(yield* Workspace.readText(".valet/tool_results/echo_1.txt")).toBe("a".repeat(100))
      expect(yield* Workspace.readText(".valet/tool_results/echo_2.txt")).toBe("b".repeat(100))
    }).pipe(Effect.provide(Workspace.layerMemory())))

  it("bad options are refused at once, in one line", () => {
    expect(() => Workspace.tools({ largeResultChars: 0 })).toThrow(/^Workspace\.tools: largeResultChars/)
    expect(Workspace.tools({ execute: false }).map((tool) => tool.name)).not.toContain("execute")
  })

  it.effect("in a run, a refused path is a tool result and the run goes on", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "editor", instructions: "Edit files.", tools: Workspace.tools() })
      const result = yield* Agent.run(agent, "Fix it")
      expect(result.output).toBe("Could not read it.")
      const calls = yield* ScriptedModel.calls
      const toolMessage = calls[1]?.messages?.at(-1)
      expect(toolMessage?.role).toBe("tool")
      expect(String(toolMessage?.content)).toContain("symlink_escape")
    }).pipe(
      Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "read_file", arguments: { path: "out/secret" } }] }, "Could not read it."])),
      Effect.provide(Layer.succeed(Workspace.Workspace, {
        ...Effect.runSync(Workspace.makeMemory()),
        read: (path) => Effect.fail(new Workspace.WorkspaceError({ reason: "symlink_escape", path, message: `${path} goes out` }))
      }))
    ))
})

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true })
})

const sandboxed = (name: string, body: () => Effect.Effect<void, unknown, Workspace.Workspace>) => {
  if (!bwrapWorks) return it.skip(`${name}${skippedWithoutBwrap}`, () => {})
  return it.live(name, () => {
    const workRoot = mkdtempSync(join(tmpdir(), "valet-ws-tools-"))
    roots.push(workRoot)
    return Effect.scoped(body().pipe(
      Effect.provide(Workspace.layerSandbox("tools-test").pipe(Layer.provide(Sandbox.layerProcess({ isolation: "bwrap", workRoot, allow: ["python3"] })))
    )))
  }, 60_000)
}

describe("Workspace.tools in a real sandbox (bubblewrap)", () => {
  sandboxed("execute runs a failing test, edit_file fixes the code, the test passes; the changed files are listed", () =>
    Effect.gen(function*() {
      yield* call("write_file", { path: "calc.py", content: "def add(a, b):\n    return a - b\n" })
      yield* call("write_file", { path: "test_calc.py", content: "from calc import add\nassert add(2, 2) == 4, add(2, 2)\nprint('ok')\nopen('ran.txt', 'w').write('yes')\n" })
      const failing = yield* call("execute", { command: ["python3", "test_calc.py"] })
      expect(failing).toMatch(/^exit code 1\n--- stderr ---\n[\s\S]*AssertionError: 0/)
      expect(yield* call("edit_file", { path: "calc.py", old_string: "a - b", new_string: "a + b" })).toBe("Edited calc.py: 1 replacement.")
      const passing = yield* call("execute", { command: ["python3", "test_calc.py"] })
      expect(passing).toBe("exit code 0\n--- stdout ---\nok\n--- changed files ---\nran.txt")
      // What the command wrote is a file of the workspace.
      expect(yield* call("read_file", { path: "ran.txt" })).toBe("     1\tyes")
      // A program that is not allowed, and a command that is not a list: results, not failures.
      expect(yield* call("execute", { command: ["sh", "-c", "echo hi"] })).toMatch(/^not run: not_allowed \(exit code 126\)/)
      expect(yield* call("execute", { command: [] })).toMatch(/^not run: invalid_command \(exit code 127\)/)
    }))
})

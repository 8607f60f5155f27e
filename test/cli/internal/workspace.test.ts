import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer } from "effect"
import { execFile, spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as Sandbox from "../../../src/environment/Sandbox.js"
import * as Workspace from "../../../src/environment/Workspace.js"
import { memoryPrinter } from "../../../src/cli/internal/run.js"
import { onWorkspace } from "../../../src/cli/internal/workspace.js"
import * as Cli from "../../support/cli.js"
import * as Server from "../../support/openAiServer.js"
import { testIsolation } from "../../support/processes.js"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..")
const bin = join(root, "src", "cli", "bin.ts")
// The loader by its URL: the commands run in a temporary directory, where `--import tsx` would not resolve.
const tsxLoader = pathToFileURL(join(root, "node_modules", "tsx", "dist", "loader.mjs")).href

/** `valet …` as one process of its own (the loopback model server answers from this process). */
const valet = (args: ReadonlyArray<string>, cwd: string, env: Record<string, string>) =>
  Effect.promise(() =>
    new Promise<{ readonly code: number | string; readonly stdout: string; readonly stderr: string }>((resolve) => {
      execFile(process.execPath, ["--import", tsxLoader, bin, ...args], { cwd, env: { ...process.env, ...env }, encoding: "utf8", timeout: 90_000 }, (error, stdout, stderr) =>
        resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : `killed by ${error.signal ?? "?"}`, stdout, stderr }))
    })
  )

/** A chat completion that calls one tool. */
const toolCall = (id: string, name: string, args: unknown) =>
  Server.json({
    choices: [{
      message: { role: "assistant", content: null, tool_calls: [{ id, type: "function", function: { name, arguments: JSON.stringify(args) } }] },
      finish_reason: "tool_calls"
    }],
    usage: { prompt_tokens: 3, completion_tokens: 2 }
  })

const answer = (text: string) =>
  Server.json({ choices: [{ message: { role: "assistant", content: text }, finish_reason: "stop" }], usage: { prompt_tokens: 3, completion_tokens: 2 } })

const buggy = "def add(a, b):\n    return a - b\n"
const fixed = "def add(a, b):\n    return a + b\n"
const test = "from calc import add\nassert add(2, 3) == 5, add(2, 3)\nprint('passed')\n"

/** The model's script: run the failing test, fix calc.py, add a note, run the test again (passing), answer. */
const script = (server: Server.LoopbackServer) =>
  server.enqueue(
    "/v1/chat/completions",
    toolCall("c1", "execute", { command: ["python3", "test_calc.py"] }),
    toolCall("c2", "edit_file", { path: "calc.py", old_string: "a - b", new_string: "a + b" }),
    toolCall("c3", "write_file", { path: "docs/NOTES.md", content: "add() fixed\n" }),
    toolCall("c4", "execute", { command: ["python3", "test_calc.py"] }),
    answer("The test passes.")
  )

/** The tool results the model read in its last call. */
const toolResults = (server: Server.LoopbackServer): Array<string> =>
  server.requests.filter((r) => r.path === "/v1/chat/completions").at(-1)!.body.messages
    .filter((message: { role: string }) => message.role === "tool")
    .map((message: { content: string }) => message.content)

/**
 * A temporary folder (removed with the scope) holding `project/` with the buggy `calc.py` and an empty `work/` for the
 * sandbox's workspaces, and the environment that runs commands there (bubblewrap where it works, else plain
 * processes opted into: the command refuses to run unisolated otherwise).
 */
const buggyProject = Effect.map(
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-run-workspace-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ),
  (tmp) => {
    const project = join(tmp, "project")
    const workRoot = join(tmp, "work")
    mkdirSync(project)
    mkdirSync(workRoot)
    writeFileSync(join(project, "calc.py"), buggy)
    return { tmp, project, workRoot, env: { VALET_SANDBOX_ISOLATION: testIsolation, VALET_SANDBOX_ROOT: workRoot } }
  }
)

describe("valet run --architecture deep_agent --workspace DIR (a real process, a real sandbox)", () => {
  it.live("works on a copy of DIR: a failing test fixed, the diff printed, DIR untouched; --diff FILE --apply writes both, .git untouched", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const { env, project, tmp, workRoot } = yield* buggyProject
      mkdirSync(join(project, ".git"))
      writeFileSync(join(project, "test_calc.py"), test)
      writeFileSync(join(project, ".git", "HEAD"), "ref: refs/heads/main\n")
      const model = ["--base-url", server.url, "--model", "m"]

      script(server)
      const first = yield* valet(["run", ...model, "--architecture", "deep", "--workspace", project, "Make test_calc.py pass"], tmp, env)
      expect(first.code).toBe(0)
      const results = toolResults(server)
      expect(results[0]).toMatch(/^exit code 1\n--- stderr ---\n[\s\S]*AssertionError: -1/)
      expect(results[3]).toBe("exit code 0\n--- stdout ---\npassed")
      // The answer, then the diff (what `git apply` reads past the answer).
      expect(first.stdout).toBe(
        "The test passes.\n\n" +
          "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n" +
          "--- /dev/null\n+++ b/docs/NOTES.md\n@@ -0,0 +1 @@\n+add() fixed\n"
      )
      expect(first.stderr).toContain(`valet: the agent works on a copy of ${project} (commands: ${testIsolation})`)
      expect(first.stderr).toContain("valet: 2 files changed: calc.py, docs/NOTES.md")
      // `deep` is a short name of deep_agent, not a deprecated one.
      expect(first.stderr).not.toContain("deprecated")
      // DIR is as it was, and the copy is gone.
      expect(readFileSync(join(project, "calc.py"), "utf8")).toBe(buggy)
      expect(readdirSync(project).sort()).toEqual([".git", "calc.py", "test_calc.py"])
      // (`kept/` is where the sandbox would keep workspaces across steps: empty.)
      expect(readdirSync(workRoot).filter((name) => name !== "kept")).toEqual([])

      script(server)
      const patch = join(tmp, "fix.patch")
      const applied = yield* valet(["run", ...model, "--architecture", "deep_agent", "--workspace", project, "--diff", patch, "--apply", "Make test_calc.py pass"], tmp, env)
      expect([applied.code, applied.stdout]).toEqual([0, "The test passes.\n"])
      expect(readFileSync(patch, "utf8")).toBe(first.stdout.slice("The test passes.\n\n".length))
      expect(applied.stderr).toContain(`valet: written back to ${project}: 2 written, 0 removed`)
      expect(readFileSync(join(project, "calc.py"), "utf8")).toBe(fixed)
      expect(readFileSync(join(project, "docs", "NOTES.md"), "utf8")).toBe("add() fixed\n")
      expect(readFileSync(join(project, ".git", "HEAD"), "utf8")).toBe("ref: refs/heads/main\n")

    }).pipe(Effect.scoped), 240_000)

  it.live("a run that fails still prints what it changed (the copy is removed after); --apply writes nothing then", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const { env, project, tmp } = yield* buggyProject
      server.enqueue(
        "/v1/chat/completions",
        toolCall("c1", "edit_file", { path: "calc.py", old_string: "a - b", new_string: "a + b" }),
        Server.json({ error: { message: "the model is gone", type: "invalid_request_error" } }, { status: 400 })
      )
      const failed = yield* valet(["run", "--base-url", server.url, "--model", "m", "--architecture", "deep_agent", "--workspace", project, "--apply", "Fix add"], tmp, env)
      expect(failed.code).toBe(1)
      expect(failed.stdout).toBe("\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n")
      expect(failed.stderr).toMatch(/\nvalet run: .*the model is gone/)
      expect(readFileSync(join(project, "calc.py"), "utf8")).toBe(buggy)
    }).pipe(Effect.scoped), 120_000)

  it.effect("valet run --agents: a deep_agent with a workspace: in the file prints what its run changed in its copy", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-run-agents-workspace-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      mkdirSync(join(dir, "project"))
      mkdirSync(join(dir, "work"))
      writeFileSync(join(dir, "project", "calc.py"), buggy)
      writeFileSync(join(dir, "valet.yaml"), `model:
  provider: scripted
  replies:
    - { toolCalls: [{ name: edit_file, arguments: { path: calc.py, old_string: a - b, new_string: a + b } }] }
    - Fixed.
agents:
  coder: { architecture: deep_agent, instructions: Fix it., workspace: project }
`)
      const run = yield* Cli.valet(["run", "--agents", join(dir, "valet.yaml"), "Fix add"], {
        VALET_SANDBOX_ISOLATION: testIsolation,
        VALET_SANDBOX_ROOT: join(dir, "work")
      })
      expect([run.code, run.errors]).toEqual([0, []])
      expect(run.out).toBe("Fixed.\n\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n")
      expect(readFileSync(join(dir, "project", "calc.py"), "utf8")).toBe(buggy)
    }).pipe(Effect.scoped))

  it.effect("bad flags are one line, exit 2: --workspace with another architecture or --agents, a missing DIR or skills folder, --apply without --workspace", () =>
    Effect.gen(function*() {
      // A model server that is not there: each line comes before the model (or the sandbox) is set up.
      const model = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
      const react = yield* Cli.valet(["run", ...model, "--workspace", ".", "Hi."])
      expect([react.code, react.errors]).toEqual([2, ["valet run: --workspace is for --architecture deep_agent (the agent with file tools), not react"]])
      const missing = yield* Cli.valet(["run", "--architecture", "deep_agent", "--workspace", "/nonexistent/valet-dir", "Hi."], {})
      expect([missing.code, missing.errors]).toEqual([2, ["valet run: --workspace /nonexistent/valet-dir: no such directory"]])
      const skills = yield* Cli.valet(["run", ...model, "--architecture", "deep_agent", "--skills", "/nonexistent/skills", "Hi."])
      expect([skills.code, skills.errors]).toEqual([2, ["valet run: --skills /nonexistent/skills: no such directory"]])
      const agents = yield* Cli.valet(["run", "--agents", join(root, "package.json"), "--workspace", ".", "Hi."])
      expect([agents.code, agents.errors]).toEqual([2, ["valet run: --workspace is for --architecture deep_agent: an agent of --agents has its own (workspace: and options: in the file)"]])
      const apply = yield* Cli.valet(["run", ...model, "--architecture", "deep_agent", "--apply", "Hi."])
      expect([apply.code, apply.errors]).toEqual([2, ["valet run: --apply is about the changes of --workspace DIR: give --workspace too"]])
    }))

  it.live("--apply after a run that answered nothing: exit 1, the diff printed, nothing written back", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const { env, project, tmp } = yield* buggyProject
      server.enqueue("/v1/chat/completions", toolCall("c1", "edit_file", { path: "calc.py", old_string: "a - b", new_string: "a + b" }), answer("  "))
      const run = yield* valet(["run", "--base-url", server.url, "--model", "m", "--architecture", "deep_agent", "--workspace", project, "--apply", "Fix add"], tmp, env)
      expect(run.code).toBe(1)
      expect(run.stdout).toContain("+    return a + b\n")
      expect(run.stderr).toContain(`valet: nothing written back to ${project}: the answer is empty`)
      expect(run.stderr).toContain("valet run: the answer is empty")
      expect(readFileSync(join(project, "calc.py"), "utf8")).toBe(buggy)
    }).pipe(Effect.scoped), 120_000)

  it.live("Ctrl-C mid-run prints the diff of what was changed, exits 130 and removes the copy; nothing written back", () =>
    Effect.gen(function*() {
      const server = yield* Server.make()
      const { project, tmp, workRoot } = yield* buggyProject
      // The edit, then a model call that never answers: the run is stopped by SIGINT while it waits.
      server.enqueue("/v1/chat/completions", toolCall("c1", "edit_file", { path: "calc.py", old_string: "a - b", new_string: "a + b" }), Server.stall)
      const env = { ...process.env, VALET_SANDBOX_ISOLATION: testIsolation, VALET_SANDBOX_ROOT: workRoot }
      const args = ["run", "--base-url", server.url, "--model", "m", "--architecture", "deep_agent", "--workspace", project, "--apply", "Fix add"]
      const result = yield* Effect.promise(() =>
        new Promise<{ readonly code: number | null; readonly stdout: string; readonly stderr: string; readonly during: Array<string> }>((resolve) => {
          const child = spawn(process.execPath, ["--import", tsxLoader, bin, ...args], { cwd: tmp, env })
          let stdout = ""
          let stderr = ""
          let during: Array<string> = []
          child.stdout.on("data", (data) => (stdout += data))
          child.stderr.on("data", (data) => (stderr += data))
          // Once the second model call (the one that stalls) has arrived, the edit is done.
          const poll = setInterval(() => {
            if (server.requests.filter((request) => request.path === "/v1/chat/completions").length >= 2) {
              clearInterval(poll)
              during = readdirSync(workRoot).filter((name) => name !== "kept")
              child.kill("SIGINT")
            }
          }, 50)
          child.on("exit", (code) => resolve({ code, stdout, stderr, during }))
        })
      )
      // The copy, beside the sandbox's pre-made workspaces (its pool).
      expect(result.during.filter((name) => !name.startsWith("ws-"))).toHaveLength(1)
      expect(result.code).toBe(130)
      expect(result.stdout).toBe("\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n")
      expect(result.stderr).toContain("valet: 1 file changed: calc.py")
      expect(result.stderr).toContain(`valet: nothing written back to ${project}: the run was interrupted`)
      expect(readFileSync(join(project, "calc.py"), "utf8")).toBe(buggy)
      expect(readdirSync(workRoot).filter((name) => name !== "kept")).toEqual([])
    }).pipe(Effect.scoped), 120_000)
})

describe("onWorkspace: when the changes are written back", () => {
  const sandbox = (workRoot: string) => Layer.merge(Layer.effect(Sandbox.Sandbox, Sandbox.make({ isolation: testIsolation, workRoot })), NodeServices.layer)
  const setUp = () =>
    Effect.acquireRelease(
      Effect.sync(() => {
        const tmp = mkdtempSync(join(tmpdir(), "valet-on-workspace-"))
        mkdirSync(join(tmp, "project"))
        mkdirSync(join(tmp, "work"))
        writeFileSync(join(tmp, "project", "calc.py"), buggy)
        return { project: join(tmp, "project"), work: join(tmp, "work"), tmp }
      }),
      ({ tmp }) => Effect.sync(() => rmSync(tmp, { recursive: true, force: true }))
    )
  const fix = Workspace.edit("calc.py", { oldString: "a - b", newString: "a + b" })

  it.live("--apply writes nothing back after a run that answered nothing, or was stopped by a limit; the diff is printed", () =>
    Effect.gen(function*() {
      const { project, work } = yield* setUp()
      const runs = [
        [{ output: "  ", interrupted: false }, "the answer is empty"],
        [{ output: "Half done.", interrupted: true, interruptionReason: "maxTurns" }, "the run was interrupted: maxTurns"]
      ] as const
      for (const [result, why] of runs) {
        const printer = memoryPrinter()
        const value = yield* onWorkspace({ directory: project, diff: undefined, apply: true }, Effect.as(fix, result), printer).pipe(Effect.provide(sandbox(work)))
        expect(value).toEqual(result)
        expect(printer.out).toContain("+    return a + b\n")
        expect(printer.notes).toContain(`valet: nothing written back to ${project}: ${why}`)
        expect(readFileSync(join(project, "calc.py"), "utf8")).toBe(buggy)
      }
      // A run that answered: written back.
      const printer = memoryPrinter()
      yield* onWorkspace({ directory: project, diff: undefined, apply: true }, Effect.as(fix, { output: "Fixed.", interrupted: false }), printer).pipe(
        Effect.provide(sandbox(work))
      )
      expect(printer.notes).toContain(`valet: written back to ${project}: 1 written, 0 removed`)
      expect(readFileSync(join(project, "calc.py"), "utf8")).toBe(fixed)
    }).pipe(Effect.scoped))

  it.live("interrupted: the diff is still printed (then the interruption goes on), nothing written back", () =>
    Effect.gen(function*() {
      const { project, work } = yield* setUp()
      const printer = memoryPrinter()
      const edited = yield* Deferred.make<void>()
      const run = Effect.andThen(Effect.andThen(fix, Deferred.succeed(edited, undefined)), Effect.never)
      const fiber = yield* Effect.forkChild(
        onWorkspace({ directory: project, diff: undefined, apply: true }, Effect.as(run, { output: "x", interrupted: false }), printer).pipe(
          Effect.provide(sandbox(work))
        )
      )
      yield* Deferred.await(edited)
      const exit = yield* Fiber.interrupt(fiber).pipe(Effect.andThen(Fiber.await(fiber)))
      expect(Exit.hasInterrupts(exit)).toBe(true)
      expect(printer.out).toBe("\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n")
      expect(printer.notes).toContain(`valet: nothing written back to ${project}: the run was interrupted`)
      expect(readFileSync(join(project, "calc.py"), "utf8")).toBe(buggy)
      expect(readdirSync(work).filter((name) => name !== "kept")).toEqual([])
    }).pipe(Effect.scoped))

  it.live("changes that cannot be read (the copy grew past 256 MiB) are a note on stderr; the run's own answer is kept", () =>
    Effect.gen(function*() {
      const { project, work } = yield* setUp()
      const printer = memoryPrinter()
      // As a command of the agent's could (`truncate -s 257M big.bin`): sparse, nothing is written to disk.
      const grow = Effect.gen(function*() {
        const workspace = yield* Workspace.Workspace
        writeFileSync(join(workspace.location, "big.bin"), "")
        truncateSync(join(workspace.location, "big.bin"), 257 * 1024 * 1024)
      })
      const value = yield* onWorkspace({ directory: project, diff: undefined, apply: true }, Effect.as(grow, { output: "Done.", interrupted: false }), printer).pipe(
        Effect.provide(sandbox(work))
      )
      expect(value).toEqual({ output: "Done.", interrupted: false })
      expect(printer.notes.at(-1)).toBe("valet: the workspace's changes cannot be shown nor written back: the workspace holds more than 256 MiB of files: no diff")
      expect(readdirSync(project)).toEqual(["calc.py"])
    }).pipe(Effect.scoped))
})

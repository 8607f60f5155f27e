/**
 * A `valet.yaml` deep_agent served over HTTP: its skills are found beside the file (not in the server's cwd), and each
 * run works on its own sandbox copy of the file's `workspace:` directory — it writes and runs a file there, the next
 * run does not see it, and the directory itself is never changed. `valet mcp` serves the same agent as a tool.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Result } from "effect"
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import * as AgentConfig from "../../src/serve/AgentConfig.js"
import { testIsolation } from "../support/processes.js"
import { post, serveAgents, sseEvents } from "../support/serve.js"

const file = `
model:
  provider: scripted
  replies:
    - { toolCalls: [{ name: open_skill, arguments: { name: greet } }] }
    - { toolCalls: [{ name: ls }] }
    - { toolCalls: [{ name: write_file, arguments: { path: hello.py, content: "print('hello')\\n" } }] }
    - { toolCalls: [{ name: execute, arguments: { command: [python3, hello.py] } }] }
    - Wrote and ran hello.py.
agents:
  coder:
    architecture: deep_agent
    instructions: You write small programs.
    options: { skills: skills, maxTurns: 10 }
    workspace: project
`

/**
 * What is left in the sandbox's work root of the runs' copies, once the background removal of closed workspaces
 * (renamed `.removed-*` at once) is done: the pool's pre-made workspaces (`ws-*`, waiting for the next run) and
 * `kept/` are not copies. Polls the file system (real time: the removal is another process's work, not a clock's).
 */
const copiesLeft = (workRoot: string) =>
  Effect.promise(async () => {
    for (let tries = 0; tries < 500 && readdirSync(workRoot).some((name) => name.startsWith(".removed-")); tries++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return readdirSync(workRoot).filter((name) => name !== "kept" && !name.startsWith("ws-"))
  })

const services = Layer.merge(NodeServices.layer, NodeHttpClient.layerUndici)

const root = join(import.meta.dirname, "..", "..")
const tsxLoader = pathToFileURL(join(root, "node_modules", "tsx", "dist", "loader.mjs")).href
const bin = join(root, "src", "cli", "bin.ts")

/** valet.yaml with its skills and project beside it, and an empty sandbox work root, in a fresh directory. */
const setUp = () => {
  const dir = mkdtempSync(join(tmpdir(), "valet-deep-served-"))
  mkdirSync(join(dir, "work"))
  mkdirSync(join(dir, "skills", "greet"), { recursive: true })
  mkdirSync(join(dir, "project"))
  writeFileSync(join(dir, "skills", "greet", "SKILL.md"), "---\nname: greet\ndescription: Greets people.\n---\nSay hello in Python.\n")
  writeFileSync(join(dir, "project", "README.md"), "# project\n")
  writeFileSync(join(dir, "valet.yaml"), file)
  // Bubblewrap where it works, else plain processes opted into (the file's sandbox fails closed otherwise).
  return { dir, workRoot: join(dir, "work"), env: { VALET_SANDBOX_ISOLATION: testIsolation, VALET_SANDBOX_ROOT: join(dir, "work") } }
}

describe("valet.yaml: a deep_agent with skills and a workspace, served", () => {
  it.live("each run over HTTP (two at once, then one) writes and runs a file in its own sandbox copy of workspace:, its diff in the result; skills are the file's folder's", () => {
    const { dir, env: variables, workRoot } = setUp()
    const env = ConfigProvider.fromEnv({ env: variables })
    return Effect.gen(function*() {
      const loaded = yield* AgentConfig.load(join(dir, "valet.yaml"))
      const agents = yield* AgentConfig.build(loaded)
      const url = yield* serveAgents(agents.list)
      const stream = Effect.flatMap(post(`${url}/runs/stream`, { agent: "coder", input: "Write hello.py and run it." }), sseEvents)
      // Two runs at once, then one more: none sees another's hello.py.
      const runs = [...yield* Effect.all([stream, stream], { concurrency: 2 }), yield* stream]
      for (const events of runs) {
        const returned = events.filter((event) => event.event === "ToolReturned").map((event) => JSON.parse(event.data))
        expect(returned.map((event) => [event.name, event.isError])).toEqual([
          ["open_skill", false],
          ["ls", false],
          ["write_file", false],
          ["execute", false]
        ])
        // The skill beside valet.yaml (the test's cwd is the repository).
        expect(returned[0].content).toContain("Say hello in Python.")
        // A fresh copy in each run: the project's file, not another run's hello.py.
        expect(returned[1].content).toContain("README.md")
        expect(returned[1].content).not.toContain("hello.py")
        expect(returned[3].content).toBe("exit code 0\n--- stdout ---\nhello")
        const completed = JSON.parse(events.find((event) => event.event === "RunCompleted")!.data)
        expect(completed.result.output).toBe("Wrote and ran hello.py.")
        // The copy is gone after the run: its changes are in the result.
        expect(completed.result.metadata.workspace).toEqual({
          changedFiles: ["hello.py"],
          diff: "--- /dev/null\n+++ b/hello.py\n@@ -0,0 +1 @@\n+print('hello')\n"
        })
      }
      // The directory is as it was; each run's copy is gone.
      expect(readdirSync(join(dir, "project"))).toEqual(["README.md"])
      expect(yield* copiesLeft(workRoot)).toEqual([])
    }).pipe(
      Effect.scoped,
      Effect.provide(services),
      Effect.provideService(ConfigProvider.ConfigProvider, env),
      Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    )
  }, 60_000)

  it.live("valet mcp: the SDK client calls the agent as a tool; the run's copy's changes are in the structured result", () => {
    const { dir, env, workRoot } = setUp()
    return Effect.gen(function*() {
      const client = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const client = new Client({ name: "valet-test", version: "1.0.0" })
          await client.connect(new StdioClientTransport({
            command: process.execPath,
            args: ["--import", tsxLoader, bin, "mcp", "--config", join(dir, "valet.yaml")],
            env: { ...process.env as Record<string, string>, ...env },
            stderr: "pipe"
          }))
          return client
        }),
        (client) => Effect.promise(() => client.close())
      )
      const result = yield* Effect.promise(() => client.callTool({ name: "coder", arguments: { input: "Write hello.py and run it." } }))
      expect(result.isError).toBe(false)
      expect(result.structuredContent).toMatchObject({
        output: "Wrote and ran hello.py.",
        interrupted: false,
        modelCalls: 5,
        workspace: { changedFiles: ["hello.py"], diff: "--- /dev/null\n+++ b/hello.py\n@@ -0,0 +1 @@\n+print('hello')\n" }
      })
      expect(readdirSync(join(dir, "project"))).toEqual(["README.md"])
      expect(yield* copiesLeft(workRoot)).toEqual([])
    }).pipe(Effect.scoped, Effect.ensuring(Effect.sync(() => rmSync(dir, { recursive: true, force: true }))))
  }, 60_000)

  it.effect("workspace: is a deep_agent's; a directory that is not there is an error on its line", () =>
    Effect.gen(function*() {
      const react = AgentConfig.parse("model: { provider: scripted, replies: [x] }\nagents:\n  a: { instructions: x, workspace: . }\n", "valet.yaml")
      expect(Result.isFailure(react) && react.failure.message).toBe(
        "valet.yaml:3:36: agents.a.workspace is the directory of an agent with file tools (architecture deep_agent), not of a react agent"
      )
      const dir = mkdtempSync(join(tmpdir(), "valet-deep-missing-"))
      try {
        writeFileSync(join(dir, "valet.yaml"), "model: { provider: scripted, replies: [x] }\nagents:\n  a: { architecture: deep, instructions: x, workspace: nowhere }\n")
        const loaded = yield* AgentConfig.load(join(dir, "valet.yaml"))
        const missing = yield* Effect.flip(Effect.scoped(AgentConfig.build(loaded)))
        expect(missing.message).toBe(`${join(dir, "valet.yaml")}:3:56: agents.a.workspace ${join(dir, "nowhere")}: no such directory`)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(services)))
})

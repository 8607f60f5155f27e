/**
 * `valet/Mcp` against a real MCP server no one here wrote: `@modelcontextprotocol/server-everything` (a
 * devDependency), over stdio and over Streamable HTTP.
 */
import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Scope } from "effect"
import { spawn } from "node:child_process"
import { createServer } from "node:net"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import * as Agent from "../../src/core/Agent.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Mcp from "../../src/providers/Mcp.js"
import { marker, processesWith } from "../support/processes.js"

const everything = join(
  dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/server-everything/package.json")),
  "dist",
  "index.js"
)

const services = Layer.merge(NodeServices.layer, NodeHttpClient.layerUndici)

/** server-everything over stdio, its command line carrying `tag` so the test can find its process. */
const stdioServer = (tag: string): Mcp.ServerConfig => ({ command: process.execPath, args: [everything, "stdio", tag] })

const waitUntil = (predicate: () => boolean, ms = 5_000) =>
  Effect.promise(async () => {
    const until = Date.now() + ms
    while (!predicate() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 25))
    return predicate()
  })

const freePort = () =>
  Effect.promise(() =>
    new Promise<number>((resolve) => {
      const server = createServer()
      server.listen(0, "127.0.0.1", () => {
        const port = (server.address() as { port: number }).port
        server.close(() => resolve(port))
      })
    })
  )

describe("Mcp (server-everything)", () => {
  it.live("stdio: a ReAct agent whose only tools come from the server answers with two of them; the process ends with the scope", () =>
    Effect.gen(function*() {
      const tag = marker()
      const scope = yield* Scope.make()
      const tools = yield* Mcp.tools({ mcpServers: { everything: stdioServer(tag) } }).pipe(Scope.provide(scope))
      expect(tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(["echo", "get-sum"]))
      const sum = tools.find((tool) => tool.name === "get-sum")!
      expect(sum.definition.parameters).toMatchObject({ type: "object", required: ["a", "b"] })
      expect(processesWith(tag)).toHaveLength(1)

      const agent = Agent.make({ name: "mcp", instructions: "", tools })
      const { read, result } = yield* Effect.gen(function*() {
        const result = yield* Agent.run(agent, "Add 2 and 3, then echo the sum.")
        const requests = yield* ScriptedModel.calls
        return { result, read: requests.at(-1)!.messages!.filter((m) => m.role === "tool").map((m) => m.content) }
      }).pipe(
        Effect.provide(ScriptedModel.layer([
          { toolCalls: [{ name: "get-sum", arguments: { a: 2, b: 3 } }] },
          { toolCalls: [{ name: "echo", arguments: { message: "5" } }] },
          "2 + 3 = 5"
        ]))
      )
      expect(result.output).toBe("2 + 3 = 5")
      // What the server answered is what the model read.
      expect(read).toEqual(["The sum of 2 and 3 is 5.", "Echo: 5"])

      yield* Scope.close(scope, Exit.void)
      expect(yield* waitUntil(() => processesWith(tag).length === 0)).toBe(true)
    }).pipe(Effect.provide(services)), 30_000)

  it.live("results: text, isError and bad arguments are tool results the model reads", () =>
    Effect.gen(function*() {
      const tools = yield* Mcp.tools({ mcpServers: { everything: stdioServer(marker()) } })
      const byName = (name: string) => tools.find((tool) => tool.name === name)!
      expect(yield* byName("get-sum").call(`{"a": 2, "b": 3}`)).toEqual({ content: "The sum of 2 and 3 is 5.", isError: false })
      const structured = yield* byName("get-structured-content").call(`{"location": "New York"}`)
      expect(structured.isError).toBe(false)
      expect(structured.content).toContain("temperature")
      const invalid = yield* byName("get-sum").call(`{"a": "two"}`)
      expect(invalid.isError).toBe(true)
      expect((yield* byName("echo").call("{not json")).content).toMatch(/^ERROR: the arguments of tool "echo" are not valid JSON/)
    }).pipe(Effect.scoped, Effect.provide(services)), 30_000)

  it.live("a call that outlives callTimeout is cancelled and reported; an interrupted run leaves no process", () =>
    Effect.gen(function*() {
      const tag = marker()
      const scope = yield* Scope.make()
      const tools = yield* Mcp.tools({ mcpServers: { everything: stdioServer(tag) } }, { callTimeout: "500 millis" }).pipe(
        Scope.provide(scope)
      )
      const slow = tools.find((tool) => tool.name === "trigger-long-running-operation")!
      const outcome = yield* slow.call(`{"duration": 10, "steps": 5}`)
      // The operation takes 10 s and would then succeed: an error naming the MCP call's deadline is the 500 ms
      // callTimeout firing (valet's own tool timeout, 5 s above it, says something else).
      expect(outcome).toEqual({ content: `ERROR: MCP server "everything": MCP tools/call deadline exceeded`, isError: true })

      // A run interrupted in the middle of a long call: the scope closes, the server goes.
      const agent = Agent.make({ name: "mcp", instructions: "", tools })
      const fiber = yield* Effect.forkChild(
        Agent.run(agent, "go").pipe(
          Effect.provide(ScriptedModel.layer([
            { toolCalls: [{ name: "trigger-long-running-operation", arguments: { duration: 30, steps: 3 } }] },
            "never"
          ]))
        )
      )
      yield* Effect.sleep("300 millis")
      yield* Fiber.interrupt(fiber)
      yield* Scope.close(scope, Exit.void)
      expect(yield* waitUntil(() => processesWith(tag).length === 0)).toBe(true)
    }).pipe(Effect.provide(services)), 30_000)

  it.live("Streamable HTTP: the same tools over the server's /mcp endpoint", () =>
    Effect.gen(function*() {
      const port = yield* freePort()
      const tag = marker()
      const child = spawn(process.execPath, [everything, "streamableHttp", tag], {
        env: { ...process.env, PORT: String(port) },
        stdio: ["ignore", "ignore", "pipe"]
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => child.kill("SIGKILL")))
      yield* Effect.promise(() =>
        new Promise<void>((resolve) => child.stderr!.on("data", (data) => String(data).includes("listening") && resolve()))
      )
      const tools = yield* Mcp.tools({ mcpServers: { remote: { url: `http://127.0.0.1:${port}/mcp` } } })
      const echo = tools.find((tool) => tool.name === "echo")!
      expect(yield* echo.call(`{"message": "over http"}`)).toEqual({ content: "Echo: over http", isError: false })
    }).pipe(Effect.scoped, Effect.provide(services)), 30_000)

  it.live("a server that dies or never answers is a typed McpError naming it; two servers' tools are prefixed", () =>
    Effect.gen(function*() {
      const dead = yield* Effect.flip(
        Mcp.tools({ mcpServers: { dead: { command: process.execPath, args: ["-e", "process.exit(3)"] } } })
      )
      expect(dead).toMatchObject({ _tag: "McpError", server: "dead" })
      // The line says what the server is and why it did not start (on aa650ea: `MCP server "dead": MCP server closed stdout`).
      expect(dead.message).toMatch(/^MCP server "dead" \(\S+ -e "process\.exit\(3\)"\) cannot start: .*; it exited with code 3$/)
      const mute = yield* Effect.flip(
        Mcp.tools(
          { mcpServers: { mute: { command: process.execPath, args: ["-e", "setInterval(() => {}, 1000)"] } } },
          { connectTimeout: "1 second" }
        )
      )
      expect(mute).toMatchObject({ _tag: "McpError", server: "mute" })
      expect(mute.message).toMatch(/^MCP server "mute" \(\S+ -e "setInterval\(\(\) => \{\}, 1000\)"\) did not start within 1s$/)
      const bad = yield* Effect.flip(Mcp.tools({ mcpServers: { nothing: {} as Mcp.ServerConfig } }))
      expect(bad._tag).toBe("InvalidOptions")

      const two = yield* Mcp.tools({ mcpServers: { a: stdioServer(marker()), b: stdioServer(marker()) } })
      expect(two.map((tool) => tool.name)).toEqual(expect.arrayContaining(["a__echo", "b__echo"]))
    }).pipe(Effect.scoped, Effect.provide(services)), 30_000)
})

/**
 * `valet mcp`: agents of a valet.yaml as MCP tools, driven by a client no one here wrote — the
 * `@modelcontextprotocol/sdk` `Client` — over stdio (valet started as its child process) and over Streamable HTTP.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as LoopbackServer from "../support/openAiServer.js"

const root = join(import.meta.dirname, "..", "..")
const tsx = join(root, "node_modules", ".bin", "tsx")
const bin = join(root, "src", "cli", "bin.ts")

const config = `
model:
  provider: scripted
  replies: ["Paris is the capital of France."]
agents:
  assistant:
    description: Answers in one sentence.
    instructions: Answer in one sentence.
  writer:
    architecture: self-refine
    instructions: Write well.
    options: { maxRounds: 1 }
    model:
      provider: scripted
      replies: ["Paris is the capital of France", "Add a full stop.", "Paris is the capital of France."]
  broken:
    description: Its model has no reply left after a tool call, so every run fails.
    instructions: x
    model:
      provider: scripted
      replies: [{ toolCalls: [{ name: lookup }] }]
`

/** A directory with `valet.yaml` holding `text`, removed with the scope. */
const configFile = (text: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const dir = mkdtempSync(join(tmpdir(), "valet-mcp-"))
      writeFileSync(join(dir, "valet.yaml"), text)
      return dir
    }),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ).pipe(Effect.map((dir) => join(dir, "valet.yaml")))

/** An SDK client connected over `transport`, closed with the scope. */
const connect = (transport: StdioClientTransport | StreamableHTTPClientTransport) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new Client({ name: "valet-test", version: "1.0.0" })
      await client.connect(transport)
      return client
    }),
    (client) => Effect.promise(() => client.close())
  )

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const waitUntil = (predicate: () => boolean, ms = 10_000) =>
  Effect.promise(async () => {
    const until = Date.now() + ms
    while (!predicate() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 25))
    return predicate()
  })

/** `valet mcp --http --port 0` as a child process; answers the URL it prints on stderr. Killed with the scope. */
const httpServer = (path: string) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly url: string; readonly pid: number }>((resolve, reject) => {
        const child = spawn(tsx, [bin, "mcp", "--config", path, "--http", "--port", "0"], { stdio: ["ignore", "ignore", "pipe"] })
        let stderr = ""
        child.stderr.on("data", (data: Buffer) => {
          stderr += data.toString()
          const found = /agents at (http:\/\/\S+\/mcp)/.exec(stderr)
          if (found !== null) resolve({ url: found[1]!, pid: child.pid! })
        })
        child.on("exit", (code) => reject(new Error(`valet mcp exited with ${code}: ${stderr}`)))
      })
    ),
    ({ pid }) => Effect.sync(() => process.kill(pid, "SIGTERM"))
  )

/** The progress notifications `transport` receives from now on, as they arrive. */
const onTheWire = (transport: StdioClientTransport | StreamableHTTPClientTransport) => {
  const received: Array<{ readonly progress: number; readonly message: string }> = []
  const deliver = transport.onmessage!
  transport.onmessage = (message: JSONRPCMessage) => {
    if ("method" in message && message.method === "notifications/progress") {
      const params = message.params as { progress: number; message?: string }
      received.push({ progress: params.progress, message: params.message ?? "" })
    }
    deliver(message)
  }
  return received
}

const textOf = (result: Awaited<ReturnType<Client["callTool"]>>): string =>
  (result.content as Array<{ type: string; text?: string }>).map((part) => part.text ?? "").join("")

describe("valet mcp", () => {
  it.live("stdio: the SDK client lists the agents as tools and calls them; progress comes from the run's events", () =>
    Effect.gen(function*() {
      const path = yield* configFile(config)
      const transport = new StdioClientTransport({ command: tsx, args: [bin, "mcp", "--config", path], stderr: "pipe" })
      const client = yield* connect(transport)
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((tool) => [tool.name, tool.description])).toEqual([
        ["assistant", "Answers in one sentence."],
        ["writer", "writer (self-refine)"],
        ["broken", "Its model has no reply left after a tool call, so every run fails."]
      ])
      expect(tools[0]!.inputSchema).toMatchObject({ type: "object", required: ["input"], properties: { input: { type: "string" } } })

      // What reaches the client on the wire. (The SDK hands progress to `onprogress` a microtask late, so when the
      // result arrives in the same read as the last notifications — a scripted run takes a millisecond — it drops
      // them: count them as they arrive instead.)
      const progress = onTheWire(transport)
      const written = yield* Effect.promise(() =>
        client.callTool({ name: "writer", arguments: { input: "Capital of France?" } }, undefined, {
          onprogress: () => {}
        })
      )
      expect(written.isError).toBe(false)
      expect(textOf(written)).toBe("Paris is the capital of France.")
      expect(written.structuredContent).toMatchObject({ output: "Paris is the capital of France.", interrupted: false, modelCalls: 3 })
      // Base, critic and refiner each called the model, as sub-agents; every notification came before the result.
      expect(progress.map((event) => event.progress)).toEqual(progress.map((_, i) => i + 1))
      expect(progress.filter((event) => event.message.includes("model call"))).toHaveLength(3)
      expect(progress.some((event) => event.message.includes("sub-agent critic started"))).toBe(true)
      expect(progress.some((event) => event.message.includes("sub-agent refiner started"))).toBe(true)

      const answered = yield* Effect.promise(() => client.callTool({ name: "assistant", arguments: { input: "Capital?" } }))
      expect(textOf(answered)).toBe("Paris is the capital of France.")

      // A run that fails is a tool result with isError, carrying the typed error.
      const failed = yield* Effect.promise(() => client.callTool({ name: "broken", arguments: { input: "x" } }))
      expect(failed.isError).toBe(true)
      expect(textOf(failed)).toMatch(/^broken failed: .*ScriptExhausted|^broken failed: .*no turn left/i)

      // Bad arguments are the protocol's invalid-params error, naming the agent.
      const bad = yield* Effect.promise(() => client.callTool({ name: "assistant", arguments: { question: "x" } }).then(
        (result) => ({ result }),
        (error: Error) => ({ error: error.message })
      ))
      expect(JSON.stringify(bad)).toContain('assistant: the arguments must be {\\"input\\": \\"<text>\\"}')

      const pid = transport.pid!
      expect(alive(pid)).toBe(true)
      yield* Effect.promise(() => client.close())
      expect(yield* waitUntil(() => !alive(pid))).toBe(true)
    }).pipe(Effect.scoped), 60_000)

  it.live("HTTP: --http serves Streamable HTTP at /mcp", () =>
    Effect.gen(function*() {
      const path = yield* configFile(config)
      const { url } = yield* httpServer(path)
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/)
      const transport = new StreamableHTTPClientTransport(new URL(url))
      const client = yield* connect(transport)
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((tool) => tool.name)).toEqual(["assistant", "writer", "broken"])
      const progress = onTheWire(transport)
      const result = yield* Effect.promise(() =>
        client.callTool({ name: "writer", arguments: { input: "Capital of France?" } }, undefined, { onprogress: () => {} })
      )
      expect(textOf(result)).toBe("Paris is the capital of France.")
      expect(progress.filter((event) => event.message.includes("model call"))).toHaveLength(3)
    }).pipe(Effect.scoped), 60_000)

  it.live("a client's cancellation stops the run: the model request is aborted", () =>
    Effect.gen(function*() {
      const server = yield* LoopbackServer.make()
      server.enqueue("/v1/chat/completions", LoopbackServer.stall)
      const path = yield* configFile(`
model: { provider: openai-compatible, baseUrl: "${server.url}/v1", model: loopback-model }
agents:
  slow: { instructions: x }
`)
      const transport = new StdioClientTransport({ command: tsx, args: [bin, "mcp", "--config", path], stderr: "pipe" })
      const client = yield* connect(transport)
      const controller = new AbortController()
      const call = client.callTool({ name: "slow", arguments: { input: "hi" } }, undefined, { signal: controller.signal }).then(
        () => "answered",
        (error: Error) => `${error.name}: ${error.message}`
      )
      expect(yield* waitUntil(() => server.requests.some((request) => request.path === "/v1/chat/completions"))).toBe(true)
      controller.abort()
      // The SDK sends notifications/cancelled and rejects the call.
      expect(yield* Effect.promise(() => call)).toMatch(/^McpError: .*(cancel|abort)/i)
      yield* server.closedEarlySignal
      expect(server.closedEarly()).toBe(1)
    }).pipe(Effect.scoped), 60_000)

  it.effect("a bad valet.yaml: exit code 2 and one line naming the file, the line and the key", () =>
    Effect.gen(function*() {
      const path = yield* configFile("model: { provider: scripted, replies: [x] }\nagents:\n  a:\n    instructions: x\n    architecture: reactt\n")
      const run = spawnSync(tsx, [bin, "mcp", "--config", path], { encoding: "utf8", input: "" })
      expect(run.status).toBe(2)
      expect(run.stdout).toBe("")
      expect(run.stderr.trim().split("\n")).toEqual([
        `valet mcp: ${path}:5:19: agents.a.architecture must be "react" or "self-refine" or "plan-and-execute" or "reflexion" or "actor-critic" or "supervisor" or "router" or "debate" or "rewoo" or "swarm" or "blackboard" or "tree-of-thoughts" or "ensemble", got "reactt"`
      ])
    }).pipe(Effect.scoped), 30_000)
})

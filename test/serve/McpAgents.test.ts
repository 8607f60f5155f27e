/**
 * `valet mcp`: agents of a valet.yaml as MCP tools, driven by a client no one here wrote — the
 * `@modelcontextprotocol/sdk` `Client` — over stdio (valet started as its child process) and over Streamable HTTP.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Stdio } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type IncomingMessage, request as httpRequest, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { createInterface } from "node:readline"
import { rawGet, rawRequest } from "../support/rawHttp.js"
import * as Agents from "../../src/serve/Agents.js"
import * as McpAgents from "../../src/serve/McpAgents.js"
import * as LoopbackServer from "../support/openAiServer.js"

const root = join(import.meta.dirname, "..", "..")
// `valet` as one `node --import <tsx loader>` process (tsx's launcher would start two: slower under load, and a
// signal would reach the launcher, not the command).
const node = process.execPath
const tsxLoader = pathToFileURL(join(root, "node_modules", "tsx", "dist", "loader.mjs")).href
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
const httpServer = (path: string, env: Record<string, string> = {}) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly url: string; readonly pid: number }>((resolve, reject) => {
        const child = spawn(node, ["--import", tsxLoader, bin, "mcp", "--config", path, "--http", "--port", "0"], {
          stdio: ["ignore", "ignore", "pipe"],
          env: { ...process.env, ...env }
        })
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
      const transport = new StdioClientTransport({ command: node, args: ["--import", tsxLoader, bin, "mcp", "--config", path], stderr: "pipe" })
      const client = yield* connect(transport)
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((tool) => [tool.name, tool.description])).toEqual([
        ["assistant", "Answers in one sentence."],
        ["writer", "writer (self_refine)"],
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

  it.live("HTTP: --http applies valet serve's guard: the token (server.tokenEnv) on /mcp, the Host allow-list; refusals are JSON-RPC errors", () =>
    Effect.gen(function*() {
      const path = yield* configFile(`${config}\nserver: { tokenEnv: VALET_MCP_TEST_TOKEN }\n`)
      const { url } = yield* httpServer(path, { VALET_MCP_TEST_TOKEN: "mcp-s3cret-0123456789" })
      const port = Number(new URL(url).port)
      const initializeBody = JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
      })
      const request = (headers: Record<string, string>, target = "/mcp") =>
        Effect.promise(() =>
          rawRequest(
            port,
            `POST ${target} HTTP/1.1\r\nHost: ${headers["Host"] ?? `127.0.0.1:${port}`}\r\nContent-Type: application/json\r\n` +
              `Accept: application/json, text/event-stream\r\nContent-Length: ${Buffer.byteLength(initializeBody)}\r\n` +
              Object.entries(headers).filter(([name]) => name !== "Host").map(([name, value]) => `${name}: ${value}\r\n`).join("") +
              `Connection: close\r\n\r\n${initializeBody}`
          )
        )
      for (const target of ["/mcp", "/mcp#/health", "/mcp;/health", "//mcp"]) {
        const refused = yield* request({}, target)
        expect({ target, status: refused.status }).toEqual({ target, status: 401 })
        expect(JSON.parse(refused.body)).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } })
      }
      expect((yield* request({ Authorization: "Bearer wrong" })).status).toBe(401)
      expect((yield* request({ Authorization: "Bearer mcp-s3cret-0123456789", Host: `evil.example:${port}` })).status).toBe(421)
      expect((yield* request({ Authorization: "Bearer mcp-s3cret-0123456789", Origin: "http://evil.example" })).status).toBe(403)
      expect((yield* Effect.promise(() => rawGet(port, "/health"))).status).toBe(200)
      // The SDK client with the token works as before.
      const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: "Bearer mcp-s3cret-0123456789" } } })
      const client = yield* connect(transport)
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((tool) => tool.name)).toEqual(["assistant", "writer", "broken"])
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
      const transport = new StdioClientTransport({ command: node, args: ["--import", tsxLoader, bin, "mcp", "--config", path], stderr: "pipe" })
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
      const run = spawnSync(node, ["--import", tsxLoader, bin, "mcp", "--config", path], { encoding: "utf8", input: "" })
      expect(run.status).toBe(2)
      expect(run.stdout).toBe("")
      expect(run.stderr.trim().split("\n")).toEqual([
        `valet mcp: ${path}:5:19: agents.a.architecture must be an architecture's name: actor_critic, blackboard, ensemble, multi_agent_debate, plan_and_execute, react, reflexion, rewoo, router, self_refine, supervisor, swarm, tree_of_thoughts, got "reactt"`
      ])
    }).pipe(Effect.scoped), 30_000)
})

// ---------------------------------------------------------------------------------------------------------
// The protocol on the wire, and the server's limits
// ---------------------------------------------------------------------------------------------------------

/** `valet mcp --config <path>` with its stdin ours: raw writes, stdout line by line. Killed with the scope. */
const rawStdio = (path: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child: ChildProcessWithoutNullStreams = spawn(node, ["--import", tsxLoader, bin, "mcp", "--config", path], { stdio: ["pipe", "pipe", "pipe"] })
      const stdout: Array<string> = []
      let stderr = ""
      createInterface({ input: child.stdout }).on("line", (line) => void stdout.push(line))
      child.stderr.on("data", (data: Buffer) => void (stderr += data.toString()))
      // A server that is gone makes our writes fail: that is for the assertions to tell, not an uncaught error.
      child.stdin.on("error", () => {})
      // "close", not "exit": by then stdout has been read to its end.
      const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
      return { child, stdout, stderr: () => stderr, exited, write: (text: string) => void child.stdin.write(text) }
    }),
    ({ child }) => Effect.sync(() => void (child.exitCode === null && child.kill("SIGKILL")))
  )

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
})
const initialized = JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })
const ping = (id: number) => JSON.stringify({ jsonrpc: "2.0", id, method: "ping" })

/** Every stdout line as JSON; a line that is not a JSON-RPC 2.0 message fails the test, naming it. */
const messagesOf = (lines: ReadonlyArray<string>): Array<Record<string, any>> =>
  lines.map((line) => {
    let message: unknown
    try {
      message = JSON.parse(line)
    } catch {
      throw new Error(`stdout carries a line that is not JSON: ${line}`)
    }
    expect(message, line).toMatchObject({ jsonrpc: "2.0" })
    return message as Record<string, any>
  })

/**
 * A loopback chat-completions server that holds every request until the test releases it, counting the requests in
 * flight (received, not yet answered) and the most there ever were.
 */
const heldModel = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{
      readonly url: string
      readonly inFlight: () => number
      readonly most: () => number
      readonly releaseAll: () => void
      readonly close: () => void
    }>((resolve) => {
      let inFlight = 0
      let most = 0
      let releasing = false
      const held: Array<() => void> = []
      const answer = (body: any, response: ServerResponse) => () => {
        const base = { id: "chatcmpl-held", created: 1_700_000_000, model: "held-model" }
        if (body.stream === true) {
          response.writeHead(200, { "content-type": "text/event-stream" })
          response.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta: { role: "assistant", content: "Done." }, finish_reason: null }] })}\n\n`)
          response.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`)
          response.end("data: [DONE]\n\n")
        } else {
          response.writeHead(200, { "content-type": "application/json" })
          response.end(JSON.stringify({ ...base, object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "Done." }, finish_reason: "stop" }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }))
        }
      }
      const server = createServer((request: IncomingMessage, response: ServerResponse) => {
        let text = ""
        request.on("data", (data: Buffer) => void (text += data.toString()))
        request.on("end", () => {
          inFlight++
          most = Math.max(most, inFlight)
          response.on("close", () => void inFlight--)
          const release = answer(JSON.parse(text), response)
          if (releasing) release()
          else held.push(release)
        })
      })
      server.listen(0, "127.0.0.1", () =>
        resolve({
          url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
          inFlight: () => inFlight,
          most: () => most,
          releaseAll: () => {
            releasing = true
            for (const release of held.splice(0)) release()
          },
          close: () => {
            server.closeAllConnections()
            server.close()
          }
        }))
    })
  ),
  (model) => Effect.sync(() => model.close())
)

describe("valet mcp: the protocol on stdout, the server's limits", () => {
  it.live("one read holding a request, a line that is not JSON and two more requests: three answers and one -32700 with id null", () =>
    Effect.gen(function*() {
      const path = yield* configFile(config)
      const server = yield* rawStdio(path)
      server.write([initialize, "{not json", ping(2), JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/list" }), ""].join("\n"))
      expect(yield* waitUntil(() => server.stdout.length >= 4, 30_000)).toBe(true)
      const messages = messagesOf(server.stdout)
      expect(messages).toHaveLength(4)
      const byId = new Map(messages.filter((message) => message.id !== null).map((message) => [message.id, message]))
      expect(byId.get(1)?.result?.serverInfo?.name).toBe("valet")
      expect(byId.get(2)?.result).toEqual({})
      expect(byId.get(3)?.result?.tools?.map((tool: { name: string }) => tool.name)).toEqual(["assistant", "writer", "broken"])
      const refused = messages.filter((message) => message.id === null)
      expect(refused).toHaveLength(1)
      expect(refused[0]!.error.code).toBe(-32700)
      expect(refused[0]!.error.message).toMatch(/^Parse error: the line is not JSON/)
      // The note is on stderr, and nothing but JSON-RPC reached stdout.
      expect(server.stderr()).toContain("refused an MCP message (-32700)")
      server.child.stdin.end()
      expect(yield* Effect.promise(() => server.exited)).toBe(0)
    }).pipe(Effect.scoped), 60_000)

  it.live("an id that is not a string or a number: -32600 with id null, and the server goes on", () =>
    Effect.gen(function*() {
      const path = yield* configFile(config)
      const server = yield* rawStdio(path)
      server.write(`${initialize}\n${initialized}\n${JSON.stringify({ jsonrpc: "2.0", id: { a: 1 }, method: "ping" })}\n${ping(2)}\n`)
      expect(yield* waitUntil(() => server.stdout.length >= 3, 30_000)).toBe(true)
      const messages = messagesOf(server.stdout)
      expect(messages.find((message) => message.id === null)).toEqual({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32600, message: 'Invalid Request: id must be a string or a number, got {"a":1}' }
      })
      expect(messages.find((message) => message.id === 2)).toEqual({ jsonrpc: "2.0", id: 2, result: {} })
    }).pipe(Effect.scoped), 60_000)

  it.live("a 20 MB message, with the default limit of 1 MiB: -32600 and a note on stderr, and the next request is answered", () =>
    Effect.gen(function*() {
      const path = yield* configFile(config)
      const server = yield* rawStdio(path)
      server.write(`${initialize}\n`)
      expect(yield* waitUntil(() => server.stdout.length >= 1, 30_000)).toBe(true)
      const huge = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping", params: { _meta: { pad: "x".repeat(20_000_000) } } })
      server.write(`${huge}\n${ping(3)}\n`)
      expect(yield* waitUntil(() => server.stdout.length >= 3, 30_000)).toBe(true)
      const messages = messagesOf(server.stdout)
      expect(messages.slice(1)).toEqual([
        { jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request: the message is longer than this server's limit of 1048576 bytes" } },
        { jsonrpc: "2.0", id: 3, result: {} }
      ])
      expect(server.stderr()).toContain("the message is longer than this server's limit of 1048576 bytes")
    }).pipe(Effect.scoped), 60_000)

  it.live("closing stdin while a tool call waits on the model: the model request is aborted and valet mcp exits 0", () =>
    Effect.gen(function*() {
      const model = yield* LoopbackServer.make()
      model.enqueue("/v1/chat/completions", LoopbackServer.stall)
      const path = yield* configFile(`
model: { provider: openai-compatible, baseUrl: "${model.url}/v1", model: loopback-model }
agents:
  slow: { instructions: x }
`)
      const server = yield* rawStdio(path)
      const call = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "slow", arguments: { input: "hi" } } })
      server.write(`${initialize}\n${initialized}\n${call}\n`)
      expect(yield* waitUntil(() => model.requests.some((request) => request.path === "/v1/chat/completions"), 30_000)).toBe(true)
      server.child.stdin.end()
      yield* model.closedEarlySignal
      expect(model.closedEarly()).toBe(1)
      expect(yield* Effect.promise(() => server.exited)).toBe(0)
      // The call was answered before the end: stopped, as a tool error.
      const answered = messagesOf(server.stdout).find((message) => message.id === 2)
      expect(answered?.result?.isError).toBe(true)
      expect(answered?.result?.content?.[0]?.text).toBe("slow stopped: the client closed the connection before the run ended")
    }).pipe(Effect.scoped), 60_000)

  it.live("6 tool calls at once with maxConcurrentRuns 2: never more than 2 model requests in flight; the others wait, then all answer", () =>
    Effect.gen(function*() {
      const model = yield* heldModel
      const path = yield* configFile(`
model: { provider: openai-compatible, baseUrl: "${model.url}/v1", model: held-model }
agents:
  assistant: { instructions: x }
server: { maxConcurrentRuns: 2 }
`)
      const transport = new StdioClientTransport({ command: node, args: ["--import", tsxLoader, bin, "mcp", "--config", path], stderr: "pipe" })
      const client = yield* connect(transport)
      const progress = onTheWire(transport)
      const calls = Array.from({ length: 6 }, (_, i) =>
        client.callTool({ name: "assistant", arguments: { input: `task ${i}` } }, undefined, { onprogress: () => {} }))
      const waiting = () => progress.filter((event) => event.message.includes("waiting for one to end")).length
      // Every call has reached the server: each is running (its model request held) or waiting.
      expect(yield* waitUntil(() => model.inFlight() + waiting() >= 6, 30_000)).toBe(true)
      expect(model.inFlight()).toBe(2)
      expect(waiting()).toBe(4)
      expect(progress.find((event) => event.message.includes("waiting"))?.message).toBe(
        "2 runs are going on, the most this server runs at once: waiting for one to end"
      )
      model.releaseAll()
      const results = yield* Effect.promise(() => Promise.all(calls))
      expect(results.map((result) => [result.isError, textOf(result)])).toEqual(Array.from({ length: 6 }, () => [false, "Done."]))
      expect(model.most()).toBe(2)
    }).pipe(Effect.scoped), 60_000)

  it.live("--http: a body longer than server.maxBodyBytes is refused (413) before it is read", () =>
    Effect.gen(function*() {
      const path = yield* configFile(`${config}\nserver: { maxBodyBytes: 4096 }\n`)
      const { url } = yield* httpServer(path)
      const post = (headers: Record<string, string>, body: string) =>
        Effect.promise(() =>
          new Promise<{ readonly status: number; readonly body: string }>((resolve, reject) => {
            const request = httpRequest(url, {
              method: "POST",
              headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers }
            }, (response) => {
              let text = ""
              response.on("data", (data: Buffer) => void (text += data.toString()))
              response.on("end", () => resolve({ status: response.statusCode ?? 0, body: text }))
            })
            request.on("error", reject)
            request.end(body)
          })
        )
      const big = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping", params: { _meta: { pad: "x".repeat(10_000) } } })
      const refused = yield* post({ "content-length": String(Buffer.byteLength(big)) }, big)
      expect(refused.status).toBe(413)
      expect(JSON.parse(refused.body)).toEqual({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32600, message: `Invalid Request: the request body is ${Buffer.byteLength(big)} bytes, more than this server's limit of 4096` }
      })
      // Without a length (chunked), the body is cut at the limit while it is read: a parse error, not a whole read.
      const chunked = yield* post({ "transfer-encoding": "chunked" }, big)
      expect(JSON.parse(chunked.body.replace(/^data: /, ""))).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } })
    }).pipe(Effect.scoped), 60_000)

  it.effect("limits given in code are checked: one line naming the field, the rule and the value", () =>
    Effect.gen(function*() {
      const served = McpAgents.serveStdio({ maxConcurrentRuns: 0 }).pipe(Effect.provide([Agents.layer([]), Stdio.layerTest({})]))
      expect((yield* Effect.flip(served)).message).toBe("McpAgents: maxConcurrentRuns must be an integer >= 1, got 0")
      const layer = McpAgents.layerStdio({ maxBodyBytes: 1.5 }).pipe(Layer.provide([Agents.layer([]), Stdio.layerTest({})]))
      expect((yield* Effect.flip(Layer.build(layer))).message).toBe("McpAgents: maxBodyBytes must be an integer >= 1, got 1.5")
    }).pipe(Effect.scoped))

  it.live("layerHttp: a route middleware provided to it (the place of an HTTP guard) wraps the MCP routes beside the body limit", () =>
    Effect.gen(function*() {
      // A guard refusing requests without a token, as the server's own would.
      const guard = HttpRouter.middleware((httpEffect) =>
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          request.headers["authorization"] === "Bearer s3cret" ? httpEffect : Effect.succeed(HttpServerResponse.empty({ status: 401 })))
      ).layer
      const app = McpAgents.layerHttp({ maxBodyBytes: 1024 }).pipe(Layer.provide(guard), Layer.provide(Agents.layer([])))
      const { dispose, handler } = HttpRouter.toWebHandler(app, { disableLogger: true })
      yield* Effect.addFinalizer(() => Effect.promise(dispose))
      const post = (body: string, headers: Record<string, string> = {}) =>
        Effect.promise(() =>
          handler(new Request("http://127.0.0.1/mcp", {
            method: "POST",
            body,
            headers: {
              "content-type": "application/json",
              accept: "application/json, text/event-stream",
              "content-length": String(Buffer.byteLength(body)),
              ...headers
            }
          }))
        )
      const big = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping", params: { _meta: { pad: "x".repeat(2000) } } })
      expect((yield* post(big)).status).toBe(401)
      const refused = yield* post(big, { authorization: "Bearer s3cret" })
      expect(refused.status).toBe(413)
      expect(yield* Effect.promise(() => refused.json())).toMatchObject({ id: null, error: { code: -32600 } })
      const init = yield* post(initialize, { authorization: "Bearer s3cret" })
      expect(init.status).toBe(200)
    }).pipe(Effect.scoped))
})

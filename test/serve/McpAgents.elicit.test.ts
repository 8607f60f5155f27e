/**
 * MCP elicitation: a valet MCP server asks the client that called an agent's tool to decide the run's tool calls that
 * need approval and to answer its questions (`elicitation/create`), driven by a client no one here wrote — the
 * `@modelcontextprotocol/sdk` `Client` — over Streamable HTTP (valet's `layerHttp` behind a web handler, the SDK's
 * `fetch` pointed at it) and over stdio (valet's `serveStdio`, its own line reader included, on an in-memory pipe).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { type ElicitRequest, ElicitRequestSchema, type ElicitResult, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { describe, expect, it } from "@effect/vitest"
import { type Cause, Effect, Layer, Queue, Schema, Sink, Stdio, Stream } from "effect"
import { HttpRouter } from "effect/http"
import { TestClock } from "effect/testing"
import * as Agent from "../../src/core/Agent.js"
import * as Architecture from "../../src/core/Architecture.js"
import * as HumanLoop from "../../src/core/HumanLoop.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Agents from "../../src/serve/Agents.js"
import * as McpAgents from "../../src/serve/McpAgents.js"
import { refundCall, supportAgent } from "../support/approvals.js"
import { eventually, realDelay } from "../support/testClockIo.js"

type AnyAgent = Agent.Agent<never>

/** What the client's person does with each form: a function of the request (and how many came before). */
type Person = (request: ElicitRequest["params"], index: number, signal: AbortSignal) => ElicitResult | Promise<ElicitResult>

/** The forms the client received, in order, and the signals of their requests (aborted when the server cancels one). */
interface Seen {
  readonly forms: Array<ElicitRequest["params"]>
  readonly signals: Array<AbortSignal>
}

/** An SDK client (with the elicitation capability when `person` is given), answering forms as `person` does. */
const sdkClient = (person: Person | undefined): { readonly client: Client; readonly seen: Seen } => {
  const client = new Client({ name: "valet-test", version: "1.0.0" }, person === undefined ? {} : { capabilities: { elicitation: {} } })
  const seen: Seen = { forms: [], signals: [] }
  if (person !== undefined) {
    client.setRequestHandler(ElicitRequestSchema, (request, extra) => {
      seen.forms.push(request.params)
      seen.signals.push(extra.signal)
      return person(request.params, seen.forms.length - 1, extra.signal)
    })
  }
  return { client, seen }
}

/** The agents served over Streamable HTTP in this process, the SDK client connected; both closed with the scope. */
const overHttp = (agents: ReadonlyArray<AnyAgent>, person: Person | undefined, humanLoop?: HumanLoop.Service) =>
  Effect.gen(function*() {
    const served = McpAgents.layerHttp().pipe(Layer.provide(Agents.layer(agents)))
    const app = humanLoop === undefined ? served : served.pipe(Layer.provide(Layer.succeed(HumanLoop.HumanLoop, humanLoop)))
    const { dispose, handler } = HttpRouter.toWebHandler(app, { disableLogger: true })
    yield* Effect.addFinalizer(() => Effect.promise(dispose))
    const { client, seen } = sdkClient(person)
    const transport = new StreamableHTTPClientTransport(new URL("http://127.0.0.1/mcp"), {
      fetch: (url, init) => handler(new Request(url, init))
    })
    yield* Effect.acquireRelease(Effect.promise(() => client.connect(transport)), () => Effect.promise(() => client.close()))
    return { client, seen, transport }
  })

/**
 * An MCP stdio pipe in memory: what the client writes is the server's stdin, and the server's stdout is cut into
 * lines (each kept, to check that only JSON-RPC went out) and handed to the client.
 */
const memoryPipe = Effect.gen(function*() {
  const stdin = yield* Queue.unbounded<Uint8Array, Cause.Done>()
  const lines: Array<string> = []
  let partial = ""
  const encoder = new TextEncoder()
  const decoder = new TextDecoder()
  const transport: Transport = {
    start: () => Promise.resolve(),
    send: (message: JSONRPCMessage) => {
      Queue.offerUnsafe(stdin, encoder.encode(`${JSON.stringify(message)}\n`))
      return Promise.resolve()
    },
    close: () => {
      Queue.endUnsafe(stdin)
      transport.onclose?.()
      return Promise.resolve()
    }
  }
  const receive = (chunk: string | Uint8Array) =>
    Effect.sync(() => {
      partial += typeof chunk === "string" ? chunk : decoder.decode(chunk)
      let newline = partial.indexOf("\n")
      while (newline !== -1) {
        const line = partial.slice(0, newline)
        partial = partial.slice(newline + 1)
        lines.push(line)
        transport.onmessage?.(JSON.parse(line) as JSONRPCMessage)
        newline = partial.indexOf("\n")
      }
    })
  const stdio = Stdio.make({
    args: Effect.succeed([]),
    stdin: Stream.fromQueue(stdin),
    stdout: () => Sink.forEach(receive),
    stderr: () => Sink.drain
  })
  return { stdio, transport, lines, write: (text: string) => void Queue.offerUnsafe(stdin, encoder.encode(text)) }
})

/** The agents served over stdio in this process (`serveStdio`, as `valet mcp` runs it), on a memory pipe. */
const stdioServer = (agents: ReadonlyArray<AnyAgent>) =>
  Effect.gen(function*() {
    const pipe = yield* memoryPipe
    yield* Effect.forkScoped(McpAgents.serveStdio().pipe(Effect.provide(Agents.layer(agents)), Effect.provideService(Stdio.Stdio, pipe.stdio)))
    return pipe
  })

/** `stdioServer` with the SDK client connected (closed with the scope). */
const overStdio = (agents: ReadonlyArray<AnyAgent>, person: Person | undefined) =>
  Effect.gen(function*() {
    const pipe = yield* stdioServer(agents)
    const { client, seen } = sdkClient(person)
    yield* Effect.acquireRelease(Effect.promise(() => client.connect(pipe.transport)), () => Effect.promise(() => client.close()))
    return { client, seen, lines: pipe.lines }
  })

const textOf = (result: Awaited<ReturnType<Client["callTool"]>>): string =>
  (result.content as Array<{ type: string; text?: string }>).map((part) => part.text ?? "").join("")

/** A model that calls `refund` as `calls` say, then answers what it read: the tool results, one per line. */
const readsToolResults = (calls: ReadonlyArray<ReturnType<typeof refundCall>>): ScriptedModel.Script => (request, index) =>
  index === 0
    ? { toolCalls: calls }
    : (request.messages ?? []).filter((message) => message.role === "tool").map((message) => message.content).join("\n")

const accept = (content: ElicitResult["content"]): ElicitResult => ({ action: "accept", content })

describe("McpAgents: approvals by elicitation", () => {
  it.live("HTTP: the client is asked with a form (approve, reason, arguments); approved, the tool runs once", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent(readsToolResults([refundCall("c1", 250)]))
      const { client, seen } = yield* overHttp([agent], () => accept({ approve: true }))
      const result = yield* Effect.promise(() => client.callTool({ name: "support", arguments: { input: "Refund 250." } }))
      expect(result.isError).toBe(false)
      expect(textOf(result)).toBe("refunded 250")
      expect(ran).toEqual([250])
      expect(seen.forms).toHaveLength(1)
      expect(seen.forms[0]).toMatchObject({
        mode: "form",
        message: `The agent support wants to call the tool refund with {"amount":250}. Approve this call?`,
        requestedSchema: {
          type: "object",
          properties: { approve: { type: "boolean" }, reason: { type: "string" }, arguments: { type: "string", default: `{"amount":250}` } },
          required: ["approve"]
        }
      })
    }).pipe(Effect.scoped))

  it.live("HTTP: declined, the tool never runs and the model reads why", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent(readsToolResults([refundCall("c1", 250)]))
      const { client } = yield* overHttp([agent], () => ({ action: "decline" }))
      const result = yield* Effect.promise(() => client.callTool({ name: "support", arguments: { input: "Refund 250." } }))
      expect(result.isError).toBe(false)
      expect(textOf(result)).toBe("ERROR: rejected: declined by the MCP client")
      expect(ran).toEqual([])
    }).pipe(Effect.scoped))

  it.live("HTTP: edited arguments the tool's schema refuses: asked again with the error; the fixed ones run", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent(readsToolResults([refundCall("c1", 250)]))
      const { client, seen } = yield* overHttp([agent], (_, index) =>
        accept(index === 0 ? { approve: true, arguments: `{"amount":"lots"}` } : { approve: true, arguments: `{"amount":200}`, reason: "at most 200" }))
      const result = yield* Effect.promise(() => client.callTool({ name: "support", arguments: { input: "Refund 250." } }))
      expect(textOf(result)).toBe("refunded 200")
      expect(ran).toEqual([200])
      expect(seen.forms).toHaveLength(2)
      expect(seen.forms[1]!.message).toMatch(/^Your last answer did not fit: arguments: invalid arguments for tool "refund": amount must be a number, got "lots"\n\nThe agent support wants/)
    }).pipe(Effect.scoped))

  it.live("stdio: a client that rejects with a reason; the model reads it", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent(readsToolResults([refundCall("c1", 250)]))
      const { client, lines } = yield* overStdio([agent], () => accept({ approve: false, reason: "too much" }))
      const result = yield* Effect.promise(() => client.callTool({ name: "support", arguments: { input: "Refund 250." } }))
      expect(textOf(result)).toBe("ERROR: rejected: too much")
      expect(ran).toEqual([])
      // The elicitation request and the client's answer went through valet's line reader; stdout carried JSON-RPC only.
      expect(lines.some((line) => line.includes(`"method":"elicitation/create"`))).toBe(true)
      for (const line of lines) expect(JSON.parse(line)).toMatchObject({ jsonrpc: "2.0" })
    }).pipe(Effect.scoped))

  it.live("two calls of one turn are asked at once (both forms out before either is answered), each decided by its own", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent(readsToolResults([refundCall("c1", 250), refundCall("c2", 300)]))
      const answers: Array<(result: ElicitResult) => void> = []
      const { client, seen } = yield* overStdio([agent], () => new Promise<ElicitResult>((resolve) => void answers.push(resolve)))
      const call = client.callTool({ name: "support", arguments: { input: "Refund both." } })
      yield* eventually(() => answers.length === 2, "both forms sent")
      const second = seen.forms.findIndex((form) => form.message.includes(`{"amount":300}`))
      answers[second]!(accept({ approve: true }))
      answers[1 - second]!({ action: "cancel" })
      const result = yield* Effect.promise(() => call)
      expect(textOf(result)).toBe("ERROR: rejected: cancelled by the MCP client\nrefunded 300")
      expect(ran).toEqual([300])
    }).pipe(Effect.scoped))
})

describe("McpAgents: a client that cannot answer", () => {
  it.live("no elicitation capability: the call is rejected with a reason saying so, and the MCP call returns a result", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent(readsToolResults([refundCall("c1", 250)]))
      const { client } = yield* overStdio([agent], undefined)
      const result = yield* Effect.promise(() => client.callTool({ name: "support", arguments: { input: "Refund 250." } }))
      expect(result.isError).toBe(false)
      expect(textOf(result)).toBe("ERROR: rejected: the MCP client cannot answer (elicitation not supported: Client did not advertise the elicitation capability)")
      expect(ran).toEqual([])
    }).pipe(Effect.scoped))

  it.live("protocol 2025-03-26 (no elicitation in it), capability or not: the ask_human tool reads that nobody can answer", () =>
    Effect.gen(function*() {
      const agent = Agent.make({
        name: "asker",
        instructions: "Ask.",
        tools: [HumanLoop.askTool()],
        model: Layer.orDie(ScriptedModel.layer((request, index) =>
          index === 0 ? { toolCalls: [{ id: "a1", name: "ask_human", arguments: { question: "Which city?" } }] } : `${request.messages?.at(-1)?.content}`))
      }) as AnyAgent
      const pipe = yield* stdioServer([agent])
      const initialize = {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-03-26", capabilities: { elicitation: {} }, clientInfo: { name: "raw", version: "1" } }
      }
      const call = { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "asker", arguments: { input: "Plan a trip." } } }
      pipe.write(`${JSON.stringify(initialize)}\n${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n${JSON.stringify(call)}\n`)
      yield* eventually(() => pipe.lines.some((line) => JSON.parse(line).id === 2), "the call's answer")
      const messages = pipe.lines.map((line) => JSON.parse(line))
      expect(messages.find((message) => message.id === 1)?.result?.protocolVersion).toBe("2025-03-26")
      expect(messages.some((message) => message.method === "elicitation/create")).toBe(false)
      expect(messages.find((message) => message.id === 2)?.result).toMatchObject({
        isError: false,
        content: [{ type: "text", text: "ERROR: tool \"ask_human\" failed: no answer: the MCP client cannot answer (elicitation not supported: Elicitation was introduced after this protocol revision)" }]
      })
    }).pipe(Effect.scoped))
})

describe("McpAgents: questions by elicitation", () => {
  /** An architecture that asks where and how long, then answers with it. */
  const planner = Agent.make({
    name: "planner",
    instructions: "",
    architecture: Architecture.make({
      name: "asks",
      program: () =>
        Effect.gen(function*() {
          const trip = yield* Architecture.ask(
            "Where to, and for how many nights?",
            Schema.Struct({ city: Schema.String, nights: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 14 })) })
          )
          return { output: `${trip.nights} nights in ${trip.city}` }
        })
    }),
    model: Layer.orDie(ScriptedModel.layer([]))
  }) as AnyAgent

  it.live("stdio: a form from the question's schema; an answer it refuses is asked again with the error, the next one answers", () =>
    Effect.gen(function*() {
      const { client, seen } = yield* overStdio([planner], (_, index) =>
        accept(index === 0 ? { city: "Lisbon", nights: 30 } : { city: "Lisbon", nights: 4 }))
      const result = yield* Effect.promise(() => client.callTool({ name: "planner", arguments: { input: "Plan a trip." } }))
      expect(result.isError).toBe(false)
      expect(textOf(result)).toBe("4 nights in Lisbon")
      expect(seen.forms).toHaveLength(2)
      expect(seen.forms[0]).toMatchObject({
        message: "Where to, and for how many nights?",
        requestedSchema: {
          type: "object",
          properties: { city: { type: "string" }, nights: { type: "integer", minimum: 1, maximum: 14 } },
          required: ["city", "nights"]
        }
      })
      expect(seen.forms[1]!.message).toMatch(/^Your last answer did not fit: the answer does not fit: .*nights.*30/s)
    }).pipe(Effect.scoped))

  it.live("HTTP: three answers that do not fit: the question is dismissed and the run ends Unanswered (an isError result)", () =>
    Effect.gen(function*() {
      const { client, seen } = yield* overHttp([planner], () => accept({ city: "Lisbon", nights: 0 }))
      const result = yield* Effect.promise(() => client.callTool({ name: "planner", arguments: { input: "Plan a trip." } }))
      expect(seen.forms).toHaveLength(3)
      expect(result.isError).toBe(true)
      expect(textOf(result)).toMatch(/^planner failed: .*the MCP client's answer did not fit 3 times; the last: the answer does not fit/s)
    }).pipe(Effect.scoped))
})

describe("McpAgents: elicitations end with their wait", () => {
  it.effect("approvalTimeout passes while the form is open: the call is rejected, the form cancelled on the client", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent(readsToolResults([refundCall("c1", 250)]), { approvalTimeout: "10 minutes" })
      const { client, seen } = yield* overStdio([agent], () => new Promise<ElicitResult>(() => {}))
      const call = client.callTool({ name: "support", arguments: { input: "Refund 250." } })
      yield* eventually(() => seen.forms.length === 1, "the form sent")
      yield* TestClock.adjust("10 minutes")
      const result = yield* Effect.promise(() => call)
      expect(textOf(result)).toBe("ERROR: rejected: no decision within 10m")
      expect(ran).toEqual([])
      yield* eventually(() => seen.signals[0]!.aborted, "the form's request cancelled")
    }).pipe(Effect.scoped))

  it.live("the client cancels the MCP call while the form is open: the run stops, the form is cancelled, the tool never runs", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent(readsToolResults([refundCall("c1", 250)]))
      const { client, seen } = yield* overStdio([agent], () => new Promise<ElicitResult>(() => {}))
      const controller = new AbortController()
      const call = client.callTool({ name: "support", arguments: { input: "Refund 250." } }, undefined, { signal: controller.signal }).then(
        () => "answered",
        (error: Error) => error.message
      )
      yield* eventually(() => seen.forms.length === 1, "the form sent")
      controller.abort()
      expect(yield* Effect.promise(() => call)).toMatch(/abort|cancel/i)
      yield* eventually(() => seen.signals[0]!.aborted, "the form's request cancelled")
      expect(ran).toEqual([])
    }).pipe(Effect.scoped))
})

describe("McpAgents: the app's own HumanLoop beside the client", () => {
  it.live("a client without elicitation: the call waits in the app's HumanLoop (not rejected), and its decision runs the tool", () =>
    Effect.gen(function*() {
      const loop = yield* HumanLoop.make
      const { agent, ran } = supportAgent(readsToolResults([refundCall("c1", 250)]))
      const { client } = yield* overHttp([agent], undefined, loop)
      const progress: Array<string> = []
      const call = client.callTool({ name: "support", arguments: { input: "Refund 250." } }, undefined, {
        onprogress: ({ message }) => void progress.push(message ?? "")
      })
      const [waiting] = yield* loop.awaitPending(1)
      expect(waiting).toMatchObject({ toolCallId: "c1", name: "refund", arguments: `{"amount":250}` })
      // The client hears why its call takes long (and restarts its timeout when it asked for that).
      yield* eventually(() => progress.some((message) => message.endsWith("tool refund waits for approval [call c1]")), "the progress note")
      yield* loop.decide("c1", { approved: true })
      expect(textOf(yield* Effect.promise(() => call))).toBe("refunded 250")
      expect(ran).toEqual([250])
    }).pipe(Effect.scoped))

  it.live("decided in the app while the form is open: the tool runs once and the client's form is cancelled", () =>
    Effect.gen(function*() {
      const loop = yield* HumanLoop.make
      const { agent, ran } = supportAgent(readsToolResults([refundCall("c1", 250)]))
      const { client, seen } = yield* overHttp([agent], () => new Promise<ElicitResult>(() => {}), loop)
      const call = client.callTool({ name: "support", arguments: { input: "Refund 250." } })
      yield* eventually(() => seen.forms.length === 1, "the form sent")
      yield* loop.decide("c1", { approved: false, reason: "decided on the dashboard" })
      expect(textOf(yield* Effect.promise(() => call))).toBe("ERROR: rejected: decided on the dashboard")
      yield* eventually(() => seen.signals[0]!.aborted, "the form's request cancelled")
      expect(ran).toEqual([])
    }).pipe(Effect.scoped))

  it.live("HTTP: the client ends its session (DELETE) while the form is open: the run stops, its call no longer waits", () =>
    Effect.gen(function*() {
      const loop = yield* HumanLoop.make
      const { agent, ran } = supportAgent(readsToolResults([refundCall("c1", 250)]))
      const { client, seen, transport } = yield* overHttp([agent], () => new Promise<ElicitResult>(() => {}), loop)
      const call = client.callTool({ name: "support", arguments: { input: "Refund 250." } }).then(() => "answered", (error: Error) => error.message)
      yield* eventually(() => seen.forms.length === 1, "the form sent")
      expect(yield* loop.pending()).toHaveLength(1)
      yield* Effect.promise(() => transport.terminateSession())
      // The run was interrupted: its call left the loop's list (a run still going would keep it there).
      for (let waited = 0; (yield* loop.pending()).length > 0 && waited < 5_000; waited += 10) yield* realDelay(10)
      expect(yield* loop.pending()).toEqual([])
      expect(ran).toEqual([])
      void call
    }).pipe(Effect.scoped))
})

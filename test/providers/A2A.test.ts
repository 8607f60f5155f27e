/**
 * A remote A2A 1.0 agent as a valet agent (`A2A.agent`), against servers no one here wrote — the official
 * `@a2a-js/sdk` server (`DefaultRequestHandler` + `InMemoryTaskStore` + an `AgentExecutor`, on express) — and against
 * valet's own `A2aApi`, all over loopback.
 */
import { AgentEvent as SdkEvent, type AgentExecutor, DefaultRequestHandler, type ExecutionEventBus, InMemoryTaskStore, type RequestContext } from "@a2a-js/sdk/server"
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express"
import { type AgentCard, type Part, TaskState } from "@a2a-js/sdk"
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Schedule, Stream } from "effect"
import express from "express"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import * as MultiAgentDebate from "../../src/architectures/MultiAgentDebate.js"
import * as Router from "../../src/architectures/Router.js"
import * as Supervisor from "../../src/architectures/Supervisor.js"
import * as Agent from "../../src/core/Agent.js"
import * as AgentError from "../../src/core/AgentError.js"
import * as HumanLoop from "../../src/core/HumanLoop.js"
import type * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as A2A from "../../src/providers/A2A.js"
import { scriptedAgent, serveAgents } from "../support/serve.js"

const text = (value: string): Part => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "text/plain" })
const textOf = (parts: ReadonlyArray<Part>) => parts.map((part) => (part.content?.$case === "text" ? part.content.value : "")).join("")

/** What a test executor saw: the user messages' text, the cancels. */
interface Seen {
  readonly messages: Array<string>
  readonly cancelled: Array<string>
}

type Script = (context: RequestContext, bus: ExecutionEventBus, seen: Seen) => Promise<void>

const status = (context: RequestContext, state: TaskState, message?: string) =>
  SdkEvent.statusUpdate({
    taskId: context.taskId,
    contextId: context.contextId,
    status: {
      state,
      message: message === undefined ? undefined : {
        messageId: `s-${Math.random()}`,
        contextId: context.contextId,
        taskId: context.taskId,
        role: 2,
        parts: [text(message)],
        metadata: undefined,
        extensions: [],
        referenceTaskIds: []
      },
      timestamp: new Date().toISOString()
    },
    metadata: undefined
  })

const task = (context: RequestContext) =>
  SdkEvent.task({
    id: context.taskId,
    contextId: context.contextId,
    status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: new Date().toISOString() },
    artifacts: [],
    history: [context.userMessage],
    metadata: undefined
  })

const chunk = (context: RequestContext, value: string, append: boolean, lastChunk: boolean) =>
  SdkEvent.artifactUpdate({
    taskId: context.taskId,
    contextId: context.contextId,
    artifact: { artifactId: "answer", name: "answer", description: "", parts: [text(value)], metadata: undefined, extensions: [] },
    append,
    lastChunk,
    metadata: undefined
  })

/** A task, two artifact chunks, then COMPLETED. */
const hello: Script = async (context, bus) => {
  bus.publish(task(context))
  bus.publish(chunk(context, "Hello, ", false, false))
  bus.publish(chunk(context, "world", true, true))
  bus.publish(status(context, TaskState.TASK_STATE_COMPLETED))
  bus.finished()
}

const cardOf = (url: string, interfaces?: ReadonlyArray<{ readonly protocolBinding: string; readonly protocolVersion: string }>, streaming = true): AgentCard => ({
  name: "remote",
  description: "A remote agent.",
  version: "1.0.0",
  supportedInterfaces: (interfaces ?? [{ protocolBinding: "JSONRPC", protocolVersion: "1.0" }]).map((entry) => ({ url: `${url}/rpc`, tenant: "", ...entry })),
  provider: undefined,
  capabilities: { streaming, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ["text/plain"],
  defaultOutputModes: ["text/plain"],
  skills: [{ id: "remote", name: "remote", description: "Answers.", tags: ["test"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: []
} as unknown as AgentCard)

/**
 * The SDK's server with `script` as its executor, on a free loopback port for the scope. `tap` sees each JSON-RPC
 * request first (its method, and the response, to cut a stream).
 */
const sdkServer = (
  script: Script,
  options: {
    readonly interfaces?: ReadonlyArray<{ readonly protocolBinding: string; readonly protocolVersion: string }>
    readonly streaming?: boolean
    /** Sees each JSON-RPC request first; true when it answered the request itself. */
    readonly tap?: (method: string, response: express.Response) => boolean | void
  } = {}
) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly url: string; readonly seen: Seen; readonly methods: Array<string>; readonly cards: () => number; readonly close: () => void }>((resolve) => {
        const seen: Seen = { messages: [], cancelled: [] }
        const methods: Array<string> = []
        let cards = 0
        const app = express()
        const server = app.listen(0, "127.0.0.1", () => {
          const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
          const executor: AgentExecutor = {
            execute: (context, bus) => {
              seen.messages.push(textOf(context.userMessage.parts))
              return script(context, bus, seen)
            },
            cancelTask: async (taskId, bus) => {
              seen.cancelled.push(taskId)
              bus.publish(SdkEvent.statusUpdate({
                taskId,
                contextId: "",
                status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() },
                metadata: undefined
              }))
              bus.finished()
            }
          }
          const handler = new DefaultRequestHandler(cardOf(url, options.interfaces, options.streaming), new InMemoryTaskStore(), executor)
          app.use("/.well-known/agent-card.json", (_req, _res, next) => (cards++, next()), agentCardHandler({ agentCardProvider: handler }))
          app.use("/rpc", express.json(), (req, res, next) => {
            const method = String((req.body as { method?: unknown }).method)
            methods.push(method)
            if (options.tap?.(method, res) !== true) next()
          }, jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }))
          resolve({ url, seen, methods, cards: () => cards, close: () => (server.closeAllConnections(), server.close()) })
        })
      })
    ),
    (server) => Effect.sync(server.close)
  )

const toolResults = (request: Model.Request) => (request.messages ?? []).filter((message): message is Model.ToolMessage => message.role === "tool")

/** Destroys the response's socket after its second write (the task, then the first chunk: a stream cut mid-way). */
const cutAfterTwoWrites = (response: { write: unknown; readonly socket?: { destroy(): void } | null }) => {
  const write = (response.write as (chunk: unknown) => boolean).bind(response)
  let writes = 0
  response.write = (data: unknown) => {
    const ok = write(data)
    if (++writes === 2) setImmediate(() => response.socket?.destroy())
    return ok
  }
}

describe("A2A.agent", () => {
  it.live("a Supervisor worker on the SDK's server: the task is the delegation, its chunks stream as the worker's TextDeltas, its text is the worker's answer", () =>
    Effect.gen(function*() {
      const server = yield* sdkServer(hello)
      const remote = A2A.agent(server.url, { name: "remote", description: "Says hello." })
      const lead = Agent.make({ name: "lead", instructions: "Delegate.", architecture: Supervisor.makeUnsafe({ workers: [remote] }) })
      const events = yield* Stream.runCollect(Agent.stream(lead, "Greet.", { sessionId: "s" }))
      expect(server.seen.messages).toEqual(["Say hello."])
      const worker = events.find((event) => event._tag === "RunStarted" && event.sessionId !== "s")!.sessionId
      expect(events.filter((event) => event._tag === "TextDelta" && event.sessionId === worker).map((event) => (event as { text: string }).text)).toEqual(["Hello, ", "world"])
      expect(events.find((event) => event._tag === "ModelReplied" && event.sessionId === worker)).toMatchObject({ text: "Hello, world", usage: { totalTokens: 0 } })
      expect(events.find((event) => event._tag === "RunCompleted" && event.sessionId === worker)).toMatchObject({
        result: { output: "Hello, world", modelCalls: 1, metadata: { a2a: { exchanges: 1 } } }
      })
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", sessionId: "s", result: { output: "It said hello." } })
      // The supervisor read the remote answer as the delegation's result.
      expect(toolResults((yield* ScriptedModel.calls)[1]!)[0]!.content).toContain("Hello, world")
      expect(server.cards()).toBe(1)
    }).pipe(Effect.scoped, Effect.provide(ScriptedModel.layer([{ toolCalls: [{ name: "delegate", arguments: { worker: "remote", instructions: "Say hello." } }] }, "It said hello."]))), 30_000)

  it.live("the card is read once per root run: a supervisor delegating twice reads it once, its next run once more", () =>
    Effect.gen(function*() {
      const server = yield* sdkServer(hello)
      const lead = Agent.make({ name: "lead", instructions: "Delegate.", architecture: Supervisor.makeUnsafe({ workers: [A2A.agent(server.url, { name: "remote" })] }) })
      const delegate = { toolCalls: [{ name: "delegate", arguments: { worker: "remote", instructions: "Say hello." } }] }
      const twice = ScriptedModel.layer([delegate, delegate, "Done.", delegate, "Done again."])
      const [first, second] = yield* Effect.all([Agent.run(lead, "Greet twice."), Agent.run(lead, "Greet once.")]).pipe(Effect.provide(twice))
      expect([first.output, second.output]).toEqual(["Done.", "Done again."])
      expect(server.seen.messages).toEqual(["Say hello.", "Say hello.", "Say hello."])
      expect(server.cards()).toBe(2)
    }).pipe(Effect.scoped), 30_000)

  it.live("against valet's own A2A server, behind its token: the served agent's answer; without the token a RemoteAgentFailed 401 in one line", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("assistant", ["4"])], { token: "secret" })
      const result = yield* Agent.run(A2A.agent(`${url}/a2a/assistant`, { name: "assistant", token: "secret" }), "2 + 2?")
      expect(result.output).toBe("4")
      expect(result.metadata).toMatchObject({ a2a: { exchanges: 1 } })
      const refused = yield* Effect.flip(Agent.run(A2A.agent(`${url}/a2a/assistant`, { name: "assistant" }), "2 + 2?"))
      expect(refused).toBeInstanceOf(AgentError.RemoteAgentFailed)
      expect(refused).toMatchObject({ _tag: "RemoteAgentFailed", code: 401, reason: "http", url: `${url}/a2a/assistant/.well-known/agent-card.json` })
      expect(refused.message).not.toContain("\n")
      expect(refused.message).toMatch(/^remote agent http:\/\/127\.0\.0\.1:\d+\/a2a\/assistant\/\.well-known\/agent-card\.json failed \(http 401\): HTTP 401/)
      // Under a base with no card of its own, the origin's card, whose endpoint is under that base.
      expect((yield* A2A.card(`${url}/a2a`, { token: "secret" })).name).toBe("assistant")
      // A mistyped agent: its card is a 404, and the root card (the default agent's) does not stand for it.
      const typo = yield* Effect.flip(Agent.run(A2A.agent(`${url}/a2a/asistant`, { name: "assistant", token: "secret" }), "2 + 2?"))
      expect(typo).toMatchObject({ _tag: "RemoteAgentFailed", code: 404, url: `${url}/a2a/asistant` })
      expect(typo.message).toContain(`the card at ${url}/.well-known/agent-card.json is of "assistant" at ${url}/a2a/assistant: give the agent's card URL`)
    }).pipe(Effect.scoped), 30_000)

  it.live("a card with no JSON-RPC 1.x interface, and a task that FAILED: RemoteAgentFailed naming what was offered, and the remote's line", () =>
    Effect.gen(function*() {
      const grpc = yield* sdkServer(hello, { interfaces: [{ protocolBinding: "GRPC", protocolVersion: "1.0" }, { protocolBinding: "JSONRPC", protocolVersion: "0.3" }] })
      const noJsonRpc = yield* Effect.flip(Agent.run(A2A.agent(grpc.url, { name: "remote" }), "Hi."))
      expect(noJsonRpc).toMatchObject({ _tag: "RemoteAgentFailed", reason: "no_jsonrpc_interface", code: 0 })
      expect(noJsonRpc.message).toContain("offers no JSONRPC 1.x interface (it offers GRPC 1.0, JSONRPC 0.3)")
      expect(grpc.seen.messages).toEqual([])
      const failing = yield* sdkServer(async (context, bus) => {
        bus.publish(task(context))
        bus.publish(status(context, TaskState.TASK_STATE_FAILED, "disk full"))
        bus.finished()
      })
      const failed = yield* Effect.flip(Agent.run(A2A.agent(`${failing.url}/.well-known/agent-card.json`, { name: "remote" }), "Hi."))
      expect(failed).toMatchObject({ _tag: "RemoteAgentFailed", reason: "task_failed", url: `${failing.url}/rpc` })
      expect(failed.message).toMatch(/failed: disk full$/)
    }).pipe(Effect.scoped), 30_000)

  it.live("interrupting the valet run cancels the remote task (the executor's cancelTask is called)", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const stops: Array<() => void> = []
      const server = yield* sdkServer(async (context, bus) => {
        bus.publish(task(context))
        bus.publish(chunk(context, "thinking", false, false))
        // Works until cancelled (the SDK drops a task's bus once `execute` returns).
        await new Promise<void>((resolve) => void stops.push(resolve))
      })
      // Interrupted once the run has streamed the task's first chunk: the client knows the task by then.
      const fiber = yield* Effect.forkChild(Stream.runForEach(Agent.stream(A2A.agent(server.url, { name: "remote" }), "Think forever."), (event) =>
        event._tag === "TextDelta" ? Deferred.succeed(started, undefined) : Effect.void))
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      // `Fiber.interrupt` waits for the run's finalizers: the cancel has been answered by now.
      expect(server.seen.cancelled).toHaveLength(1)
      expect(server.methods).toEqual(["SendStreamingMessage", "CancelTask"])
      stops.forEach((stop) => stop())
    }).pipe(Effect.scoped), 30_000)

  it.live("a stream cut mid-way is resumed with SubscribeToTask: the output is whole, no text twice", () =>
    Effect.gen(function*() {
      let release: () => void = () => {}
      const resumed = new Promise<void>((resolve) => (release = resolve))
      let cut = false
      const server = yield* sdkServer(async (context, bus) => {
        bus.publish(task(context))
        bus.publish(chunk(context, "Hello, ", false, false))
        await resumed
        bus.publish(chunk(context, "world", true, true))
        bus.publish(status(context, TaskState.TASK_STATE_COMPLETED))
        bus.finished()
      }, {
        tap: (method, response) => {
          if (method === "SubscribeToTask") setTimeout(release, 100)
          if (method !== "SendStreamingMessage" || cut) return false
          cut = true
          // The socket dies after the first artifact chunk (the task, then the chunk: two SSE writes).
          cutAfterTwoWrites(response)
          return false
        }
      })
      const remote = A2A.agent(server.url, { name: "remote", resubscribe: Schedule.spaced("50 millis").pipe(Schedule.while(({ attempt }) => attempt <= 5)) })
      const events = yield* Stream.runCollect(Agent.stream(remote, "Hi.", { sessionId: "r" }))
      expect(server.methods).toEqual(["SendStreamingMessage", "SubscribeToTask"])
      expect(events.filter((event) => event._tag === "TextDelta").map((event) => (event as { text: string }).text)).toEqual(["Hello, ", "world"])
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Hello, world", modelCalls: 1 } })
    }).pipe(Effect.scoped), 30_000)

  it.live("a Router route and a MultiAgentDebate debater may be remote", () =>
    Effect.gen(function*() {
      const server = yield* sdkServer(hello)
      const remote = A2A.agent(server.url, { name: "greeter", description: "Greets." })
      const front = Agent.make({ name: "front", instructions: "Route.", architecture: Router.makeUnsafe({ routes: [{ name: "greeter", agent: remote }] }) })
      const routed = yield* Agent.run(front, "Greet me.").pipe(Effect.provide(ScriptedModel.layer(["route: greeter\nconfidence: 0.9"])))
      expect(routed).toMatchObject({ output: "Hello, world", metadata: { route: "greeter" } })
      const local = scriptedAgent("local", ["Hello, world"])
      const moderator = Agent.make({ name: "moderator", instructions: "", architecture: MultiAgentDebate.makeUnsafe({ debaters: [remote, local], maxRounds: 1 }) })
      const debated = yield* Agent.run(moderator, "Greet me.")
      expect(debated).toMatchObject({ output: "Hello, world", metadata: { decided_by: "convergence" } })
      expect(server.seen.messages).toEqual(["Greet me.", "Greet me."])
    }).pipe(Effect.scoped), 30_000)

  it.live("input required: the run asks (QuestionAsked), the person's answer goes back on the same task, and the task completes", () =>
    Effect.gen(function*() {
      const server = yield* sdkServer(async (context, bus) => {
        if (context.task === undefined) {
          bus.publish(task(context))
          bus.publish(status(context, TaskState.TASK_STATE_INPUT_REQUIRED, "Which city?"))
        } else {
          bus.publish(SdkEvent.task({ ...context.task, status: { state: TaskState.TASK_STATE_WORKING, message: undefined, timestamp: new Date().toISOString() } }))
          bus.publish(chunk(context, `Sunny in ${textOf(context.userMessage.parts)}.`, false, true))
          bus.publish(status(context, TaskState.TASK_STATE_COMPLETED))
        }
        bus.finished()
      })
      const events: Array<{ readonly _tag: string }> = []
      const fiber = yield* Effect.forkChild(Stream.runForEach(Agent.stream(A2A.agent(server.url, { name: "remote" }), "Weather?"), (event) => Effect.sync(() => events.push(event))))
      const [question] = yield* HumanLoop.awaitQuestions(1)
      expect(question).toMatchObject({ question: "Which city?" })
      yield* HumanLoop.answer(question!.questionId, "Paris")
      yield* Fiber.join(fiber)
      expect(server.seen.messages).toEqual(["Weather?", "Paris"])
      expect(events.filter((event) => event._tag.startsWith("Question")).map((event) => event._tag)).toEqual(["QuestionAsked", "QuestionAnswered"])
      // The task's status lines, as the run's progress.
      expect(events.filter((event) => event._tag === "Progress")).toMatchObject([{ name: "a2a.status", data: { state: "TASK_STATE_INPUT_REQUIRED", text: "Which city?" } }])
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Sunny in Paris.", modelCalls: 2, metadata: { a2a: { exchanges: 2 } } } })
    }).pipe(Effect.scoped, Effect.provide(HumanLoop.layer)), 30_000)

  it.live("a cut stream whose task the server no longer knows (-32001 on SubscribeToTask) fails the run with RemoteAgentFailed -32001", () =>
    Effect.gen(function*() {
      const server = yield* sdkServer(async (context, bus) => {
        bus.publish(task(context))
        bus.publish(chunk(context, "Hello, ", false, false))
        await new Promise<void>((resolve) => setTimeout(resolve, 200))
        bus.publish(status(context, TaskState.TASK_STATE_COMPLETED))
        bus.finished()
      }, {
        tap: (method, response) => {
          if (method === "SubscribeToTask") {
            response.status(200).json({ jsonrpc: "2.0", id: (response.req.body as { id: unknown }).id, error: { code: -32001, message: "Task not found: gone" } })
            return true
          }
          cutAfterTwoWrites(response)
          return false
        }
      })
      const failed = yield* Effect.flip(Agent.run(A2A.agent(server.url, { name: "remote" }), "Hi."))
      expect(failed).toMatchObject({ _tag: "RemoteAgentFailed", reason: "json_rpc", code: -32001, url: `${server.url}/rpc` })
      expect(failed.message).toMatch(/SubscribeToTask: Task not found: gone$/)
      expect(server.methods).toEqual(["SendStreamingMessage", "SubscribeToTask"])
    }).pipe(Effect.scoped), 30_000)

  it.live("input required with nobody to ask: the run fails with Unanswered and the remote task is cancelled", () =>
    Effect.gen(function*() {
      const server = yield* sdkServer(async (context, bus) => {
        bus.publish(task(context))
        bus.publish(status(context, TaskState.TASK_STATE_INPUT_REQUIRED, "Which city?"))
        bus.finished()
      })
      const failed = yield* Effect.flip(Agent.run(A2A.agent(server.url, { name: "remote" }), "Weather?"))
      expect(failed).toMatchObject({ _tag: "Unanswered", question: "Which city?" })
      expect(server.methods).toEqual(["SendStreamingMessage", "CancelTask"])
      expect(server.seen.cancelled).toHaveLength(1)
    }).pipe(Effect.scoped), 30_000)

  it.live("a card without streaming: SendMessage, then GetTask until the task settles; the artifact's text is the answer", () =>
    Effect.gen(function*() {
      const server = yield* sdkServer(hello, { streaming: false })
      const events = yield* Stream.runCollect(Agent.stream(A2A.agent(server.url, { name: "remote" }), "Hi."))
      expect(server.methods).toEqual(["SendMessage"])
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Hello, world", modelCalls: 1 } })
      // A server answering at once with a working task: asked again until it is done.
      let asked = 0
      const wire = (state: string, artifacts: ReadonlyArray<unknown> = []) => ({ task: { id: "t1", contextId: "c1", status: { state }, artifacts } })
      const polled = yield* sdkServer(hello, {
        streaming: false,
        tap: (method, response) => {
          const id = (response.req.body as { id: unknown }).id
          const result = method === "SendMessage"
            ? wire("TASK_STATE_WORKING")
            : ++asked < 3
            ? wire("TASK_STATE_WORKING").task
            : wire("TASK_STATE_COMPLETED", [{ artifactId: "a", parts: [{ text: "done at last" }] }]).task
          response.status(200).json({ jsonrpc: "2.0", id, result })
          return true
        }
      })
      const result = yield* Agent.run(A2A.agent(polled.url, { name: "remote", poll: "10 millis" }), "Hi.")
      expect(result.output).toBe("done at last")
      expect(polled.methods).toEqual(["SendMessage", "GetTask", "GetTask", "GetTask"])
    }).pipe(Effect.scoped), 30_000)

  it.live("valet's own server behind a proxy that cuts the first stream: resumed with SubscribeToTask, the run not cancelled there, the output whole", () =>
    Effect.gen(function*() {
      let release: () => void = () => {}
      const resumed = new Promise<void>((resolve) => (release = resolve))
      let target = ""
      const methods: Array<string> = []
      const proxy = yield* Effect.acquireRelease(
        Effect.promise(() =>
          new Promise<{ readonly url: string; readonly close: () => void }>((resolve) => {
            const server = createServer((req, res) => {
              let body = ""
              req.on("data", (data) => (body += data))
              req.on("end", async () => {
                const method = body === "" ? "GET" : String(JSON.parse(body).method)
                methods.push(method)
                if (method === "SubscribeToTask") setTimeout(release, 100)
                const answer = await fetch(`${target}${req.url}`, {
                  method: req.method!,
                  headers: Object.fromEntries(Object.entries(req.headers).filter(([name]) => name !== "host" && name !== "content-length")) as Record<string, string>,
                  ...(body !== "" ? { body } : {})
                })
                res.writeHead(answer.status, Object.fromEntries(answer.headers))
                const cut = method === "SendStreamingMessage" && methods.filter((m) => m === method).length === 1
                for await (const bytes of answer.body as unknown as AsyncIterable<Uint8Array>) {
                  // The first stream dies after its first event (the task, working), once that is written.
                  if (cut && new TextDecoder().decode(bytes).includes("data:")) return void res.write(bytes, () => setTimeout(() => res.socket?.destroy(), 20))
                  res.write(bytes)
                }
                res.end()
              })
            })
            server.listen(0, "127.0.0.1", () =>
              resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => (server.closeAllConnections(), server.close()) }))
          })
        ),
        (proxy) => Effect.sync(proxy.close)
      )
      // The served agent answers only once the client has come back; its card names the proxy (publicUrl).
      target = yield* serveAgents([scriptedAgent("assistant", () => Effect.as(Effect.promise(() => resumed), "Hello, world"))], { a2a: { publicUrl: proxy.url } })
      const agent = A2A.agent(`${proxy.url}/a2a/assistant`, { name: "assistant", resubscribe: Schedule.spaced("50 millis").pipe(Schedule.while(({ attempt }) => attempt <= 5)) })
      const result = yield* Agent.run(agent, "Hi.")
      expect(result.output).toBe("Hello, world")
      expect(methods).toEqual(["GET", "SendStreamingMessage", "SubscribeToTask"])
    }).pipe(Effect.scoped), 30_000)

  it.live("discover: the agent named and described by its card; a task of parts goes as A2A parts (text, an image by URL, raw bytes)", () =>
    Effect.gen(function*() {
      const parts: Array<unknown> = []
      const server = yield* sdkServer(async (context, bus) => {
        parts.push(...context.userMessage.parts.map((part) => ({ case: part.content?.$case, mediaType: part.mediaType, filename: part.filename })))
        return hello(context, bus, { messages: [], cancelled: [] })
      })
      const found = yield* A2A.discover(server.url)
      expect([found.name, found.instructions]).toEqual(["remote", "A remote agent."])
      expect(A2A.agentNameOf("Currency Agent (beta)")).toBe("Currency_Agent_beta")
      expect(A2A.agentNameOf("***")).toBe("remote")
      const result = yield* Agent.run(found, [
        { type: "text", text: "What is this?" },
        { type: "image", url: "https://example.com/cat.png", mediaType: "image/png" },
        { type: "file", data: "JVBERi0=", mediaType: "application/pdf", name: "a.pdf" }
      ])
      expect(result.output).toBe("Hello, world")
      expect(server.seen.messages).toEqual(["What is this?"])
      expect(parts).toEqual([
        { case: "text", mediaType: "", filename: "" },
        { case: "url", mediaType: "image/png", filename: "" },
        { case: "raw", mediaType: "application/pdf", filename: "a.pdf" }
      ])
    }).pipe(Effect.scoped), 30_000)

  it.live("valet to valet: a served agent asking a person (ask_human) is a question of the calling run; its answer completes the served run", () =>
    Effect.gen(function*() {
      const booker = Agent.make({
        name: "booker",
        instructions: "",
        tools: [HumanLoop.askTool()],
        model: Layer.orDie(ScriptedModel.layer((request, index) =>
          index === 0 ? { toolCalls: [{ id: "a1", name: "ask_human", arguments: { question: "How many nights?" } }] } : `Booked: ${request.messages?.at(-1)?.content}`))
      }) as Agent.Agent<never>
      const url = yield* serveAgents([booker])
      // The calling side's people (the server has its own: its runs wait in its registry).
      const people = yield* Layer.build(HumanLoop.layer)
      const fiber = yield* Effect.forkChild(Agent.run(A2A.agent(`${url}/a2a/booker`, { name: "booker" }), "Book a room.").pipe(Effect.provide(people)))
      const [question] = yield* HumanLoop.awaitQuestions(1).pipe(Effect.provide(people))
      expect(question!.question).toBe("How many nights?")
      yield* HumanLoop.answer(question!.questionId, "Three.").pipe(Effect.provide(people))
      const result = yield* Fiber.join(fiber)
      expect(result).toMatchObject({ output: "Booked: Three.", modelCalls: 2, metadata: { a2a: { exchanges: 2 } } })
    }).pipe(Effect.scoped), 30_000)

  it.live("a 0.3 answer (kind, lowercase states) is not read as 1.0: RemoteAgentFailed malformed, naming the method", () =>
    Effect.gen(function*() {
      const server = yield* sdkServer(hello, {
        tap: (_method, response) => {
          const id = (response.req.body as { id: unknown }).id
          response.status(200).type("text/event-stream").send(
            `data: ${JSON.stringify({ jsonrpc: "2.0", id, result: { kind: "task", id: "t", contextId: "c", status: { state: "completed" } } })}\n\n`
          )
          return true
        }
      })
      const failed = yield* Effect.flip(Agent.run(A2A.agent(server.url, { name: "remote" }), "Hi."))
      expect(failed).toMatchObject({ _tag: "RemoteAgentFailed", reason: "malformed", code: 0 })
      expect(failed.message).toMatch(/SendStreamingMessage: the answer does not match A2A 1\.0/)
      expect(failed.message).not.toContain("\n")
    }).pipe(Effect.scoped), 30_000)

  it.live("an SSE event over 4 MiB is refused, not held: RemoteAgentFailed malformed", () =>
    Effect.gen(function*() {
      const server = yield* sdkServer(hello, {
        tap: (_method, response) => {
          const id = (response.req.body as { id: unknown }).id
          const artifactUpdate = { taskId: "t", contextId: "c", artifact: { artifactId: "a", parts: [{ text: "x".repeat(5 * 1024 * 1024) }] } }
          response.status(200).type("text/event-stream").send(`data: ${JSON.stringify({ jsonrpc: "2.0", id, result: { artifactUpdate } })}\n\n`)
          return true
        }
      })
      const failed = yield* Effect.flip(Agent.run(A2A.agent(server.url, { name: "remote" }), "Hi."))
      expect(failed).toMatchObject({ _tag: "RemoteAgentFailed", reason: "malformed" })
      expect(failed.message).toMatch(/SendStreamingMessage: Pending SSE event exceeded the maximum size of 4194304$/)
    }).pipe(Effect.scoped), 30_000)

  it.live("agentWith: over the HttpClient in context (undici here), the same exchange", () =>
    Effect.gen(function*() {
      const server = yield* sdkServer(hello)
      const remote = A2A.agentWith(server.url, { name: "remote" })
      const result = yield* Agent.run(remote, "Hi.").pipe(Effect.provide(NodeHttpClient.layerUndici))
      expect(result.output).toBe("Hello, world")
      expect(server.methods).toEqual(["SendStreamingMessage"])
    }).pipe(Effect.scoped), 30_000)

  it.live("timeout: an exchange past it cancels the remote task and fails the run with RemoteAgentFailed timeout", () =>
    Effect.gen(function*() {
      const stops: Array<() => void> = []
      const server = yield* sdkServer(async (context, bus) => {
        bus.publish(task(context))
        await new Promise<void>((resolve) => void stops.push(resolve))
      })
      const failed = yield* Effect.flip(Agent.run(A2A.agent(server.url, { name: "remote", timeout: "1 second" }), "Think forever."))
      stops.forEach((stop) => stop())
      expect(failed).toMatchObject({ _tag: "RemoteAgentFailed", reason: "timeout" })
      expect(failed.message).toMatch(/did not settle within 1s; it was cancelled$/)
      expect(server.methods).toEqual(["SendStreamingMessage", "CancelTask"])
      expect(server.seen.cancelled).toHaveLength(1)
    }).pipe(Effect.scoped), 30_000)
})

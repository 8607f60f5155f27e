/**
 * The typed client of valet's runs routes against a real server on loopback: create → events → get / list, cancel,
 * a run's typed failure, a typed 404, the bearer token, the group under a prefix, the promise wrapper, and
 * resumption: a loopback TCP proxy the test starts cuts the event stream mid-way, and the client reconnects with
 * `Last-Event-ID` and reads every event exactly once.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Schedule, Stream } from "effect"
import { FetchHttpClient, HttpRouter, HttpServer } from "effect/http"
import { HttpApi, HttpApiBuilder } from "effect/http-api"
import { createServer as createHttpServer } from "node:http"
import { connect, createServer, type Socket } from "node:net"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Agent from "../../src/core/Agent.js"
import * as AgentEvent from "../../src/core/AgentEvent.js"
import type * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as HumanLoop from "../../src/core/HumanLoop.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Threads from "../../src/core/Threads.js"
import * as Agents from "../../src/serve/Agents.js"
import * as Runs from "../../src/serve/Runs.js"
import * as RunsApi from "../../src/serve/RunsApi.js"
import * as RunsClient from "../../src/serve/RunsClient.js"
import { refundCall, supportAgent } from "../support/approvals.js"
import { scriptedAgent as scripted, serveAgents as serve } from "../support/serve.js"

const agents = [
  scripted("quick", ["Paris."]),
  scripted("stuck", [{ text: "never said", delay: "1 hour" }]),
  scripted("writer", ["draft", "Add a full stop.", "draft.", "No issues."], SelfRefine.architecture),
  scripted("broken", [{ error: new ModelError.RateLimited({ message: "slow down" }) }])
]

/** A client of the server at `baseUrl`, over `fetch`. */
const clientOf = (options: RunsClient.Options) => Effect.provide(RunsClient.make(options), FetchHttpClient.layer)

const collect = <E>(events: Stream.Stream<AgentEvent.AgentEvent, E>) =>
  Effect.map(Stream.runCollect(events), (chunk) => Array.from(chunk))

/**
 * A loopback TCP proxy to `target` that cuts the first `cuts` connections carrying a `GET …/events` request after
 * `afterBodyBytes` bytes of that response's body (or, with `beforeResponse`, as soon as the request arrives), and
 * records every events request it sees.
 */
const cuttingProxy = (
  target: string,
  options: { readonly afterBodyBytes: number; readonly cuts: number; readonly beforeResponse?: boolean }
) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly url: string; readonly eventRequests: Array<string>; readonly cut: () => number; readonly close: () => void }>((resolve) => {
        const upstream = new URL(target)
        const eventRequests: Array<string> = []
        const sockets = new Set<Socket>()
        let cuts = 0
        const server = createServer((client) => {
          const server = connect(Number(upstream.port), upstream.hostname)
          sockets.add(client).add(server)
          // Per connection: whether the response in flight answers an events request, and how much of its body went.
          let following = false
          let headerSeen = false
          let bodyBytes = 0
          client.on("data", (chunk: Buffer) => {
            const text = chunk.toString("latin1")
            if (/^GET \S*\/events/.test(text)) {
              eventRequests.push(text)
              if (options.beforeResponse === true && cuts < options.cuts) {
                cuts++
                client.destroy()
                server.destroy()
                return
              }
              following = true
              headerSeen = false
              bodyBytes = 0
            }
            server.write(chunk)
          })
          server.on("data", (chunk: Buffer) => {
            if (!following || cuts >= options.cuts) return void client.write(chunk)
            let body = chunk
            if (!headerSeen) {
              const end = chunk.indexOf("\r\n\r\n")
              if (end === -1) return void client.write(chunk)
              headerSeen = true
              client.write(chunk.subarray(0, end + 4))
              body = chunk.subarray(end + 4)
            }
            if (bodyBytes + body.length < options.afterBodyBytes) {
              bodyBytes += body.length
              return void client.write(body)
            }
            // Cut mid-way: what fits, then both sides closed.
            cuts++
            client.end(body.subarray(0, options.afterBodyBytes - bodyBytes), () => {
              client.destroy()
              server.destroy()
            })
          })
          const close = () => {
            client.destroy()
            server.destroy()
          }
          client.on("error", close).on("close", close)
          server.on("error", close).on("close", close)
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as { port: number }
          resolve({
            url: `http://127.0.0.1:${port}`,
            eventRequests,
            cut: () => cuts,
            close: () => {
              for (const socket of sockets) socket.destroy()
              server.close()
            }
          })
        })
      })
    ),
    (proxy) => Effect.sync(proxy.close)
  )

const lastEventIdOf = (request: string): string | undefined => /\r\nlast-event-id: *([^\r\n]*)/i.exec(request)?.[1]

describe("RunsClient (a typed client of valet's routes)", () => {
  it.live("create → events in order, ending with RunCompleted; get; list; agents", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const client = yield* clientOf({ baseUrl: url })
      expect((yield* client.agents()).map((agent) => agent.name)).toEqual(["quick", "stuck", "writer", "broken"])

      const { runId, sessionId } = yield* client.create({ agent: "writer", input: "Capital of France?", sessionId: "my-session" })
      expect(sessionId).toBe("my-session")
      const events = yield* collect(client.events(runId))
      expect(events[0]!._tag).toBe("RunStarted")
      const last = events.at(-1)!
      expect(last._tag === "RunCompleted" && AgentEvent.isRoot(last) ? last.result.output : undefined).toBe("draft.")
      // Each event once: as many as the server counts.
      const run = yield* client.get(runId)
      expect(run).toMatchObject({ runId, sessionId, agent: "writer", status: "completed", result: { output: "draft." } })
      expect(events).toHaveLength(run.events)

      // From after the 3rd: the rest, the same events.
      expect(yield* collect(client.events(runId, { after: 3 }))).toEqual(events.slice(4))

      const page = yield* client.list()
      expect(page.runs.map((r) => r.runId)).toEqual([runId])
      const full = yield* client.list({ full: true, limit: 1 })
      expect(full.runs[0]).toMatchObject({ runId, result: { output: "draft." } })

      // POST /runs/stream: the same events decoded from the response.
      const streamed = yield* collect(client.stream({ agent: "quick", input: "x" }))
      expect(streamed.map((event) => event._tag)).toEqual(expect.arrayContaining(["RunStarted", "TextDelta", "RunCompleted"]))
      expect(streamed.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Paris." } })
    }).pipe(Effect.scoped), 30_000)

  it.live("cancel: the run's events end with RunCompleted interrupted, reason cancelled; beyond maxConcurrentRuns TooManyRuns", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents, { maxConcurrentRuns: 1 })
      const client = yield* clientOf({ baseUrl: url })
      const { runId } = yield* client.create({ agent: "stuck", input: "x" })
      const tooMany = yield* Effect.flip(client.create({ agent: "quick", input: "x" }))
      expect(tooMany).toBeInstanceOf(Runs.TooManyRuns)
      expect(tooMany).toMatchObject({ limit: 1, retryAfterSeconds: 1 })
      expect(yield* client.cancel(runId)).toEqual({ runId, cancelled: true })
      const events = yield* collect(client.events(runId))
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { interrupted: true, interruptionReason: "cancelled" } })
      // Cancelling an ended run: nothing to cancel.
      expect(yield* client.cancel(runId)).toEqual({ runId, cancelled: false })
    }).pipe(Effect.scoped), 30_000)

  it.live("beyond maxEventStreams: events fails with the typed TooManyEventStreams (not retried as a dropped connection)", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents, { maxEventStreams: 1 })
      const client = yield* clientOf({ baseUrl: url })
      const { runId } = yield* client.create({ agent: "stuck", input: "x" })
      // The one slot: a reader kept open.
      const abort = new AbortController()
      const open = yield* Effect.promise(() => fetch(`${url}/runs/${runId}/events`, { signal: abort.signal }))
      expect(open.status).toBe(200)
      const refused = yield* Effect.flip(collect(client.events(runId)))
      expect(refused).toBeInstanceOf(Runs.TooManyEventStreams)
      expect(refused).toMatchObject({ limit: 1, retryAfterSeconds: 1 })
      abort.abort()
      yield* client.cancel(runId)
    }).pipe(Effect.scoped), 30_000)

  it.live("typed errors: unknown run → RunNotFound (get, cancel, events), unknown agent → UnknownAgent, a failed run → RunFailed carrying the server's error", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const client = yield* clientOf({ baseUrl: url })
      const notFound = yield* Effect.flip(client.get("run_nope"))
      expect(notFound).toBeInstanceOf(Runs.RunNotFound)
      expect(notFound).toMatchObject({ _tag: "RunNotFound", runId: "run_nope" })
      expect(yield* Effect.flip(client.cancel("run_nope"))).toMatchObject({ _tag: "RunNotFound" })
      expect(yield* Effect.flip(Stream.runDrain(client.events("run_nope")))).toMatchObject({ _tag: "RunNotFound", runId: "run_nope" })
      const unknown = yield* Effect.flip(client.create({ agent: "nobody", input: "x" }))
      expect(unknown).toBeInstanceOf(Runs.UnknownAgent)
      expect(unknown.message).toContain('"nobody"')

      const { runId } = yield* client.create({ agent: "broken", input: "x" })
      const failed = yield* Effect.flip(Stream.runDrain(client.events(runId)))
      expect(failed).toBeInstanceOf(Runs.RunFailed)
      expect(failed).toMatchObject({ _tag: "RunFailed", runId, error: { _tag: "RateLimited", message: expect.stringContaining("slow down") } })
      const streamed = yield* Effect.flip(Stream.runDrain(client.stream({ agent: "broken", input: "x" })))
      expect(streamed).toMatchObject({ _tag: "RunFailed", error: { _tag: "RateLimited" } })
    }).pipe(Effect.scoped), 30_000)

  it.live("a bearer token: without it Unauthorized, with it every call and the event stream go through", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents, { token: "s3cret" })
      const anonymous = yield* clientOf({ baseUrl: url })
      const refused = yield* Effect.flip(anonymous.agents())
      expect(refused).toBeInstanceOf(RunsClient.Unauthorized)
      expect(refused.message).toContain("bearer token")
      expect(yield* Effect.flip(Stream.runDrain(anonymous.events("run_nope")))).toMatchObject({ _tag: "Unauthorized" })
      expect(yield* Effect.flip((yield* clientOf({ baseUrl: url, token: "wrong" })).agents())).toMatchObject({ _tag: "Unauthorized" })

      const client = yield* clientOf({ baseUrl: url, token: "s3cret" })
      const { runId } = yield* client.create({ agent: "quick", input: "x" })
      expect((yield* collect(client.events(runId))).at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Paris." } })
    }).pipe(Effect.scoped), 30_000)

  it.live("the group under a prefix in the app's own API; a path where no route is → ServerError naming the status", () =>
    Effect.gen(function*() {
      const MyApi = HttpApi.make("app").add(RunsApi.group.prefix("/agents-api"))
      const ApiLive = HttpApiBuilder.layer(MyApi).pipe(
        Layer.provide(RunsApi.layerFor(MyApi)),
        Layer.provide(Runs.layer()),
        Layer.provide(Agents.layer(agents))
      )
      const context = yield* Layer.build(HttpRouter.serve(ApiLive, { disableLogger: true, disableListenLog: true }).pipe(
        Layer.provideMerge(NodeHttpServer.layer(() => createHttpServer(), { port: 0, host: "127.0.0.1" }))
      ))
      const url = `http://127.0.0.1:${(Context.get(context, HttpServer.HttpServer).address as unknown as { port: number }).port}`
      const client = yield* clientOf({ baseUrl: url, prefix: "/agents-api" })
      const { runId } = yield* client.create({ agent: "quick", input: "x" })
      expect((yield* collect(client.events(runId))).at(-1)).toMatchObject({ _tag: "RunCompleted" })

      const lost = yield* Effect.flip((yield* clientOf({ baseUrl: url })).agents())
      expect(lost).toBeInstanceOf(RunsClient.ServerError)
      expect(lost).toMatchObject({ status: 404 })
    }).pipe(Effect.scoped), 30_000)

  it.live("resumption: the connection is cut mid-event; the client reconnects with Last-Event-ID and reads each event exactly once", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const direct = yield* clientOf({ baseUrl: url })
      const { runId } = yield* direct.create({ agent: "writer", input: "Capital of France?" })
      const reference = yield* collect(direct.events(runId))
      expect(reference.length).toBeGreaterThan(8)

      // Cut after 1000 body bytes: a few events in, in the middle of one (the SSE body is several kB).
      const proxy = yield* cuttingProxy(url, { afterBodyBytes: 1000, cuts: 1 })
      const client = yield* clientOf({ baseUrl: proxy.url })
      const resumed = yield* collect(client.events(runId))
      expect(proxy.cut()).toBe(1)
      expect(resumed).toEqual(reference)
      // Two requests: the first from the start, the second after the last event it had whole.
      expect(proxy.eventRequests).toHaveLength(2)
      expect(lastEventIdOf(proxy.eventRequests[0]!)).toBeUndefined()
      const lastId = Number(lastEventIdOf(proxy.eventRequests[1]!))
      expect(lastId).toBeGreaterThanOrEqual(0)
      expect(lastId).toBeLessThan(reference.length - 1)

      // From `after`, the reconnection still resumes after the last event received, not after `after`.
      const proxy2 = yield* cuttingProxy(url, { afterBodyBytes: 1000, cuts: 1 })
      const fromAfter = yield* collect((yield* clientOf({ baseUrl: proxy2.url })).events(runId, { after: 1 }))
      expect(fromAfter).toEqual(reference.slice(2))
      expect(lastEventIdOf(proxy2.eventRequests[0]!)).toBe("1")
      expect(Number(lastEventIdOf(proxy2.eventRequests[1]!))).toBeGreaterThan(1)
    }).pipe(Effect.scoped), 30_000)

  it.live("a connection dropped before the answer: the client connects again, from the start", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const direct = yield* clientOf({ baseUrl: url })
      const { runId } = yield* direct.create({ agent: "quick", input: "x" })
      const reference = yield* collect(direct.events(runId))
      const proxy = yield* cuttingProxy(url, { afterBodyBytes: 0, cuts: 1, beforeResponse: true })
      expect(yield* collect((yield* clientOf({ baseUrl: proxy.url })).events(runId))).toEqual(reference)
      expect(proxy.cut()).toBe(1)
      expect(proxy.eventRequests.map(lastEventIdOf)).toEqual([undefined, undefined])
    }).pipe(Effect.scoped), 30_000)

  it.live("a connection cut every time before a whole event: Disconnected after the reconnect schedule", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const { runId } = yield* (yield* clientOf({ baseUrl: url })).create({ agent: "writer", input: "x" })
      // 10 bytes: less than one event, so no connection brings one and the schedule never starts over.
      const proxy = yield* cuttingProxy(url, { afterBodyBytes: 10, cuts: Infinity })
      const client = yield* clientOf({ baseUrl: proxy.url, reconnect: Schedule.recurs(2) })
      const error = yield* Effect.flip(Stream.runDrain(client.events(runId)))
      expect(error).toBeInstanceOf(RunsClient.Disconnected)
      expect(error).toMatchObject({ _tag: "Disconnected", runId, message: expect.stringContaining("ended before its RunCompleted") })
      expect(error._tag === "Disconnected" ? error.lastEventId : "not Disconnected").toBeUndefined()
      // The first connection and two reconnections.
      expect(proxy.eventRequests).toHaveLength(3)
    }).pipe(Effect.scoped), 30_000)

  it.live("the promise wrapper: create, events as an async iterable, a typed rejection", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const client = RunsClient.promise({ baseUrl: url })
      const outcome = yield* Effect.promise(async () => {
        const { runId } = await client.create({ agent: "quick", input: "x" })
        const tags: Array<string> = []
        for await (const event of client.events(runId)) tags.push(event._tag)
        const run = await client.get(runId)
        const rejected = await client.get("run_nope").then(() => undefined, (error: unknown) => error)
        return { tags, run, rejected }
      })
      expect(outcome.tags[0]).toBe("RunStarted")
      expect(outcome.tags.at(-1)).toBe("RunCompleted")
      expect(outcome.run).toMatchObject({ status: "completed", result: { output: "Paris." } })
      expect(outcome.rejected).toBeInstanceOf(Runs.RunNotFound)
    }).pipe(Effect.scoped), 30_000)

  it("bad options: InvalidOptions naming the field, at once", () => {
    expect(() => RunsClient.promise({ baseUrl: "127.0.0.1:8787" })).toThrow(/RunsClient: baseUrl/)
    expect(() => RunsClient.promise({ baseUrl: "http://127.0.0.1:8787", prefix: "agents-api" })).toThrow(/RunsClient: prefix/)
    expect(() => RunsClient.promise({ baseUrl: "http://127.0.0.1:8787", token: " s3cret" })).toThrow(/RunsClient: token/)
  })
})

describe("RunsClient.threads", () => {
  it.live("create a thread, two turns on it (the second's model reads the first), get, list, delete; typed errors", () =>
    Effect.gen(function*() {
      // A fresh script each run (the agent's own model): it answers by what the model is shown, so the second answer
      // says the second turn's model read the first turn.
      const seenBefore = (request: Model.Request) => (request.messages ?? []).filter((message) => message.role === "user").length > 1
      const baseUrl = yield* serve([scripted("chatty", (request) => seenBefore(request) ? "Your name is Ada." : "Hello, Ada.")], {}, Threads.layerMemory())
      const client = yield* clientOf({ baseUrl })
      const thread = yield* client.threads.create({ id: "chat-1", metadata: { title: "names" } })
      expect(thread).toMatchObject({ id: "chat-1", metadata: { title: "names" } })
      for (const input of ["My name is Ada.", "What is my name?"]) {
        const { runId } = yield* client.threads.run("chat-1", { agent: "chatty", input })
        const events = yield* collect(client.events(runId))
        expect(events.at(-1)?._tag).toBe("RunCompleted")
      }
      const read = yield* client.threads.get("chat-1")
      expect(read.thread.messageCount).toBe(4)
      expect(read.messages.messages.map((message) => message.content)).toEqual(["My name is Ada.", "Hello, Ada.", "What is my name?", "Your name is Ada."])
      expect((yield* client.threads.list()).threads.map((t) => t.id)).toEqual(["chat-1"])
      expect(yield* Effect.flip(client.threads.create({ id: "chat-1" }))).toMatchObject({ _tag: "ThreadExists" })
      yield* client.threads.delete("chat-1")
      expect(yield* Effect.flip(client.threads.get("chat-1"))).toMatchObject({ _tag: "ThreadNotFound" })
      // A server without a store: the thread routes say so.
      const bare = yield* clientOf({ baseUrl: yield* serve([scripted("chatty", ["x"])]) })
      expect(yield* Effect.flip(bare.threads.list())).toMatchObject({ _tag: "ThreadsUnavailable" })
    }).pipe(Effect.scoped))

  it.live("threads without Effect: the promise client creates, streams a turn as an async iterable, reads, rejects typed", () =>
    Effect.gen(function*() {
      const seenBefore = (request: Model.Request) => (request.messages ?? []).filter((message) => message.role === "user").length > 1
      const baseUrl = yield* serve([scripted("chatty", (request) => seenBefore(request) ? "Your name is Ada." : "Hello, Ada.")], {}, Threads.layerMemory())
      const client = RunsClient.promise({ baseUrl })
      const outcome = yield* Effect.promise(async () => {
        await client.threads.create({ id: "chat-2" })
        // The first turn started and read through its run; the second streamed.
        const { runId } = await client.threads.run("chat-2", { agent: "chatty", input: "My name is Ada." })
        for await (const _ of client.events(runId)) { /* to its end */ }
        const tags: Array<string> = []
        let answer = ""
        for await (const event of client.threads.stream("chat-2", { agent: "chatty", input: "What is my name?" })) {
          tags.push(event._tag)
          if (event._tag === "RunCompleted") answer = event.result.output
        }
        const read = await client.threads.get("chat-2", { limit: 2 })
        const listed = await client.threads.list()
        await client.threads.delete("chat-2")
        const rejected = await client.threads.get("chat-2").then(() => undefined, (error: unknown) => error)
        return { tags, answer, read, listed, rejected }
      })
      expect(outcome.tags[0]).toBe("RunStarted")
      expect(outcome.tags.at(-1)).toBe("RunCompleted")
      expect(outcome.answer).toBe("Your name is Ada.")
      expect(outcome.read.messages).toMatchObject({ start: 2, total: 4 })
      expect(outcome.read.messages.messages.map((message) => message.content)).toEqual(["What is my name?", "Your name is Ada."])
      expect(outcome.listed.threads.map((thread) => thread.id)).toEqual(["chat-2"])
      expect(outcome.rejected).toMatchObject({ _tag: "ThreadNotFound", threadId: "chat-2" })
      expect(outcome.rejected).toBeInstanceOf(Error)
    }).pipe(Effect.scoped))
})

describe("RunsClient: decisions on runs that wait for a person", () => {
  it.live("GET /runs/:id says waiting with the pending call; decisions: refused edits 400, unknown 404, another owner's run 404, second 409", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent([{ toolCalls: [refundCall("c1", 250)] }, "Refunded."])
      const baseUrl = yield* serve([agent])
      const client = yield* clientOf({ baseUrl })
      const { runId } = yield* client.create({ agent: "support", input: "Refund 250." })
      // Wait for the call to wait (its event).
      yield* client.events(runId).pipe(Stream.takeUntil((event) => event._tag === "ApprovalRequested"), Stream.runDrain)
      const waiting = yield* client.get(runId)
      expect(waiting.status).toBe("waiting")
      expect(waiting.pending).toMatchObject([{ toolCallId: "c1", name: "refund", arguments: `{"amount":250}` }])
      const refused = yield* Effect.flip(client.decide(runId, "c1", { approved: true, arguments: { amount: "lots" } }))
      expect(refused).toMatchObject({ _tag: "InvalidDecision", toolCallId: "c1" })
      expect(yield* Effect.flip(client.decide(runId, "c9", { approved: true }))).toMatchObject({ _tag: "NotWaiting" })
      expect(yield* Effect.flip(client.decide("run_nope", "c1", { approved: true }))).toMatchObject({ _tag: "RunNotFound" })
      // Edited arguments nested 50,000 deep (100 KB): refused 400 naming the field, not a stack overflow (500).
      const deep = yield* Effect.promise(() =>
        fetch(`${baseUrl}/runs/${runId}/decisions/c1`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: `{"approved":true,"arguments":{"amount":${"[".repeat(50_000)}1${"]".repeat(50_000)}}}`
        }).then(async (response) => ({ status: response.status, body: await response.text() })))
      expect(deep.status).toBe(400)
      expect(deep.body).toMatch(/arguments.*nests deeper than 100 levels/)
      expect((yield* client.get(runId)).status).toBe("waiting")
      expect(yield* client.decide(runId, "c1", { approved: true, arguments: { amount: 200 } })).toEqual({
        runId,
        toolCallId: "c1",
        sessionId: waiting.sessionId,
        approved: true
      })
      const events = yield* collect(client.events(runId))
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Refunded." } })
      expect(ran).toEqual([200])
      const done = yield* client.get(runId)
      expect([done.status, done.pending]).toEqual(["completed", undefined])
      expect(yield* Effect.flip(client.decide(runId, "c1", { approved: true }))).toMatchObject({ _tag: "NotWaiting" })
      // The raw route: a body that is not a decision is 400 naming the field.
      const raw = yield* Effect.promise(() =>
        fetch(`${baseUrl}/runs/${runId}/decisions/c1`, { method: "POST", headers: { "content-type": "application/json" }, body: `{"approved":"yes"}` })
          .then(async (response) => ({ status: response.status, body: await response.text() })))
      expect(raw.status).toBe(400)
      expect(raw.body).toMatch(/approved/)
    }).pipe(Effect.scoped), 30_000)
})

describe("RunsClient: answers to questions a run asks", () => {
  it.live("the ask_human tool over HTTP: GET /runs/:id lists the question; an answer resumes the run; a second is 409", () =>
    Effect.gen(function*() {
      const agent = Agent.make({
        name: "booker",
        instructions: "",
        tools: [HumanLoop.askTool()],
        model: Layer.orDie(ScriptedModel.layer([{ toolCalls: [{ id: "a1", name: "ask_human", arguments: { question: "How many?" } }] }, "Booked."]))
      }) as Agent.Agent<never>
      const client = yield* clientOf({ baseUrl: yield* serve([agent]) })
      const { runId } = yield* client.create({ agent: "booker", input: "Book." })
      yield* client.events(runId).pipe(Stream.takeUntil((event) => event._tag === "QuestionAsked"), Stream.runDrain)
      const waiting = yield* client.get(runId)
      expect(waiting.status).toBe("waiting")
      expect(waiting.questions).toMatchObject([{ questionId: "q1", question: "How many?", schema: { type: "string" } }])
      expect(yield* Effect.flip(client.answer(runId, "q1", 4))).toMatchObject({ _tag: "InvalidDecision" })
      expect(yield* client.answer(runId, "q1", "Four.")).toMatchObject({ runId, questionId: "q1" })
      const events = yield* collect(client.events(runId))
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Booked." } })
      expect(yield* Effect.flip(client.answer(runId, "q1", "Five."))).toMatchObject({ _tag: "NotWaiting" })
    }).pipe(Effect.scoped), 30_000)
})

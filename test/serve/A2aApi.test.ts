/**
 * A2A 1.0 over JSON-RPC, driven by a client no one here wrote: the official `@a2a-js/sdk` 1.x `ClientFactory`,
 * over loopback against `Server.layerNode`, with agents on scripted models. Raw `fetch` where the test is of what
 * the SDK would never send (a 0.3 request, a batch, a body over the cap).
 */
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory
} from "@a2a-js/sdk/client"
import { type Message, Role, type StreamResponse, type Task, TaskState } from "@a2a-js/sdk"
import {
  JsonRpcPushNotificationNotSupportedError,
  JsonRpcRequestMalformedError,
  JsonRpcTaskNotCancelableError,
  JsonRpcTaskNotFoundError,
  JsonRpcUnsupportedOperationError
} from "@a2a-js/sdk/errors"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { HttpServerRequest } from "effect/http"
import { request as httpRequest } from "node:http"
import * as Agent from "../../src/core/Agent.js"
import * as Guardrail from "../../src/core/Guardrail.js"
import * as HumanLoop from "../../src/core/HumanLoop.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Threads from "../../src/core/Threads.js"
import * as Tool from "../../src/core/Tool.js"
import * as RunsApi from "../../src/serve/RunsApi.js"
import { refundCall, supportAgent } from "../support/approvals.js"
import { json, post, scriptedAgent, serveAgents } from "../support/serve.js"

const token = "a2a-secret"

/** A fetch that sends the server's token (and `extra` headers), as an app passes `fetchImpl` to the SDK. */
const fetchWith = (headers: Record<string, string>): typeof fetch => (input, init) => {
  const merged = new Headers(init?.headers)
  for (const [name, value] of Object.entries(headers)) merged.set(name, value)
  return fetch(input, { ...init, headers: merged })
}

/** The SDK's client of one agent, from its card URL (the whole URL: the resolver drops a base URL's path). */
const clientOf = (url: string, agent: string, headers: Record<string, string> = { authorization: `Bearer ${token}` }) =>
  Effect.promise(() => {
    const fetchImpl = fetchWith(headers)
    const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl })
    }))
    return factory.createFromUrl(`${url}/a2a/${agent}/.well-known/agent-card.json`, "")
  })

/** A user message of text parts, as the SDK's types spell it. */
const userMessage = (text: string, extra: { readonly taskId?: string; readonly contextId?: string; readonly messageId?: string } = {}): Message => ({
  messageId: extra.messageId ?? `m-${Math.random().toString(36).slice(2)}`,
  contextId: extra.contextId ?? "",
  taskId: extra.taskId ?? "",
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "text" as const, value: text }, metadata: undefined, filename: "", mediaType: "" }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: []
})

/** A user message of one data part (an answer to a task waiting for a person). */
const dataMessage = (data: Record<string, unknown>, taskId: string): Message => ({
  ...userMessage("", { taskId }),
  parts: [{ content: { $case: "data" as const, value: data }, metadata: undefined, filename: "", mediaType: "application/json" }]
})

const send = (client: Client, message: Message, configuration?: { readonly returnImmediately?: boolean }) =>
  Effect.promise(() =>
    client.sendMessage({
      tenant: "",
      message,
      configuration: configuration === undefined ? undefined : { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: configuration.returnImmediately ?? false },
      metadata: undefined
    }) as Promise<Task>
  )

/** Every event of a stream, to its end. */
const collect = (events: AsyncGenerator<StreamResponse>) =>
  Effect.promise(async () => {
    const all: Array<StreamResponse> = []
    for await (const event of events) all.push(event)
    return all
  })

/** The error a call is refused with. */
const refusal = (promise: () => Promise<unknown>) =>
  Effect.promise(() => promise().then(() => undefined, (error: unknown) => error as Error & { readonly envelopeCode?: number; readonly data?: unknown }))

/** The text of a task's `output` artifact. */
const outputOf = (task: Task) =>
  task.artifacts.find((artifact) => artifact.artifactId === "output")?.parts.flatMap((part) => (part.content?.$case === "text" ? [part.content.value] : [])).join("")

/** A raw JSON-RPC call. */
const rpc = (url: string, agent: string, body: unknown, headers: Record<string, string> = { authorization: `Bearer ${token}`, "a2a-version": "1.0" }) =>
  Effect.flatMap(post(`${url}/a2a/${agent}`, body, headers), (response) => Effect.map(json(response), (body) => ({ status: response.status, body })))

const agents = [scriptedAgent("assistant", ["4"], undefined, "Be brief."), scriptedAgent("other", ["other answer"])]

describe("A2aApi (the @a2a-js/sdk client)", () => {
  it.live("the cards, root and per agent, behind the token; the SDK takes them and talks to the agent's endpoint", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents(agents, { token })
      const card = yield* Effect.promise(() => fetch(`${url}/a2a/assistant/.well-known/agent-card.json`, { headers: { authorization: `Bearer ${token}` } }))
      expect(card.headers.get("cache-control")).toBe("no-cache")
      const body = yield* json(card)
      expect(body).toMatchObject({
        name: "assistant",
        supportedInterfaces: [{ url: `${url}/a2a/assistant`, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
        capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false },
        skills: [{ id: "assistant", tags: ["react"] }],
        securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: "Bearer" } } }
      })
      const root = yield* json(yield* Effect.promise(() => fetch(`${url}/.well-known/agent-card.json`, { headers: { authorization: `Bearer ${token}` } })))
      expect(root.name).toBe("assistant")
      // Behind the token, like every route but /health.
      expect((yield* Effect.promise(() => fetch(`${url}/a2a/assistant/.well-known/agent-card.json`))).status).toBe(401)
      const client = yield* clientOf(url, "other")
      const card2 = yield* Effect.promise(() => client.getAgentCard())
      expect(card2.name).toBe("other")
      // The SDK reads the bearer scheme of the card (ProtoJSON's oneof: httpAuthSecurityScheme).
      expect(JSON.stringify(card2.securitySchemes)).toContain("\"scheme\":\"Bearer\"")
      expect(card2.securityRequirements).toHaveLength(1)
      const task = yield* send(client, userMessage("Hi"))
      expect(outputOf(task)).toBe("other answer")
    }).pipe(Effect.scoped), 30_000)

  it.live("SendMessage blocks until the task ends: COMPLETED, the answer as the artifact `output`; GetTask answers the same task", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents(agents, { token })
      const client = yield* clientOf(url, "assistant")
      const task = yield* send(client, userMessage("2 + 2?", { messageId: "m-1" }))
      expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
      expect(outputOf(task)).toBe("4")
      expect(task.history.map((message) => [message.role, message.parts[0]?.content])).toEqual([[Role.ROLE_USER, { $case: "text", value: "2 + 2?" }]])
      const again = yield* Effect.promise(() => client.getTask({ tenant: "", id: task.id, historyLength: undefined }))
      expect(again.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
      expect(outputOf(again)).toBe("4")
      expect(again.contextId).toBe(task.contextId)
      // historyLength 0 leaves the history out.
      const bare = yield* Effect.promise(() => client.getTask({ tenant: "", id: task.id, historyLength: 0 }))
      expect(bare.history).toEqual([])
    }).pipe(Effect.scoped), 30_000)

  it.live("the version: no A2A-Version (0.3) is -32009 naming 1.0; message/send under 1.0 is -32601 naming SendMessage", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents(agents, { token })
      const legacy = yield* rpc(url, "assistant", { jsonrpc: "2.0", id: 7, method: "message/send", params: { message: { kind: "message", role: "user", parts: [{ kind: "text", text: "Hi" }], messageId: "x" } } }, { authorization: `Bearer ${token}` })
      expect(legacy.status).toBe(200)
      expect(legacy.body).toMatchObject({
        jsonrpc: "2.0",
        id: 7,
        error: { code: -32009, data: [{ reason: "VERSION_NOT_SUPPORTED", metadata: { requested: "0.3", supported: "1.0" } }] }
      })
      expect(legacy.body.error.message).toContain("A2A-Version: 1.0")
      const old = yield* rpc(url, "assistant", { jsonrpc: "2.0", id: "a", method: "message/send", params: {} })
      expect(old.body).toMatchObject({ id: "a", error: { code: -32601 } })
      expect(old.body.error.message).toContain("\"SendMessage\"")
      // The query parameter names the version too (spec §3.6.1); 2.0 is not served.
      const query = yield* Effect.flatMap(post(`${url}/a2a/assistant?A2A-Version=1.0`, { jsonrpc: "2.0", id: 1, method: "Nope" }, { authorization: `Bearer ${token}` }), json)
      expect(query.error.code).toBe(-32601)
      const two = yield* rpc(url, "assistant", { jsonrpc: "2.0", id: 2, method: "GetTask", params: { id: "x" } }, { authorization: `Bearer ${token}`, "a2a-version": "2.0" })
      expect(two.body.error.code).toBe(-32009)
    }).pipe(Effect.scoped), 30_000)

  it.live("bad requests: unparsable JSON -32700, a batch -32600, a part with no content -32602 naming it, a 0.3 lowercase role -32602, an unknown task -32001", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents(agents, { token })
      const broken = yield* Effect.promise(() =>
        fetch(`${url}/a2a/assistant`, { method: "POST", headers: { authorization: `Bearer ${token}`, "a2a-version": "1.0", "content-type": "application/json" }, body: "{nope" }))
      expect(yield* json(broken)).toMatchObject({ id: null, error: { code: -32700 } })
      expect((yield* rpc(url, "assistant", [{ jsonrpc: "2.0", id: 1, method: "GetTask" }])).body).toMatchObject({ error: { code: -32600 } })
      const client = yield* clientOf(url, "assistant")
      const empty = { ...userMessage("x"), parts: [{ content: undefined, metadata: undefined, filename: "", mediaType: "" }] }
      const noContent = yield* refusal(() => client.sendMessage({ tenant: "", message: empty as never, configuration: undefined, metadata: undefined }))
      expect(noContent).toBeInstanceOf(JsonRpcRequestMalformedError)
      expect(noContent?.envelopeCode).toBe(-32602)
      expect(noContent?.data).toEqual([{ "@type": "type.googleapis.com/google.rpc.BadRequest", fieldViolations: [{ field: "message.parts[0]", description: "a part needs one of text, raw, url, data" }] }])
      const lowercase = yield* rpc(url, "assistant", { jsonrpc: "2.0", id: 3, method: "SendMessage", params: { message: { messageId: "x", role: "user", parts: [{ text: "Hi" }] } } })
      expect(lowercase.body).toMatchObject({ id: 3, error: { code: -32602, data: [{ fieldViolations: [{ field: "message.role" }] }] } })
      const video = yield* rpc(url, "assistant", { jsonrpc: "2.0", id: 4, method: "SendMessage", params: { message: { messageId: "x", role: "ROLE_USER", parts: [{ raw: "AAAA", mediaType: "video/mp4" }] } } })
      expect(video.body).toMatchObject({ id: 4, error: { code: -32005 } })
      const unknown = yield* refusal(() => client.getTask({ tenant: "", id: "no-such-task", historyLength: undefined }))
      expect(unknown).toBeInstanceOf(JsonRpcTaskNotFoundError)
    }).pipe(Effect.scoped), 30_000)

  it.live("deeply nested JSON is a bad request naming where, with the request's id, never a 500; /runs and /v1/chat/completions do not 500 on it either", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents(agents, { token })
      const headers = { authorization: `Bearer ${token}`, "a2a-version": "1.0", "content-type": "application/json" }
      const raw = (path: string, body: string) =>
        Effect.promise(() => fetch(`${url}${path}`, { method: "POST", headers, body }).then(async (response) => ({ status: response.status, body: await response.text() })))
      const deep = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`
      const inParts = yield* raw("/a2a/assistant", `{"jsonrpc":"2.0","id":"d1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":${deep(5_000)}}}}`)
      expect(inParts.status).toBe(200)
      expect(JSON.parse(inParts.body)).toMatchObject({ id: "d1", error: { code: -32600, message: expect.stringContaining("params.message.parts") } })
      const inData = yield* raw("/a2a/assistant", `{"jsonrpc":"2.0","id":"d2","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":${deep(200_000)}}]}}}`)
      expect(inData.status).toBe(200)
      expect(JSON.parse(inData.body)).toMatchObject({ id: "d2", error: { code: -32600, message: expect.stringContaining("params.message.parts[0].data") } })
      const runs = yield* raw("/runs", `{"agent":"assistant","input":${deep(5_000)}}`)
      expect(runs.status).toBe(400)
      const chat = yield* raw("/v1/chat/completions", `{"model":"assistant","messages":${deep(5_000)}}`)
      expect(chat.status).toBe(400)
    }).pipe(Effect.scoped), 30_000)

  it.live("guard errors in JSON-RPC shape: 401 without the token, 413 over the body cap, 404 for an unknown agent", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents(agents, { token, maxBodyBytes: 2_000 })
      const anonymous = yield* rpc(url, "assistant", { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }, { "a2a-version": "1.0" })
      expect(anonymous.status).toBe(401)
      expect(anonymous.body).toMatchObject({ jsonrpc: "2.0", error: { code: -32600 } })
      // The SDK reads it as a JSON-RPC error, not a bare HTTP failure.
      const client = yield* clientOf(url, "assistant")
      const big = yield* refusal(() => send(client, userMessage("x".repeat(5_000))).pipe(Effect.runPromise))
      expect(big).toBeInstanceOf(JsonRpcRequestMalformedError)
      const raw = yield* rpc(url, "assistant", { jsonrpc: "2.0", id: 1, method: "SendMessage", params: { message: { messageId: "x", role: "ROLE_USER", parts: [{ text: "x".repeat(5_000) }] } } })
      expect(raw.status).toBe(413)
      expect(raw.body).toMatchObject({ jsonrpc: "2.0", error: { code: -32600 } })
      const nobody = yield* rpc(url, "nobody", { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } })
      expect(nobody.status).toBe(404)
      expect(nobody.body).toMatchObject({ jsonrpc: "2.0", error: { code: -32600 } })
    }).pipe(Effect.scoped), 30_000)

  it.live("a chunked body (no Content-Length) over the cap is 413 in JSON-RPC shape, not a parse error", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents(agents, { token, maxBodyBytes: 10_000 })
      const body = new TextEncoder().encode(JSON.stringify({ jsonrpc: "2.0", id: 4, method: "SendMessage", params: { message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "x".repeat(50_000) }] } } }))
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(body)
          controller.close()
        }
      })
      const response = yield* Effect.promise(() =>
        fetch(`${url}/a2a/assistant`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "a2a-version": "1.0", "content-type": "application/json" },
          body: stream,
          duplex: "half"
        } as RequestInit))
      expect(response.status).toBe(413)
      expect(yield* json(response)).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringContaining("limit") } })
    }).pipe(Effect.scoped), 30_000)

  it.live("a string id over 128 characters is -32600 with id null (it would be echoed on every frame of a stream); 128 are answered", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents(agents, { token })
      const long = yield* rpc(url, "assistant", { jsonrpc: "2.0", id: "x".repeat(10_000), method: "SendStreamingMessage", params: { message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "Hi" }] } } })
      expect(long.body).toMatchObject({ id: null, error: { code: -32600, message: expect.stringContaining("at most 128 characters") } })
      const unversioned = yield* rpc(url, "assistant", { jsonrpc: "2.0", id: "y".repeat(10_000), method: "GetTask", params: { id: "t" } }, { authorization: `Bearer ${token}` })
      expect(unversioned.body).toMatchObject({ id: null, error: { code: -32009 } })
      const fits = yield* rpc(url, "assistant", { jsonrpc: "2.0", id: "z".repeat(128), method: "GetTask", params: { id: "t" } })
      expect(fits.body).toMatchObject({ id: "z".repeat(128), error: { code: -32001 } })
    }).pipe(Effect.scoped), 30_000)

  it.live("the card's URL: the Host's name with the port the server listens on (not the Host's port); a Host with a fragment is refused; Vary: Host", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents(agents, { token })
      const port = new URL(url).port
      const card = (host: string) =>
        Effect.promise(() =>
          new Promise<{ readonly status: number; readonly vary: string | undefined; readonly body: string }>((resolve, reject) => {
            const request = httpRequest({ host: "127.0.0.1", port: Number(port), path: "/a2a/assistant/.well-known/agent-card.json", headers: { host, authorization: `Bearer ${token}` } }, (response) => {
              let body = ""
              response.on("data", (chunk) => (body += chunk))
              response.on("end", () => resolve({ status: response.statusCode ?? 0, vary: response.headers["vary"], body }))
            })
            request.on("error", reject)
            request.end()
          }))
      const otherPort = yield* card("localhost:1")
      expect(otherPort.status).toBe(200)
      expect(JSON.parse(otherPort.body).supportedInterfaces[0].url).toBe(`http://localhost:${port}/a2a/assistant`)
      expect(otherPort.vary).toMatch(/host/i)
      expect(JSON.parse((yield* card(`127.0.0.1:${port}`)).body).supportedInterfaces[0].url).toBe(`http://127.0.0.1:${port}/a2a/assistant`)
      expect((yield* card("localhost#x")).status).toBe(400)
    }).pipe(Effect.scoped), 30_000)

  it.live("beyond maxConcurrentRuns: 429 with Retry-After and a JSON-RPC error carrying RetryInfo", () =>
    Effect.gen(function*() {
      const stuck = Agent.make({ name: "stuck", instructions: "", model: Layer.orDie(ScriptedModel.layer(() => Effect.never)) }) as Agent.Agent<never>
      const url = yield* serveAgents([stuck], { token, maxConcurrentRuns: 1 })
      const client = yield* clientOf(url, "stuck")
      const first = yield* send(client, userMessage("Wait."), { returnImmediately: true })
      expect(first.status?.state).toBe(TaskState.TASK_STATE_WORKING)
      const response = yield* post(`${url}/a2a/stuck`, { jsonrpc: "2.0", id: 5, method: "SendMessage", params: { message: { messageId: "y", role: "ROLE_USER", parts: [{ text: "Me too." }] } } }, { authorization: `Bearer ${token}`, "a2a-version": "1.0" })
      expect(response.status).toBe(429)
      expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0)
      expect(yield* json(response)).toMatchObject({ id: 5, error: { code: -32603, data: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo" }] } })
    }).pipe(Effect.scoped), 30_000)

  it.live("beyond maxEventStreams: a SubscribeToTask more is refused (429, Retry-After, RetryInfo), through the SDK too; a dropped subscription gives its slot back", () =>
    Effect.gen(function*() {
      const stuck = Agent.make({ name: "stuck", instructions: "", model: Layer.orDie(ScriptedModel.layer(() => Effect.never)) }) as Agent.Agent<never>
      const url = yield* serveAgents([stuck], { token, maxEventStreams: 1 })
      const client = yield* clientOf(url, "stuck")
      // Starting a task is not following one: no slot.
      const task = yield* send(client, userMessage("Wait."), { returnImmediately: true })
      expect(task.status?.state).toBe(TaskState.TASK_STATE_WORKING)
      const abort = new AbortController()
      const subscribed = client.resubscribeTask({ tenant: "", id: task.id }, { signal: abort.signal })
      expect(kindOf((yield* Effect.promise(() => subscribed.next())).value as StreamResponse)).toBe("task")
      // The SDK's client reads the refusal as the JSON-RPC error it is.
      const refused = yield* refusal(() => collect(client.resubscribeTask({ tenant: "", id: task.id })).pipe(Effect.runPromise))
      expect(refused?.message).toContain("too many event streams")
      expect(refused?.envelopeCode).toBe(-32603)
      const raw = yield* post(`${url}/a2a/stuck`, { jsonrpc: "2.0", id: 7, method: "SubscribeToTask", params: { id: task.id } }, { authorization: `Bearer ${token}`, "a2a-version": "1.0" })
      expect(raw.status).toBe(429)
      expect(raw.headers.get("retry-after")).toBe("1")
      expect(yield* json(raw)).toMatchObject({ id: 7, error: { code: -32603, data: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "1s" }] } })
      // GetTask and starting tasks do not follow: not refused.
      expect((yield* Effect.promise(() => client.getTask({ tenant: "", id: task.id, historyLength: undefined }))).id).toBe(task.id)
      // The subscription is dropped: its slot comes back (tried again while refused, a bounded number of times).
      abort.abort()
      let again: AsyncGenerator<StreamResponse> | undefined
      for (let attempt = 0; again === undefined && attempt < 300; attempt++) {
        const next = client.resubscribeTask({ tenant: "", id: task.id })
        const first = yield* Effect.promise(() => next.next().then((result) => result, () => undefined))
        if (first !== undefined) again = next
        else yield* Effect.sleep("10 millis")
      }
      expect(again).toBeDefined()
      yield* Effect.promise(() => client.cancelTask({ tenant: "", id: task.id, metadata: undefined }))
      expect(stateOf((yield* collect(again!)).at(-1)!)).toBe(TaskState.TASK_STATE_CANCELED)
    }).pipe(Effect.scoped), 30_000)

  it.live("isolation: another owner's task and another agent's task are -32001, as unknown ones", () =>
    Effect.gen(function*() {
      const ownerFromHeader: RunsApi.OwnerOf = Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
        const user = request.headers["x-user"]
        return user === undefined ? Effect.fail(new RunsApi.Unauthorized({ message: "sign in: no x-user header" })) : Effect.succeed(user)
      })
      const url = yield* serveAgents(agents, { token, owner: ownerFromHeader })
      const ada = yield* clientOf(url, "assistant", { authorization: `Bearer ${token}`, "x-user": "ada" })
      const bob = yield* clientOf(url, "assistant", { authorization: `Bearer ${token}`, "x-user": "bob" })
      const task = yield* send(ada, userMessage("2 + 2?"))
      expect(outputOf(task)).toBe("4")
      expect(yield* refusal(() => bob.getTask({ tenant: "", id: task.id, historyLength: undefined }))).toBeInstanceOf(JsonRpcTaskNotFoundError)
      expect(yield* refusal(() => bob.cancelTask({ tenant: "", id: task.id, metadata: undefined }))).toBeInstanceOf(JsonRpcTaskNotFoundError)
      const adaAtOther = yield* clientOf(url, "other", { authorization: `Bearer ${token}`, "x-user": "ada" })
      expect(yield* refusal(() => adaAtOther.getTask({ tenant: "", id: task.id, historyLength: undefined }))).toBeInstanceOf(JsonRpcTaskNotFoundError)
      // No owner: the app's 401, in JSON-RPC shape.
      const anonymous = yield* rpc(url, "assistant", { jsonrpc: "2.0", id: 9, method: "GetTask", params: { id: task.id } })
      expect(anonymous.status).toBe(401)
      expect(anonymous.body).toMatchObject({ id: 9, error: { code: -32600 } })
    }).pipe(Effect.scoped), 30_000)
})

/** A gate a test opens: a tool waits on it. */
const gate = () => {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { open, opened }
}

const sendParams = (message: Message) => ({ tenant: "", message, configuration: undefined, metadata: undefined })

const kindOf = (event: StreamResponse) => event.payload?.$case

const stateOf = (event: StreamResponse) =>
  event.payload?.$case === "statusUpdate" ? event.payload.value.status?.state : event.payload?.$case === "task" ? event.payload.value.status?.state : undefined

describe("A2aApi ends (the @a2a-js/sdk client)", () => {
  it.live("a failed run is FAILED, its error's line as the status message and the typed error in metadata.valet; a tripped input guardrail is REJECTED", () =>
    Effect.gen(function*() {
      const noHomework = Guardrail.make("no_homework", (subject) =>
        Effect.succeed(subject.text.includes("homework") ? Guardrail.trip("mentions homework") : Guardrail.pass))
      const strict = Agent.make({ name: "strict", instructions: "", guardrails: { input: [noHomework] }, model: Layer.orDie(ScriptedModel.layer(["fine"])) }) as Agent.Agent<never>
      const url = yield* serveAgents([scriptedAgent("broken", [{ error: new ModelError.RateLimited({ message: "slow down" }) }]), strict], { token })
      const failed = yield* send(yield* clientOf(url, "broken"), userMessage("Hi."))
      expect(failed.status?.state).toBe(TaskState.TASK_STATE_FAILED)
      expect(failed.status?.message?.parts[0]?.content?.value).toContain("slow down")
      expect(failed.metadata?.["valet"]?.error).toMatchObject({ _tag: "RateLimited" })
      const client = yield* clientOf(url, "strict")
      const rejected = yield* send(client, userMessage("Do my homework."))
      expect(rejected.status?.state).toBe(TaskState.TASK_STATE_REJECTED)
      // GetTask folds the same log to the same end.
      expect((yield* Effect.promise(() => client.getTask({ tenant: "", id: rejected.id, historyLength: undefined }))).status?.state).toBe(TaskState.TASK_STATE_REJECTED)
      expect((yield* send(client, userMessage("Hello."))).status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
    }).pipe(Effect.scoped), 30_000)
})

describe("A2aApi streams (the @a2a-js/sdk client)", () => {
  it.live("SendStreamingMessage: the task first, then the answer as artifact updates, then COMPLETED, and the stream ends", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("assistant", ["Paris is the capital of France."])], { token })
      const client = yield* clientOf(url, "assistant")
      const events = yield* collect(client.sendMessageStream(sendParams(userMessage("Capital of France?"))))
      expect(kindOf(events[0]!)).toBe("task")
      expect(stateOf(events[0]!)).toBe(TaskState.TASK_STATE_WORKING)
      expect(kindOf(events.at(-1)!)).toBe("statusUpdate")
      expect(stateOf(events.at(-1)!)).toBe(TaskState.TASK_STATE_COMPLETED)
      const artifacts = events.flatMap((event) => (event.payload?.$case === "artifactUpdate" ? [event.payload.value] : []))
      // The deltas, then the whole output replacing them (append: false), marked as the last chunk.
      expect(artifacts.length).toBeGreaterThan(2)
      const last = artifacts.at(-1)!
      expect(last).toMatchObject({ append: false, lastChunk: true })
      expect(last.artifact?.parts[0]?.content).toEqual({ $case: "text", value: "Paris is the capital of France." })
      expect(artifacts.slice(0, -1).map((update) => update.artifact?.parts[0]?.content?.value).join("")).toBe("Paris is the capital of France.")
      expect(artifacts[0]!.append).toBe(false)
      expect(artifacts[1]!.append).toBe(true)
    }).pipe(Effect.scoped), 30_000)

  it.live("a dropped stream does not cancel the task; SubscribeToTask resumes it: the task as it is, then the rest", () =>
    Effect.gen(function*() {
      const slow = gate()
      const lookup = Tool.make({
        name: "lookup",
        description: "Looks up",
        parameters: Schema.Struct({}),
        handler: () => Effect.as(Effect.promise(() => slow.opened), "found")
      })
      const agent = Agent.make({
        name: "researcher",
        instructions: "",
        tools: [lookup],
        model: Layer.orDie(ScriptedModel.layer([{ text: "Let me check.", toolCalls: [{ id: "c1", name: "lookup", arguments: {} }] }, "It is found."]))
      }) as Agent.Agent<never>
      const url = yield* serveAgents([agent], { token })
      const client = yield* clientOf(url, "researcher")
      const abort = new AbortController()
      const seen = yield* Effect.promise(async () => {
        const seen: Array<StreamResponse> = []
        for await (const event of client.sendMessageStream(sendParams(userMessage("Find it.")), { signal: abort.signal })) {
          seen.push(event)
          if (event.payload?.$case === "statusUpdate") break
        }
        abort.abort()
        return seen
      })
      const taskId = seen[0]!.payload?.$case === "task" ? seen[0]!.payload.value.id : ""
      // The task, the first turn's text word by word, then the tool call the task is in.
      expect([...new Set(seen.map(kindOf))]).toEqual(["task", "artifactUpdate", "statusUpdate"])
      const calling = seen.at(-1)!
      expect(calling.payload?.$case === "statusUpdate" && calling.payload.value.status?.message?.parts[0]?.content?.value).toBe("calling lookup")
      const resumed = client.resubscribeTask({ tenant: "", id: taskId })
      const first = yield* Effect.promise(() => resumed.next())
      const snapshot = first.value as StreamResponse
      expect(kindOf(snapshot)).toBe("task")
      const task = snapshot.payload?.$case === "task" ? snapshot.payload.value : undefined
      expect(task?.status?.state).toBe(TaskState.TASK_STATE_WORKING)
      expect(outputOf(task!)).toBe("Let me check.")
      slow.open()
      const rest = yield* collect(resumed)
      expect(stateOf(rest.at(-1)!)).toBe(TaskState.TASK_STATE_COMPLETED)
      const done = yield* Effect.promise(() => client.getTask({ tenant: "", id: taskId, historyLength: undefined }))
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
      expect(outputOf(done)).toBe("It is found.")
    }).pipe(Effect.scoped), 30_000)

  it.live("CancelTask mid-run: CANCELED (and the stream says so); again: CANCELED; a COMPLETED task: -32002; SubscribeToTask on it: -32004", () =>
    Effect.gen(function*() {
      const stuck = Agent.make({
        name: "stuck",
        instructions: "",
        model: Layer.orDie(ScriptedModel.layer(() => Effect.never))
      }) as Agent.Agent<never>
      const url = yield* serveAgents([stuck, scriptedAgent("assistant", ["4"])], { token })
      const client = yield* clientOf(url, "stuck")
      const stream = client.sendMessageStream(sendParams(userMessage("Wait.")))
      const first = (yield* Effect.promise(() => stream.next())).value as StreamResponse
      const taskId = first.payload?.$case === "task" ? first.payload.value.id : ""
      const canceled = yield* Effect.promise(() => client.cancelTask({ tenant: "", id: taskId, metadata: undefined }))
      expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED)
      const rest = yield* collect(stream)
      expect(stateOf(rest.at(-1)!)).toBe(TaskState.TASK_STATE_CANCELED)
      const again = yield* Effect.promise(() => client.cancelTask({ tenant: "", id: taskId, metadata: undefined }))
      expect(again.status?.state).toBe(TaskState.TASK_STATE_CANCELED)
      const assistant = yield* clientOf(url, "assistant")
      const done = yield* send(assistant, userMessage("2 + 2?"))
      const notCancelable = yield* refusal(() => assistant.cancelTask({ tenant: "", id: done.id, metadata: undefined }))
      expect(notCancelable).toBeInstanceOf(JsonRpcTaskNotCancelableError)
      expect(notCancelable?.message).toContain("TASK_STATE_COMPLETED")
      const ended = yield* refusal(() => collect(assistant.resubscribeTask({ tenant: "", id: done.id })).pipe(Effect.runPromise))
      expect(ended).toBeInstanceOf(JsonRpcUnsupportedOperationError)
    }).pipe(Effect.scoped), 30_000)

  it.live("beyond maxEventStreams: an answer to a waiting task (which follows it) is refused before it is taken; once a slot is free it goes on", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent([{ toolCalls: [refundCall("c1", 30)] }, "Refunded 30."])
      const url = yield* serveAgents([agent], { token, maxEventStreams: 1 })
      const client = yield* clientOf(url, "support")
      const waiting = yield* send(client, userMessage("Refund my order."))
      expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
      // The one slot, held by a reader of the task's run (a task is a run: GET /runs/:id/events follows it).
      const abort = new AbortController()
      const reader = yield* Effect.promise(() => fetch(`${url}/runs/${waiting.id}/events`, { headers: { authorization: `Bearer ${token}` }, signal: abort.signal }))
      expect(reader.status).toBe(200)
      yield* Effect.promise(() => reader.body!.getReader().read())
      const refused = yield* refusal(() => send(client, dataMessage({ approved: true }, waiting.id)).pipe(Effect.runPromise))
      expect(refused?.envelopeCode).toBe(-32603)
      expect(refused?.message).toContain("too many event streams")
      // Nothing was answered: the call still waits, and the message is not in the task's history.
      expect(ran).toEqual([])
      const still = yield* Effect.promise(() => client.getTask({ tenant: "", id: waiting.id, historyLength: undefined }))
      expect(still.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
      expect(still.history.filter((message) => message.role === Role.ROLE_USER)).toHaveLength(1)
      // The reader goes away; the answer, sent again while refused (a bounded number of times), goes on.
      abort.abort()
      let done: Task | undefined
      for (let attempt = 0; done === undefined && attempt < 300; attempt++) {
        done = yield* Effect.promise(() => Effect.runPromise(send(client, dataMessage({ approved: true }, waiting.id))).then((task) => task, () => undefined))
        if (done === undefined) yield* Effect.sleep("10 millis")
      }
      expect(done?.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
      expect(ran).toEqual([30])
    }).pipe(Effect.scoped), 30_000)
})

/** The data part of a task's status message (what an input-required task asks). */
const askedOf = (task: Task) => task.status?.message?.parts.flatMap((part) => (part.content?.$case === "data" ? [part.content.value] : []))[0]

describe("A2aApi input required (the @a2a-js/sdk client)", () => {
  it.live("a tool call waiting for approval: INPUT_REQUIRED with the call as a data part; a message with the taskId and {approved} goes on to COMPLETED", () =>
    Effect.gen(function*() {
      const { agent, ran } = supportAgent([{ toolCalls: [refundCall("c1", 30)] }, "Refunded 30."])
      const url = yield* serveAgents([agent], { token })
      const client = yield* clientOf(url, "support")
      const waiting = yield* send(client, userMessage("Refund my order."))
      expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
      expect(askedOf(waiting)).toMatchObject({ kind: "approval", toolCallId: "c1", name: "refund", arguments: `{"amount":30}` })
      expect(ran).toEqual([])
      // GetTask says the same while it waits; a message that is no decision is refused naming what waits.
      expect((yield* Effect.promise(() => client.getTask({ tenant: "", id: waiting.id, historyLength: undefined }))).status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
      const wrong = yield* refusal(() => send(client, dataMessage({ approved: true, toolCallId: "c9" }, waiting.id)).pipe(Effect.runPromise))
      expect(wrong).toBeInstanceOf(JsonRpcRequestMalformedError)
      expect(wrong?.message).toContain("c1")
      const done = yield* send(client, dataMessage({ approved: true }, waiting.id))
      expect(done.id).toBe(waiting.id)
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
      expect(outputOf(done)).toBe("Refunded 30.")
      expect(ran).toEqual([30])
      // An ended task takes no more messages.
      const late = yield* refusal(() => send(client, dataMessage({ approved: true }, waiting.id)).pipe(Effect.runPromise))
      expect(late).toBeInstanceOf(JsonRpcUnsupportedOperationError)
    }).pipe(Effect.scoped), 30_000)

  it.live("a question (ask_human): the stream closes at INPUT_REQUIRED; a streamed text answer resumes the task to COMPLETED; a working task takes no message", () =>
    Effect.gen(function*() {
      const agent = Agent.make({
        name: "booker",
        instructions: "",
        tools: [HumanLoop.askTool()],
        model: Layer.orDie(ScriptedModel.layer((request, index) =>
          index === 0 ? { toolCalls: [{ id: "a1", name: "ask_human", arguments: { question: "How many nights?" } }] } : `Booked: ${request.messages?.at(-1)?.content}`))
      }) as Agent.Agent<never>
      const url = yield* serveAgents([agent], { token })
      const client = yield* clientOf(url, "booker")
      const first = yield* collect(client.sendMessageStream(sendParams(userMessage("Book a room."))))
      const last = first.at(-1)!
      expect(stateOf(last)).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
      const status = last.payload?.$case === "statusUpdate" ? last.payload.value : undefined
      const asked = status?.status?.message?.parts.flatMap((part) => (part.content?.$case === "data" ? [part.content.value] : []))[0]
      expect(asked).toMatchObject({ kind: "question", questionId: "q1", question: "How many nights?", schema: { type: "string" } })
      const taskId = status!.taskId
      const resumed = yield* collect(client.sendMessageStream(sendParams(userMessage("Three.", { taskId }))))
      // The task again (working), then the rest to the end.
      expect(kindOf(resumed[0]!)).toBe("task")
      expect(stateOf(resumed[0]!)).toBe(TaskState.TASK_STATE_WORKING)
      expect(stateOf(resumed.at(-1)!)).toBe(TaskState.TASK_STATE_COMPLETED)
      const done = yield* Effect.promise(() => client.getTask({ tenant: "", id: taskId, historyLength: undefined }))
      expect(outputOf(done)).toBe("Booked: Three.")
    }).pipe(Effect.scoped), 30_000)

  it.live("history: the client's messages as received (their messageIds), the answers, and the agent's questions, in order; a retried answer answers nothing again", () =>
    Effect.gen(function*() {
      const agent = Agent.make({
        name: "booker",
        instructions: "",
        tools: [HumanLoop.askTool()],
        model: Layer.orDie(ScriptedModel.layer((request, index) =>
          index === 0
            ? { toolCalls: [{ id: "a1", name: "ask_human", arguments: { question: "How many nights?" } }] }
            : index === 1
            ? { toolCalls: [{ id: "a2", name: "ask_human", arguments: { question: "Which view?" } }] }
            : `Booked: ${request.messages?.at(-1)?.content}`))
      }) as Agent.Agent<never>
      const url = yield* serveAgents([agent], { token })
      const client = yield* clientOf(url, "booker")
      const first = yield* send(client, userMessage("Book a room.", { messageId: "client-m1" }))
      expect(first.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
      expect(first.history[0]?.messageId).toBe("client-m1")
      const second = yield* send(client, userMessage("Three.", { taskId: first.id, messageId: "client-m2" }))
      expect(second.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
      // The same message again (a client's retry): the task as it is, still asking the second question.
      const retried = yield* send(client, userMessage("Three.", { taskId: first.id, messageId: "client-m2" }))
      expect(retried.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED)
      expect(retried.status?.message?.parts[0]?.content?.$case === "text" && retried.status.message.parts[0].content.value).toMatch(/^Which view\?/)
      const done = yield* send(client, userMessage("Sea.", { taskId: first.id, messageId: "client-m3" }))
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED)
      expect(outputOf(done)).toBe("Booked: Sea.")
      const task = yield* Effect.promise(() => client.getTask({ tenant: "", id: first.id, historyLength: undefined }))
      const turns = task.history
        .map((message) => message.role === Role.ROLE_USER ? `user ${message.messageId}` : `agent ${message.parts[0]?.content?.$case === "text" ? message.parts[0].content.value : ""}`)
        .filter((line) => !line.startsWith("agent calling"))
      expect(turns).toEqual(["user client-m1", expect.stringMatching(/^agent How many nights\?/), "user client-m2", expect.stringMatching(/^agent Which view\?/), "user client-m3"])
      expect(task.history.find((message) => message.messageId === "client-m2")?.parts[0]?.content).toEqual({ $case: "text", value: "Three." })
      // historyLength applies to that list.
      const last = yield* Effect.promise(() => client.getTask({ tenant: "", id: first.id, historyLength: 1 }))
      expect(last.history.map((message) => message.messageId)).toEqual(["client-m3"])
    }).pipe(Effect.scoped), 30_000)

  it.live("a message to a working task is -32004 (input only in INPUT_REQUIRED); a contextId that is not the task's is -32602", () =>
    Effect.gen(function*() {
      const { agent } = supportAgent([{ toolCalls: [refundCall("c1", 5)] }, "Done."])
      const stuck = Agent.make({ name: "stuck", instructions: "", model: Layer.orDie(ScriptedModel.layer(() => Effect.never)) }) as Agent.Agent<never>
      const url = yield* serveAgents([agent, stuck], { token })
      const client = yield* clientOf(url, "stuck")
      const working = yield* send(client, userMessage("Wait."), { returnImmediately: true })
      expect(working.status?.state).toBe(TaskState.TASK_STATE_WORKING)
      expect(yield* refusal(() => send(client, userMessage("More.", { taskId: working.id })).pipe(Effect.runPromise))).toBeInstanceOf(JsonRpcUnsupportedOperationError)
      const support = yield* clientOf(url, "support")
      const waiting = yield* send(support, userMessage("Refund."))
      const elsewhere = yield* refusal(() => send(support, { ...dataMessage({ approved: true }, waiting.id), contextId: "another" }).pipe(Effect.runPromise))
      expect(elsewhere).toBeInstanceOf(JsonRpcRequestMalformedError)
      expect(elsewhere?.data).toMatchObject([{ fieldViolations: [{ field: "message.contextId" }] }])
    }).pipe(Effect.scoped), 30_000)
})

describe("A2aApi contexts (the @a2a-js/sdk client)", () => {
  /** An agent answering with the number of user messages it saw, and the texts of the conversation. */
  const counting = () => {
    const seen: Array<ReadonlyArray<string>> = []
    const agent = Agent.make({
      name: "counter",
      instructions: "",
      model: Layer.orDie(ScriptedModel.layer((request) => {
        const texts = (request.messages ?? []).filter((message) => message.role === "user" || message.role === "assistant").map((message) => `${message.role}: ${String(message.content)}`)
        seen.push(texts)
        return `turn ${texts.filter((text) => text.startsWith("user")).length}`
      }))
    }) as Agent.Agent<never>
    return { agent, seen }
  }

  it.live("with a thread store, contextId is the thread: a second message with the first task's contextId sees the first turn; a new contextId starts a thread", () =>
    Effect.gen(function*() {
      const { agent, seen } = counting()
      const url = yield* serveAgents([agent], { token }, Threads.layerMemory())
      const client = yield* clientOf(url, "counter")
      const first = yield* send(client, userMessage("My name is Ada."))
      expect(outputOf(first)).toBe("turn 1")
      expect(first.contextId).not.toBe("")
      const second = yield* send(client, userMessage("What is my name?", { contextId: first.contextId }))
      expect(second.contextId).toBe(first.contextId)
      expect(second.id).not.toBe(first.id)
      expect(outputOf(second)).toBe("turn 2")
      expect(seen.at(-1)).toEqual(["user: My name is Ada.", "assistant: turn 1", "user: What is my name?"])
      // A contextId never seen: a thread of that id, made on first use.
      const named = yield* send(client, userMessage("Hello.", { contextId: "conv-42" }))
      expect(named.contextId).toBe("conv-42")
      expect(outputOf(named)).toBe("turn 1")
      const bad = yield* refusal(() => send(client, userMessage("Hello.", { contextId: "no spaces allowed" })).pipe(Effect.runPromise))
      expect(bad).toBeInstanceOf(JsonRpcRequestMalformedError)
    }).pipe(Effect.scoped), 30_000)

  it.live("a contextId is the owner's own: another owner's context (given out or chosen) is a new conversation for the caller, neither refused nor shared; without a thread store a contextId is -32004", () =>
    Effect.gen(function*() {
      const ownerFromHeader: RunsApi.OwnerOf = Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) =>
        Effect.succeed(request.headers["x-user"] ?? "nobody"))
      const { agent, seen } = counting()
      const url = yield* serveAgents([agent], { token, owner: ownerFromHeader }, Threads.layerMemory())
      const ada = yield* clientOf(url, "counter", { authorization: `Bearer ${token}`, "x-user": "ada" })
      const bob = yield* clientOf(url, "counter", { authorization: `Bearer ${token}`, "x-user": "bob" })
      // A context the server gave ada: bob naming it gets a conversation of his own, and sees nothing of ada's.
      const mine = yield* send(ada, userMessage("Secret."))
      const probe = yield* send(bob, userMessage("Tell me.", { contextId: mine.contextId }))
      expect(probe.contextId).toBe(mine.contextId)
      expect(outputOf(probe)).toBe("turn 1")
      expect(seen.at(-1)).toEqual(["user: Tell me."])
      // A context ada chose first (squatting bob's predictable name): bob's message with it is his own first turn,
      // the same answer as for an id nobody has, so it tells him nothing; ada's next turn still sees only hers.
      const squat = yield* send(ada, userMessage("Mine now.", { contextId: "support-chat-bob" }))
      expect(squat.contextId).toBe("support-chat-bob")
      const bobs = yield* send(bob, userMessage("Help.", { contextId: "support-chat-bob" }))
      expect(bobs.contextId).toBe("support-chat-bob")
      expect(outputOf(bobs)).toBe("turn 1")
      expect(seen.at(-1)).toEqual(["user: Help."])
      const bobsAgain = yield* send(bob, userMessage("Still there?", { contextId: "support-chat-bob" }))
      expect(outputOf(bobsAgain)).toBe("turn 2")
      expect(seen.at(-1)).toEqual(["user: Help.", "assistant: turn 1", "user: Still there?"])
      const adasAgain = yield* send(ada, userMessage("Again.", { contextId: "support-chat-bob" }))
      expect(seen.at(-1)).toEqual(["user: Mine now.", "assistant: turn 1", "user: Again."])
      expect(adasAgain.contextId).toBe("support-chat-bob")
      // GetTask answers the contextId the client chose, not the thread id it is kept under.
      expect((yield* Effect.promise(() => bob.getTask({ tenant: "", id: bobs.id, historyLength: undefined }))).contextId).toBe("support-chat-bob")
      const plain = yield* serveAgents([counting().agent], { token })
      const client = yield* clientOf(plain, "counter")
      const task = yield* send(client, userMessage("Hi."))
      expect(task.contextId).not.toBe("")
      const refused = yield* refusal(() => send(client, userMessage("Again.", { contextId: task.contextId })).pipe(Effect.runPromise))
      expect(refused).toBeInstanceOf(JsonRpcUnsupportedOperationError)
      expect(refused?.message).toContain("threads:")
    }).pipe(Effect.scoped), 30_000)
})

describe("A2aApi listing and what is not offered (the @a2a-js/sdk client)", () => {
  it.live("ListTasks: this agent's tasks of this owner, newest first, filtered by context and state; artifacts only when asked; nextPageToken", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("assistant", ["4"]), scriptedAgent("other", ["5"])], { token }, Threads.layerMemory())
      const client = yield* clientOf(url, "assistant")
      const first = yield* send(client, userMessage("one"))
      const second = yield* send(client, userMessage("two", { contextId: first.contextId }))
      const third = yield* send(client, userMessage("three"))
      yield* send(yield* clientOf(url, "other"), userMessage("elsewhere"))
      const list = (params: Record<string, unknown>) =>
        Effect.promise(() =>
          client.listTasks({
            tenant: "",
            contextId: "",
            status: TaskState.TASK_STATE_UNSPECIFIED,
            pageSize: undefined,
            pageToken: "",
            historyLength: undefined,
            statusTimestampAfter: undefined,
            includeArtifacts: undefined,
            ...params
          })
        )
      const all = yield* list({})
      expect(all.tasks.map((task) => task.id)).toEqual([third.id, second.id, first.id])
      expect(all.nextPageToken).toBe("")
      expect(all.tasks[0]!.artifacts).toEqual([])
      const inContext = yield* list({ contextId: first.contextId, includeArtifacts: true })
      expect(inContext.tasks.map((task) => task.id)).toEqual([second.id, first.id])
      expect(outputOf(inContext.tasks[0]!)).toBe("4")
      expect((yield* list({ status: TaskState.TASK_STATE_CANCELED })).tasks).toEqual([])
      const page = yield* list({ pageSize: 2 })
      expect(page.tasks.map((task) => task.id)).toEqual([third.id, second.id])
      expect(page.nextPageToken).not.toBe("")
      expect((yield* list({ pageSize: 2, pageToken: page.nextPageToken })).tasks.map((task) => task.id)).toEqual([first.id])
    }).pipe(Effect.scoped), 30_000)

  it.live("ListTasks: statusTimestampAfter filters (unparsable: -32602), totalSize counts every matching task, pageSize is the size used, an unset historyLength keeps the history", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("assistant", ["4"])], { token })
      const client = yield* clientOf(url, "assistant")
      const first = yield* send(client, userMessage("one", { messageId: "list-m1" }))
      const second = yield* send(client, userMessage("two"))
      const third = yield* send(client, userMessage("three"))
      const list = (params: Record<string, unknown>) => Effect.map(rpc(url, "assistant", { jsonrpc: "2.0", id: 1, method: "ListTasks", params }), (answer) => answer.body)
      const page = yield* list({ pageSize: 2 })
      expect(page.result).toMatchObject({ pageSize: 2, totalSize: 3 })
      expect(page.result.tasks.map((task: { readonly id: string }) => task.id)).toEqual([third.id, second.id])
      expect(page.result.nextPageToken).not.toBe("")
      expect((yield* list({})).result).toMatchObject({ pageSize: 50, totalSize: 3, nextPageToken: "" })
      const future = yield* list({ statusTimestampAfter: "2999-01-01T00:00:00Z" })
      expect(future.result).toMatchObject({ tasks: [], totalSize: 0 })
      const past = yield* list({ statusTimestampAfter: "2000-01-01T00:00:00Z" })
      expect(past.result.totalSize).toBe(3)
      const bad = yield* list({ statusTimestampAfter: "yesterday" })
      expect(bad.error).toMatchObject({ code: -32602, data: [{ fieldViolations: [{ field: "statusTimestampAfter" }] }] })
      const completed = yield* list({ status: "TASK_STATE_COMPLETED", pageSize: 1 })
      expect(completed.result).toMatchObject({ pageSize: 1, totalSize: 3 })
      const last = (yield* list({ pageSize: 1, pageToken: (yield* list({ pageSize: 2 })).result.nextPageToken })).result
      expect(last.tasks.map((task: { readonly id: string }) => task.id)).toEqual([first.id])
      expect(last.tasks[0].history.map((message: { readonly messageId: string }) => message.messageId)).toEqual(["list-m1"])
    }).pipe(Effect.scoped), 30_000)

  it.live("push notification methods are -32003 and GetExtendedAgentCard -32004, as the card declares; an unknown method -32601", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents(agents, { token })
      for (const method of ["CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig"]) {
        expect((yield* rpc(url, "assistant", { jsonrpc: "2.0", id: method, method, params: { taskId: "t", id: "c" } })).body).toMatchObject({ id: method, error: { code: -32003 } })
      }
      const client = yield* clientOf(url, "assistant")
      const push = yield* refusal(() => client.deleteTaskPushNotificationConfig({ tenant: "", taskId: "t", id: "c" }))
      expect(push).toBeInstanceOf(JsonRpcPushNotificationNotSupportedError)
      expect((yield* rpc(url, "assistant", { jsonrpc: "2.0", id: 1, method: "GetExtendedAgentCard", params: {} })).body).toMatchObject({ error: { code: -32004 } })
      expect((yield* rpc(url, "assistant", { jsonrpc: "2.0", id: 2, method: "tasks/frobnicate" })).body).toMatchObject({ id: 2, error: { code: -32601 } })
    }).pipe(Effect.scoped), 30_000)
})

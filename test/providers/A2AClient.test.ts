/**
 * The A2A client against hostile or broken remotes, each a raw `node:http` server on loopback: where the token goes,
 * how much of a body is read, redirects, a failed run's remote task, silent remotes, and the remote's text in errors.
 * (From the review of the A2A client, /work/briefs/review-a2aclient.md, D1–D6.)
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schedule, Stream } from "effect"
import { HttpClient, HttpClientResponse } from "effect/http"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import * as Agent from "../../src/core/Agent.js"
import * as A2A from "../../src/providers/A2A.js"
import * as A2AArchitecture from "../../src/providers/internal/a2a/architecture.js"

type Handler = (request: IncomingMessage, body: string, response: ServerResponse) => void

/** A raw HTTP server on a free loopback port for the scope. */
const serve = (handler: Handler) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly url: string; readonly close: () => void }>((resolve) => {
        const server = createServer((request, response) => {
          let body = ""
          request.on("data", (chunk) => body += chunk)
          request.on("end", () => handler(request, body, response))
        })
        server.listen(0, "127.0.0.1", () =>
          resolve({
            url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
            close: () => {
              server.closeAllConnections()
              server.close()
            }
          }))
      })
    ),
    (server) => Effect.sync(() => server.close())
  )

const cardOf = (endpoint: string, streaming = true) => ({
  name: "probe",
  description: "A probe.",
  version: "1",
  supportedInterfaces: [{ url: endpoint, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
  capabilities: { streaming },
  defaultInputModes: ["text/plain"],
  defaultOutputModes: ["text/plain"],
  skills: []
})

const json = (response: ServerResponse, value: unknown) =>
  response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(value))

const event = (response: ServerResponse, id: unknown, result: unknown) =>
  response.write(`data: ${JSON.stringify({ jsonrpc: "2.0", id, result })}\n\n`)

const working = { task: { id: "t1", contextId: "c1", status: { state: "TASK_STATE_WORKING" } } }

/**
 * A remote that serves its card on GET (its endpoint `<its url>/rpc`), answers `CancelTask` as cancelled, and hands
 * every other JSON-RPC call to `onRpc`; with the methods called, in order.
 */
const remote = (onRpc: (rpc: { readonly id: string | number; readonly method: string }, response: ServerResponse) => void) =>
  Effect.gen(function*() {
    const methods: Array<string> = []
    const self = { url: "" }
    const origin = yield* serve((request, body, response) => {
      if (request.method === "GET") return json(response, cardOf(`${self.url}/rpc`))
      const rpc = JSON.parse(body)
      methods.push(rpc.method)
      if (rpc.method === "CancelTask") {
        return json(response, { jsonrpc: "2.0", id: rpc.id, result: { id: "t1", contextId: "c1", status: { state: "TASK_STATE_CANCELED" } } })
      }
      onRpc(rpc, response)
    })
    self.url = origin.url
    return { origin, methods }
  })

/** The same loopback server under another origin (`localhost` against `127.0.0.1`). */
const elsewhere = (url: string) => url.replace("127.0.0.1", "localhost")

describe("A2A client against hostile remotes", () => {
  it.live("D1: a card naming an endpoint on another origin: no token and no custom header reach it, unless allowedOrigins lists it", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const other = yield* serve((request, body, response) => {
        seen.push(`auth=${request.headers.authorization} x=${request.headers["x-api-key"]}`)
        const rpc = JSON.parse(body)
        response.writeHead(200, { "content-type": "text/event-stream" })
        event(response, rpc.id, { task: { id: "t1", contextId: "c1", status: { state: "TASK_STATE_COMPLETED" }, artifacts: [{ artifactId: "a", parts: [{ text: "done" }] }] } })
        response.end()
      })
      const origin = yield* serve((_request, _body, response) => json(response, cardOf(`${elsewhere(other.url)}/rpc`)))
      const options = { name: "r", token: "SECRET", headers: { "x-api-key": "K" } }
      const result = yield* Agent.run(A2A.agent(`${origin.url}/agent-card.json`, options), "hi")
      expect(result.output).toBe("done")
      expect(seen).toEqual(["auth=undefined x=undefined"])
      yield* Agent.run(A2A.agent(`${origin.url}/agent-card.json`, { ...options, allowedOrigins: [elsewhere(other.url)] }), "hi")
      expect(seen[1]).toBe("auth=Bearer SECRET x=K")
    }).pipe(Effect.scoped), 20_000)

  it.effect("D1: an https card naming an http endpoint is refused (RemoteAgentFailed malformed, one line), nothing is sent there", () =>
    Effect.gen(function*() {
      const requested: Array<string> = []
      // A client answering in memory: the card over https, anything else a 500 (no https server on loopback needed).
      const http = HttpClient.make((request, url) => {
        requested.push(`${request.method} ${url.href}`)
        return Effect.succeed(HttpClientResponse.fromWeb(
          request,
          url.protocol === "https:"
            ? new Response(JSON.stringify(cardOf("http://agents.example/rpc")), { headers: { "content-type": "application/json" } })
            : new Response("", { status: 500 })
        ))
      })
      const agent = A2A.agentWith("https://agents.example/agent-card.json", { name: "r", token: "SECRET" })
      const error = yield* Effect.flip(Agent.run(agent, "hi").pipe(Effect.provide(Layer.succeed(HttpClient.HttpClient, http))))
      expect(error._tag).toBe("RemoteAgentFailed")
      expect(error.message).toContain("http://agents.example/rpc")
      expect(error.message).not.toContain("\n")
      expect(requested).toEqual(["GET https://agents.example/agent-card.json"])
    }))

  it.live("D2: a chunked card with no Content-Length, over 16 MiB: RemoteAgentFailed malformed, the read stopped past the cap", () =>
    Effect.gen(function*() {
      const total = 64 * 1024 * 1024
      let sent = 0
      const origin = yield* serve((_request, _body, response) => {
        response.writeHead(200, { "content-type": "application/json" })
        const chunk = " ".repeat(256 * 1024)
        const write = () => {
          while (sent < total && !response.destroyed) {
            sent += chunk.length
            if (!response.write(chunk)) return void response.once("drain", write)
          }
          response.end("{}")
        }
        write()
      })
      const error = yield* Effect.flip(A2A.card(`${origin.url}/agent-card.json`))
      expect(error.reason).toBe("malformed")
      expect(error.message).toContain("over 16777216 bytes")
      // The server stopped when the client closed: far less than the 64 MiB it meant to send.
      expect(sent).toBeLessThan(total / 2)
    }).pipe(Effect.scoped), 30_000)

  it.live("D2: a 500 with an endless body: RemoteAgentFailed http 500, at most 64 KiB of it read", () =>
    Effect.gen(function*() {
      let sent = 0
      const origin = yield* serve((_request, _body, response) => {
        response.writeHead(500, { "content-type": "text/plain" })
        const chunk = "x".repeat(64 * 1024)
        const write = () => {
          while (!response.destroyed && sent < 128 * 1024 * 1024) {
            sent += chunk.length
            if (!response.write(chunk)) return void response.once("drain", write)
          }
          response.end()
        }
        write()
      })
      const error = yield* Effect.flip(A2A.card(`${origin.url}/agent-card.json`))
      expect(error.reason).toBe("http")
      expect(error.code).toBe(500)
      expect(sent).toBeLessThan(16 * 1024 * 1024)
    }).pipe(Effect.scoped), 30_000)

  it.live("D3: a redirected card is not followed: RemoteAgentFailed http 302 naming the target, which sees no request", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const other = yield* serve((request, _body, response) => {
        seen.push(`${request.method} ${request.url} x=${request.headers["x-api-key"]}`)
        json(response, cardOf(`${elsewhere(other.url)}/rpc`))
      })
      const origin = yield* serve((_request, _body, response) => response.writeHead(302, { location: `${elsewhere(other.url)}/c.json` }).end())
      const error = yield* Effect.flip(Agent.run(A2A.agent(`${origin.url}/agent-card.json`, { name: "r", token: "SECRET", headers: { "x-api-key": "K" } }), "hi"))
      expect(error._tag).toBe("RemoteAgentFailed")
      expect(error.message).toContain(`redirected to ${elsewhere(other.url)}/c.json`)
      expect(seen).toEqual([])
    }).pipe(Effect.scoped), 20_000)

  it.live("D4: a run failing on a malformed event cancels the live remote task (CancelTask is sent)", () =>
    Effect.gen(function*() {
      const { methods, origin } = yield* remote((rpc, response) => {
        response.writeHead(200, { "content-type": "text/event-stream" })
        event(response, rpc.id, working)
        response.end("data: {not json\n\n")
      })
      const error = yield* Effect.flip(Agent.run(A2A.agent(`${origin.url}/agent-card.json`, { name: "r" }), "hi"))
      expect(error._tag).toBe("RemoteAgentFailed")
      expect(error.message).toContain("not JSON")
      expect(methods).toEqual(["SendStreamingMessage", "CancelTask"])
    }).pipe(Effect.scoped), 20_000)

  it.live("D5: a card that never answers: the run fails with RemoteAgentFailed timeout under `timeout`, and under requestTimeout", () =>
    Effect.gen(function*() {
      const origin = yield* serve(() => {}) // accepts, never answers
      const byTimeout = yield* Effect.flip(Agent.run(A2A.agent(`${origin.url}/agent-card.json`, { name: "r", timeout: "300 millis" }), "hi"))
      expect(byTimeout).toMatchObject({ _tag: "RemoteAgentFailed", reason: "timeout" })
      expect(byTimeout.message).toContain("the agent card was not read within")
      const byRequest = yield* Effect.flip(A2A.card(`${origin.url}/agent-card.json`, { requestTimeout: "300 millis" }))
      expect(byRequest).toMatchObject({ reason: "timeout" })
    }).pipe(Effect.scoped), 20_000)

  it.live("D5: a stream sending only keep-alive comments is lost after idleTimeout, resubscribed, then fails stream_lost", () =>
    Effect.gen(function*() {
      const timers: Array<ReturnType<typeof setInterval>> = []
      const { methods, origin } = yield* remote((rpc, response) => {
        response.writeHead(200, { "content-type": "text/event-stream" })
        event(response, rpc.id, working)
        const timer = setInterval(() => response.write(": ping\n\n"), 50)
        timers.push(timer)
        response.on("close", () => clearInterval(timer))
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => timers.forEach(clearInterval)))
      const agent = A2A.agent(`${origin.url}/agent-card.json`, { name: "r", idleTimeout: "300 millis", resubscribe: Schedule.recurs(1) })
      const error = yield* Effect.flip(Agent.run(agent, "hi"))
      expect(error).toMatchObject({ _tag: "RemoteAgentFailed", reason: "stream_lost" })
      expect(error.message).toContain("no event within")
      // The first resume, its one retry (recurs(1)), then the cancel of the task left without a reader.
      expect(methods).toEqual(["SendStreamingMessage", "SubscribeToTask", "SubscribeToTask", "CancelTask"])
    }).pipe(Effect.scoped), 20_000)

  it.live("D6: a FAILED task's long multi-line status text is one capped line in the error and in the Progress event", () =>
    Effect.gen(function*() {
      const said = `first line\nFAKE: second line\n${"x".repeat(5000)}`
      const self = { url: "" }
      const origin = yield* serve((request, body, response) => {
        if (request.method === "GET") return json(response, cardOf(`${self.url}/rpc`))
        const rpc = JSON.parse(body)
        response.writeHead(200, { "content-type": "text/event-stream" })
        event(response, rpc.id, working)
        event(response, rpc.id, {
          statusUpdate: { taskId: "t1", contextId: "c1", status: { state: "TASK_STATE_FAILED", message: { messageId: "m", role: "ROLE_AGENT", parts: [{ text: said }] } } }
        })
        response.end()
      })
      self.url = origin.url
      const events: Array<{ readonly _tag: string; readonly data?: { readonly text?: unknown } }> = []
      const error = yield* Effect.flip(Stream.runForEach(Agent.stream(A2A.agent(`${origin.url}/agent-card.json`, { name: "r" }), "hi"), (event) =>
        Effect.sync(() => events.push(event as never))))
      expect(error).toMatchObject({ _tag: "RemoteAgentFailed", reason: "task_failed" })
      expect(error.message).toContain("first line FAKE: second line")
      expect(error.message).not.toContain("\n")
      expect(error.message.length).toBeLessThan(500)
      const progress = events.filter((event) => event._tag === "Progress").map((event) => String(event.data?.text))
      expect(progress).toHaveLength(1)
      expect(progress[0]).not.toContain("\n")
      expect(progress[0]!.length).toBeLessThanOrEqual(2000)
    }).pipe(Effect.scoped), 20_000)

  it.live("D7: the root card stands for a base URL only if its endpoint is under that path: /a2a/xyz is not under /a2a/x", () =>
    Effect.gen(function*() {
      const self = { url: "" }
      const origin = yield* serve((request, _body, response) => {
        if (request.url === "/.well-known/agent-card.json") return json(response, cardOf(`${self.url}/a2a/xyz`))
        response.writeHead(404).end()
      })
      self.url = origin.url
      const wrong = yield* Effect.flip(A2A.card(`${origin.url}/a2a/x`))
      expect(wrong).toMatchObject({ reason: "http", code: 404 })
      expect(wrong.message).toContain("give the agent's card URL")
      const right = yield* A2A.card(`${origin.url}/a2a/xyz`)
      expect(right.name).toBe("probe")
    }).pipe(Effect.scoped), 20_000)

  it.live("D8: an SSE event answering another request id is refused: RemoteAgentFailed malformed", () =>
    Effect.gen(function*() {
      const self = { url: "" }
      const origin = yield* serve((request, body, response) => {
        if (request.method === "GET") return json(response, cardOf(`${self.url}/rpc`))
        const rpc = JSON.parse(body)
        response.writeHead(200, { "content-type": "text/event-stream" })
        event(response, rpc.method === "CancelTask" ? rpc.id : `${rpc.id}-other`, {
          task: { id: "t1", contextId: "c1", status: { state: "TASK_STATE_COMPLETED" }, artifacts: [{ artifactId: "a", parts: [{ text: "not yours" }] }] }
        })
        response.end()
      })
      self.url = origin.url
      const error = yield* Effect.flip(Agent.run(A2A.agent(`${origin.url}/agent-card.json`, { name: "r" }), "hi"))
      expect(error).toMatchObject({ _tag: "RemoteAgentFailed", reason: "malformed" })
      expect(error.message).toContain("an event answers request")
    }).pipe(Effect.scoped), 20_000)

  it.live("D8: the task's output, all events together, is capped: past maxOutputChars RemoteAgentFailed malformed", () =>
    Effect.gen(function*() {
      const { origin } = yield* remote((rpc, response) => {
        response.writeHead(200, { "content-type": "text/event-stream" })
        event(response, rpc.id, working)
        for (let i = 0; i < 5; i++) {
          event(response, rpc.id, { artifactUpdate: { taskId: "t1", contextId: "c1", artifact: { artifactId: "a", parts: [{ text: "0123456789" }] }, append: true } })
        }
        event(response, rpc.id, { statusUpdate: { taskId: "t1", contextId: "c1", status: { state: "TASK_STATE_COMPLETED" } } })
        response.end()
      })
      const agent = Agent.make({ name: "r", instructions: "", architecture: A2AArchitecture.makeFetch({ url: `${origin.url}/agent-card.json`, maxOutputChars: 25 }) })
      const error = yield* Effect.flip(Agent.run(agent, "hi"))
      expect(error).toMatchObject({ _tag: "RemoteAgentFailed", reason: "malformed" })
      expect(error.message).toContain("is over 25 characters")
    }).pipe(Effect.scoped), 20_000)
})

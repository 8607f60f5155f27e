/**
 * valet's HTTP routes on a real server over loopback, read with plain `fetch` and an SSE parser no one here wrote:
 * runs in the background, SSE replay from Last-Event-ID, several readers, cancel, a streamed run cancelled by its
 * client's disconnect (the model server sees the request aborted), and every refusal with its status and message.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Effect, Layer } from "effect"
import { HttpApi } from "effect/http-api"
import * as OpenAiApi from "../../src/serve/OpenAiApi.js"
import * as RunsApi from "../../src/serve/RunsApi.js"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.js"
import * as LoopbackServer from "../support/openAiServer.js"
import { json, post, scriptedAgent, serveAgents, sseEvents } from "../support/serve.js"

const scripted = scriptedAgent

/** A server on a free port with these agents; answers its base URL. */
const serve = serveAgents


const agents = [
  scripted("quick", ["Paris."]),
  scripted("slow", [{ text: "Paris, eventually.", delay: "300 millis" }]),
  scripted("writer", ["draft", "Add a full stop.", "draft.", "No issues."], SelfRefine.architecture),
  scripted("broken", [{ error: new ModelError.RateLimited({ message: "slow down" }) }])
]

describe("Server (valet's routes over HTTP)", () => {
  it.live("health, agents, a run started with 201 and read back; its events as SSE, replayed from Last-Event-ID", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      expect(yield* json(yield* Effect.promise(() => fetch(`${url}/health`)))).toEqual({ status: "ok" })
      const listed = yield* json(yield* Effect.promise(() => fetch(`${url}/agents`)))
      expect(listed.agents.map((agent: { name: string }) => agent.name)).toEqual(["quick", "slow", "writer", "broken"])

      const created = yield* post(`${url}/runs`, { agent: "writer", input: "Capital of France?", sessionId: "my-session" })
      expect(created.status).toBe(201)
      const { runId, sessionId } = yield* json(created)
      expect(sessionId).toBe("my-session")

      // Two readers of the same run.
      const [first, second] = yield* Effect.all([
        Effect.flatMap(Effect.promise(() => fetch(`${url}/runs/${runId}/events`)), sseEvents),
        Effect.flatMap(Effect.promise(() => fetch(`${url}/runs/${runId}/events`)), sseEvents)
      ], { concurrency: 2 })
      expect(second).toEqual(first)
      expect(first.map((event) => event.id)).toEqual(first.map((_, i) => String(i)))
      expect(first.at(-1)!.event).toBe("RunCompleted")
      expect(JSON.parse(first.at(-1)!.data).result.output).toBe("draft.")

      // A reader that reconnects with Last-Event-ID gets what came after.
      const resumed = yield* sseEvents(yield* Effect.promise(() => fetch(`${url}/runs/${runId}/events`, { headers: { "last-event-id": "3" } })))
      expect(resumed.map((event) => event.id)).toEqual(first.slice(4).map((event) => event.id))

      const run = yield* json(yield* Effect.promise(() => fetch(`${url}/runs/${runId}`)))
      expect(run).toMatchObject({ runId, sessionId, agent: "writer", status: "completed", result: { output: "draft." } })
      const runs = yield* json(yield* Effect.promise(() => fetch(`${url}/runs`)))
      expect(runs.runs.map((r: { runId: string }) => r.runId)).toEqual([runId])

      const openapi = yield* json(yield* Effect.promise(() => fetch(`${url}/openapi.json`)))
      expect(Object.keys(openapi.paths)).toEqual(expect.arrayContaining(["/runs", "/runs/{runId}", "/runs/{runId}/events", "/runs/stream"]))
    }).pipe(Effect.scoped), 30_000)

  it.live("a run's input parts: GET /runs/:id has them, GET /runs?full=true leaves them out (500 runs a page of images)", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
      const input = [{ type: "text", text: "What is this?" }, { type: "image", data: png, mediaType: "image/png" }]
      const created = yield* post(`${url}/runs`, { agent: "writer", input })
      expect(created.status).toBe(201)
      const { runId } = yield* json(created)
      yield* Effect.flatMap(Effect.promise(() => fetch(`${url}/runs/${runId}/events`)), sseEvents)
      expect((yield* json(yield* Effect.promise(() => fetch(`${url}/runs/${runId}`)))).inputParts).toEqual(input)
      const page = yield* Effect.promise(() => fetch(`${url}/runs?full=true`).then((response) => response.text()))
      expect(JSON.parse(page).runs).toMatchObject([{ runId, status: "completed" }])
      // Before: every run of the page carried its images' bytes.
      expect(page).not.toContain(png)
    }).pipe(Effect.scoped))

  it.live("a failed run's stream ends with event: error carrying the typed error; the compact form", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const response = yield* post(`${url}/runs/stream`, { agent: "broken", input: "x" })
      expect(response.status).toBe(200)
      expect(response.headers.get("content-type")).toBe("text/event-stream")
      const events = yield* sseEvents(response)
      expect(events.at(-1)!.event).toBe("error")
      expect(JSON.parse(events.at(-1)!.data)).toMatchObject({ _tag: "RateLimited", message: expect.stringContaining("slow down") })

      const compact = yield* sseEvents(yield* post(`${url}/runs/stream?compact=true`, { agent: "quick", input: "x" }))
      const delta = compact.find((event) => event.event === "TextDelta")!
      expect(JSON.parse(delta.data)).toMatchObject({ text: expect.any(String) })
      expect(JSON.parse(delta.data)._tag).toBeUndefined()
    }).pipe(Effect.scoped), 30_000)

  it.live("cancel: 202, and the run ends interrupted with reason cancelled", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents)
      const { runId } = yield* json(yield* post(`${url}/runs`, { agent: "slow", input: "x" }))
      const cancelled = yield* post(`${url}/runs/${runId}/cancel`, {})
      expect(cancelled.status).toBe(202)
      expect(yield* json(cancelled)).toEqual({ runId, cancelled: true })
      const events = yield* sseEvents(yield* Effect.promise(() => fetch(`${url}/runs/${runId}/events`)))
      expect(JSON.parse(events.at(-1)!.data).result).toMatchObject({ interrupted: true, interruptionReason: "cancelled" })
    }).pipe(Effect.scoped), 30_000)

  it.live("a streamed run's client disconnects: the run is cancelled, its model request aborted, nothing more is sent, no socket left", () =>
    Effect.gen(function*() {
      const model = yield* LoopbackServer.make()
      model.enqueue("/v1/chat/completions", LoopbackServer.stall)
      // The client (and its HTTP connection pool) lives as long as the test.
      const context = yield* Layer.build(OpenAiCompatible.layerNode({ baseUrl: `${model.url}/v1`, model: "loopback-model" }))
      const remote = Agent.make({ name: "remote", instructions: "", model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) }) as Agent.Agent<never>
      const url = yield* serve([remote])
      const controller = new AbortController()
      const response = yield* Effect.promise(() =>
        fetch(`${url}/runs/stream`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ agent: "remote", input: "hi" }),
          signal: controller.signal
        })
      )
      expect(response.status).toBe(200)
      const reader = response.body!.getReader()
      yield* Effect.promise(() => reader.read())
      const until = Date.now() + 5_000
      while (!model.requests.some((request) => request.path === "/v1/chat/completions") && Date.now() < until) {
        yield* Effect.sleep("20 millis")
      }
      controller.abort()
      yield* model.closedEarlySignal
      expect(model.closedEarly()).toBe(1)
      const runs = yield* json(yield* Effect.promise(() => fetch(`${url}/runs`)))
      yield* Effect.sleep("50 millis")
      const run = yield* json(yield* Effect.promise(() => fetch(`${url}/runs/${runs.runs[0].runId}`)))
      expect(run).toMatchObject({ status: "completed", result: { interruptionReason: "cancelled" } })
      expect(model.requests.filter((request) => request.path === "/v1/chat/completions")).toHaveLength(1)
      // No socket is left to the model server: the aborted request's connection is closed, not kept for reuse.
      const until2 = Date.now() + 2_000
      while (model.openConnections() > 0 && Date.now() < until2) yield* Effect.sleep("20 millis")
      expect(model.openConnections()).toBe(0)
    }).pipe(Effect.scoped), 30_000)

  it.live("refusals: 400 naming the field, 404 unknown agent / run, 429 with Retry-After, 413, 401", () =>
    Effect.gen(function*() {
      const url = yield* serve(agents, { maxConcurrentRuns: 1, maxBodyBytes: 1000, token: "s3cret" })
      const auth = { authorization: "Bearer s3cret" }
      // Health needs no token; everything else does.
      expect((yield* Effect.promise(() => fetch(`${url}/health`))).status).toBe(200)
      const noToken = yield* Effect.promise(() => fetch(`${url}/agents`))
      expect(noToken.status).toBe(401)
      expect(noToken.headers.get("www-authenticate")).toBe("Bearer")
      expect(yield* json(noToken)).toEqual({ _tag: "Unauthorized", message: "this server needs a bearer token: send Authorization: Bearer <token> (the viewer: open /?token=<token> once)" })
      expect((yield* post(`${url}/runs`, { agent: "quick", input: "x" }, { authorization: "Bearer wrong" })).status).toBe(401)

      const bad = yield* post(`${url}/runs`, { agent: "quick", inpt: "x" }, auth)
      expect(bad.status).toBe(400)
      expect(yield* json(bad)).toMatchObject({ _tag: "BadRequest", message: expect.stringContaining("input") })
      const badSession = yield* post(`${url}/runs`, { agent: "quick", input: "x", sessionId: "a__b" }, auth)
      expect(badSession.status).toBe(400)
      expect((yield* json(badSession)).message).toContain("sessionId")

      const unknown = yield* post(`${url}/runs`, { agent: "nobody", input: "x" }, auth)
      expect(unknown.status).toBe(404)
      expect(yield* json(unknown)).toMatchObject({ _tag: "UnknownAgent", message: expect.stringContaining('"nobody"') })
      const noRun = yield* Effect.promise(() => fetch(`${url}/runs/run_nope`, { headers: auth }))
      expect(noRun.status).toBe(404)
      expect(yield* json(noRun)).toMatchObject({ _tag: "RunNotFound" })

      expect((yield* post(`${url}/runs`, { agent: "slow", input: "x" }, auth)).status).toBe(201)
      const tooMany = yield* post(`${url}/runs`, { agent: "quick", input: "x" }, auth)
      expect(tooMany.status).toBe(429)
      expect(tooMany.headers.get("retry-after")).toBe("1")
      expect(yield* json(tooMany)).toMatchObject({ _tag: "TooManyRuns", limit: 1 })

      const large = yield* post(`${url}/runs`, { agent: "quick", input: "x".repeat(2000) }, auth)
      expect(large.status).toBe(413)
      expect((yield* json(large)).message).toMatch(/more than this server's limit of 1000/)
    }).pipe(Effect.scoped), 30_000)

  it.effect("layerFor over an API without the group: a defect naming what to add, when the layer is built (not a throw when it is made)", () =>
    Effect.gen(function*() {
      const api = HttpApi.make("mine")
      for (const [layer, module] of [[RunsApi.layerFor(api), "RunsApi"], [OpenAiApi.layerFor(api), "OpenAiApi"]] as const) {
        const exit = yield* Effect.exit(Layer.build(layer as Layer.Layer<unknown, never, never>))
        expect(exit._tag).toBe("Failure")
        expect(String(exit._tag === "Failure" ? Cause.squash(exit.cause) : "")).toContain(`${module}.layerFor: the API "mine" has no`)
      }
    }).pipe(Effect.scoped))
})

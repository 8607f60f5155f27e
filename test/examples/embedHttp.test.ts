/**
 * examples/embed-http.ts as its user would test it: the same app and agents, on a `ScriptedModel` instead of a model
 * server (one layer swapped), called over each protocol it mounts with clients no one here wrote — the `openai`
 * package, the AI SDK's chat transport, the MCP SDK — and valet's own typed client, behind its token.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { FetchHttpClient, HttpServer } from "effect/http"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { DefaultChatTransport, readUIMessageStream, type UIMessage } from "ai"
import OpenAI from "openai"
import * as EmbedHttp from "../../examples/embed-http.js"
import type * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as RunsClient from "../../src/serve/RunsClient.js"

const token = "embed-http-test-token-0123456789"
const auth = { authorization: `Bearer ${token}` }

/** Answers by what is asked, so that runs may come in any order: Self-Refine's review and revision, else the draft. */
const answer = (request: Model.Request): string => {
  const last = request.messages?.at(-1)?.content
  const text = typeof last === "string" ? last : ""
  if (text.includes("Review the answer above.")) return "One issue: the sentence has no full stop."
  if (text.includes("Improve the answer so that")) return "Paris is the capital of France."
  return request.messages?.[0]?.content === "You write short, exact prose." ? "Paris is the capital of France" : "Paris is the capital of France."
}

/** The app on a free port, on the scripted model: the one layer a test swaps. */
class AppUrl extends Context.Service<AppUrl, { readonly url: string }>()("test/AppUrl") {}

const App = Layer.effect(
  AppUrl,
  Effect.map(Effect.service(HttpServer.HttpServer), (server) => ({ url: `http://127.0.0.1:${(server.address as { port: number }).port}` }))
).pipe(Layer.provide(EmbedHttp.server({ port: 0, token: Redacted.make(token), model: ScriptedModel.layer(answer) })))

const post = (url: string, body: unknown, headers: Record<string, string> = auth) =>
  Effect.promise(() => fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) }))

describe("examples/embed-http.ts", () => {
  layer(App)((it) => {
    it.effect("the app's own routes and valet's, in one OpenAPI document, on one server", () =>
      Effect.gen(function*() {
        const { url } = yield* AppUrl
        const get = (path: string) => Effect.promise(() => fetch(`${url}${path}`, { headers: auth }).then((r) => r.json() as Promise<Record<string, unknown>>))
        expect(yield* get("/users")).toEqual([{ id: 1, name: "Ada" }, { id: 2, name: "Grace" }])
        const agents = (yield* get("/agents-api/agents")).agents as Array<{ name: string; architecture: string }>
        expect(agents.map((agent) => [agent.name, agent.architecture])).toEqual([["assistant", "react"], ["writer", "self_refine"]])
        const openapi = yield* get("/openapi.json")
        expect(Object.keys(openapi.paths as object)).toEqual(expect.arrayContaining([
          "/users", "/users/{id}", "/agents-api/runs", "/agents-api/runs/{runId}/events", "/agents-api/v1/chat/completions",
          "/agents-api/agents/{name}/chat"
        ]))
        // valet's routes live only under the prefix.
        expect((yield* Effect.promise(() => fetch(`${url}/runs`, { headers: auth }))).status).toBe(404)
      }))

    it.effect("a run streamed over valet's route answers from the swapped model", () =>
      Effect.gen(function*() {
        const { url } = yield* AppUrl
        const response = yield* post(`${url}/agents-api/runs/stream`, { agent: "writer", input: "Capital of France?" })
        const text = yield* Effect.promise(() => response.text())
        const last = text.trim().split("\n\n").at(-1)!
        expect(last).toContain("event: RunCompleted")
        expect(JSON.parse(last.split("data: ")[1]!).result).toMatchObject({ output: "Paris is the capital of France.", modelCalls: 3 })
      }))

    it.effect("another Effect program reads a run with valet's typed client", () =>
      Effect.gen(function*() {
        const { url } = yield* AppUrl
        const asked = yield* EmbedHttp.ask("writer", "Capital of France?").pipe(
          Effect.provide(RunsClient.layer({ baseUrl: url, prefix: "/agents-api", token }).pipe(Layer.provide(FetchHttpClient.layer)))
        )
        expect(asked.modelCalls).toBe(3)
        expect(asked.result).toMatchObject({ output: "Paris is the capital of France.", interrupted: false })
      }))

    it.effect("useChat's own transport talks to an agent through the chat route", () =>
      Effect.gen(function*() {
        const { url } = yield* AppUrl
        const transport = new DefaultChatTransport<UIMessage>({ api: `${url}/agents-api/agents/assistant/chat`, headers: auth })
        const message = yield* Effect.promise(async () => {
          const stream = await transport.sendMessages({
            trigger: "submit-message",
            chatId: "chat-1",
            messageId: undefined,
            messages: [{ id: "m1", role: "user", parts: [{ type: "text", text: "Capital of France?" }] }],
            abortSignal: undefined
          })
          let last: UIMessage | undefined
          for await (const state of readUIMessageStream<UIMessage>({ stream })) last = state
          return last
        })
        expect(message?.role).toBe("assistant")
        const text = message?.parts.flatMap((part) => part.type === "text" ? [part.text] : []).join("")
        expect(text).toBe("Paris is the capital of France.")
      }))

    it.effect("the openai package talks to an agent as to a model", () =>
      Effect.gen(function*() {
        const { url } = yield* AppUrl
        const client = new OpenAI({ baseURL: `${url}/agents-api/v1`, apiKey: token, maxRetries: 0 })
        const completion = yield* Effect.promise(() =>
          client.chat.completions.create({ model: "assistant", messages: [{ role: "user", content: "Capital of France?" }] })
        )
        expect(completion.choices[0]?.message.content).toBe("Paris is the capital of France.")
        const models = yield* Effect.promise(() => client.models.list())
        expect(models.data.map((model) => model.id)).toEqual(["assistant", "writer"])
      }))

    it.effect("the MCP SDK calls an agent as a tool on the same server", () =>
      Effect.gen(function*() {
        const { url } = yield* AppUrl
        const client = new Client({ name: "embed-http-test", version: "1.0.0" })
        const transport = new StreamableHTTPClientTransport(new URL(`${url}/agents-api/mcp`), { requestInit: { headers: auth } })
        yield* Effect.acquireRelease(Effect.promise(() => client.connect(transport)), () => Effect.promise(() => client.close()))
        const { tools } = yield* Effect.promise(() => client.listTools())
        expect(tools.map((tool) => tool.name)).toEqual(["assistant", "writer"])
        const result = yield* Effect.promise(() => client.callTool({ name: "writer", arguments: { input: "Capital of France?" } }))
        expect(result.content).toEqual([{ type: "text", text: "Paris is the capital of France." }])
      }).pipe(Effect.scoped))

    it.effect("every protocol it mounts is behind the token; only GET /health is not", () =>
      Effect.gen(function*() {
        const { url } = yield* AppUrl
        const status = (path: string, init?: RequestInit) => Effect.promise(() => fetch(`${url}${path}`, init).then((r) => r.status))
        const json = { "content-type": "application/json" }
        expect(yield* status("/users")).toBe(401)
        expect(yield* status("/openapi.json")).toBe(401)
        expect(yield* status("/agents-api/agents")).toBe(401)
        expect(yield* status("/agents-api/runs/stream", { method: "POST", headers: json, body: JSON.stringify({ agent: "assistant", input: "x" }) })).toBe(401)
        expect(yield* status("/agents-api/v1/models")).toBe(401)
        expect(yield* status("/agents-api/agents/assistant/chat", { method: "POST", headers: json, body: JSON.stringify({ id: "c", messages: [], trigger: "submit-message" }) })).toBe(401)
        expect(yield* status("/agents-api/mcp", { method: "POST", headers: { ...json, accept: "application/json, text/event-stream" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }) })).toBe(401)
        expect(yield* status("/agents-api/agents", { headers: { authorization: `Bearer ${token.slice(0, -1)}x` } })).toBe(401)
        // The guard answers GET /health itself, for load balancers.
        expect(yield* status("/health")).toBe(200)
      }))
  })
})

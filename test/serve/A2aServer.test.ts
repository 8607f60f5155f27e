/**
 * How A2A is served: valet.yaml's `server.a2a` (decoded, defaults, refusals), and `Server`'s `a2a` options (off,
 * the root card's agent, the public URL of the cards), and the router's own errors on an A2A path in JSON-RPC shape.
 */
import { describe, expect, it } from "@effect/vitest"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Context, Effect, Layer, Result } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { HttpApi, HttpApiBuilder } from "effect/http-api"
import { createServer } from "node:http"
import * as A2aApi from "../../src/serve/A2aApi.js"
import * as AgentConfig from "../../src/serve/AgentConfig.js"
import * as Agents from "../../src/serve/Agents.js"
import * as Runs from "../../src/serve/Runs.js"
import { json, post, scriptedAgent, serveAgents } from "../support/serve.js"

const parse = (text: string) => AgentConfig.parse(text, "valet.yaml")
const file = (server: string) => `model: { provider: scripted, replies: ["x"] }\nagents:\n  a: { instructions: x }\nserver: ${server}\n`

describe("A2A serving options", () => {
  it("valet.yaml server.a2a: on by default; defaultAgent and publicUrl read; a publicUrl that is not http(s) refused naming it", () => {
    const plain = parse(file("{ port: 1 }"))
    expect(Result.isSuccess(plain) && plain.success.config.server.a2a).toEqual({ enabled: true })
    const set = parse(file("{ a2a: { enabled: false, defaultAgent: a, publicUrl: \"https://agents.example.com/valet\" } }"))
    expect(Result.isSuccess(set) && set.success.config.server.a2a).toEqual({ enabled: false, defaultAgent: "a", publicUrl: "https://agents.example.com/valet" })
    const bad = parse(file("{ a2a: { publicUrl: \"ftp://x\" } }"))
    expect(Result.isFailure(bad) && bad.failure.message).toMatch(/^valet\.yaml:4:\d+: server\.a2a\.publicUrl is not an http\(s\) URL: "ftp:\/\/x"/)
  })

  it.live("Server a2a options: the root card is defaultAgent's, the cards' URLs start with publicUrl; enabled: false serves no A2A route", () =>
    Effect.gen(function*() {
      const agents = [scriptedAgent("first", ["1"]), scriptedAgent("second", ["2"])]
      const url = yield* serveAgents(agents, { a2a: { defaultAgent: "second", publicUrl: "https://agents.example.com/valet/" } })
      const root = yield* json(yield* Effect.promise(() => fetch(`${url}/.well-known/agent-card.json`)))
      expect(root).toMatchObject({ name: "second", supportedInterfaces: [{ url: "https://agents.example.com/valet/a2a/second" }] })
      // No token on this server: no security scheme on the card.
      expect(root.securitySchemes).toBeUndefined()
      const first = yield* json(yield* Effect.promise(() => fetch(`${url}/a2a/first/.well-known/agent-card.json`)))
      expect(first.supportedInterfaces[0].url).toBe("https://agents.example.com/valet/a2a/first")
      const off = yield* serveAgents(agents, { a2a: { enabled: false } })
      expect((yield* Effect.promise(() => fetch(`${off}/.well-known/agent-card.json`))).status).toBe(404)
      const rpc = yield* post(`${off}/a2a/first`, { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }, { "a2a-version": "1.0" })
      expect(rpc.status).toBe(404)
      // The router's 404 on an A2A path still comes as a JSON-RPC error, which the SDK reads.
      expect(yield* json(rpc)).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } })
    }).pipe(Effect.scoped), 30_000)

  it.live("a root card naming an agent the server does not have is a 404 saying so, not another agent's card", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("first", ["1"])], { a2a: { defaultAgent: "gone" } })
      const response = yield* Effect.promise(() => fetch(`${url}/.well-known/agent-card.json`))
      expect(response.status).toBe(404)
      expect((yield* json(response)).message).toContain("\"gone\"")
    }).pipe(Effect.scoped), 30_000)

  it.live("in an app's own API under a prefix: the cards name the prefixed endpoint, the root card is served unprefixed, and that endpoint answers", () =>
    Effect.gen(function*() {
      const MyApi = HttpApi.make("app").add(A2aApi.group.prefix("/agents")).add(A2aApi.discoveryGroup)
      const server = HttpApiBuilder.layer(MyApi).pipe(
        Layer.provide(A2aApi.layerFor(MyApi)),
        Layer.provide(Runs.layer()),
        Layer.provide(Agents.layer([scriptedAgent("first", ["one"])])),
        (routes) => HttpRouter.serve(routes, { disableLogger: true, disableListenLog: true }),
        Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" }))
      )
      const context = yield* Layer.build(server)
      const url = `http://127.0.0.1:${(Context.get(context, HttpServer.HttpServer).address as unknown as { readonly port: number }).port}`
      const root = yield* json(yield* Effect.promise(() => fetch(`${url}/.well-known/agent-card.json`)))
      expect(root.supportedInterfaces[0].url).toBe(`${url}/agents/a2a/first`)
      const answer = yield* json(yield* post(root.supportedInterfaces[0].url, {
        jsonrpc: "2.0",
        id: 1,
        method: "SendMessage",
        params: { message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "Hi." }] } }
      }, { "a2a-version": "1.0" }))
      expect(answer).toMatchObject({ id: 1, result: { task: { status: { state: "TASK_STATE_COMPLETED" }, artifacts: [{ artifactId: "output", parts: [{ text: "one" }] }] } } })
    }).pipe(Effect.scoped), 30_000)
})

/**
 * `Model.fallback` over real HTTP: two loopback OpenAI-compatible servers, the first answering 503 / 429, the second
 * answering; the first's circuit breaker then keeps calls off it.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import { Agent, Model, OpenAiCompatible } from "../../src/index.js"
import * as Server from "../support/openAiServer.js"

const client = (server: Server.LoopbackServer, name: string) =>
  // One attempt: the chain is what is tested here, not the provider's retries.
  OpenAiCompatible.layer({ baseUrl: server.url, model: name, maxAttempts: 1 }).pipe(Layer.provide(NodeHttpClient.layerUndici))

const completions = (server: Server.LoopbackServer) => server.requests.filter((r) => r.path === "/v1/chat/completions").length

describe("Model.fallback over OpenAiCompatible", () => {
  it.effect("the first server answers 503, then 429: the second answers each; after 2 failures the first is not asked", () =>
    Effect.gen(function*() {
      const primary = yield* Server.make({ model: "primary-model" })
      const backup = yield* Server.make({ model: "backup-model" })
      primary.enqueue(
        "/v1/chat/completions",
        Server.json({ error: { message: "upstream down" } }, { status: 503 }),
        Server.json({ error: { message: "slow down" } }, { status: 429, headers: { "retry-after": "1" } })
      )
      const chain = Model.fallback([
        { name: "primary-model", model: client(primary, "primary-model") },
        { name: "backup-model", model: client(backup, "backup-model") }
      ], {
        breaker: { failures: 2, coolDown: "1 minute" }
      })
      const agent = Agent.make({ name: "assistant", instructions: "Be brief.", model: chain })
      // Each run builds the agent's model layer again; the breakers are the chain's, so they outlive a run.
      const reasons: Array<string> = []
      for (let i = 0; i < 3; i++) {
        const events = yield* Stream.runCollect(Agent.stream(agent, "Hi"))
        for (const event of events) if (event._tag === "ModelFellBack") reasons.push(`${event.from} → ${event.to}: ${event.reason}`)
        const done = events.at(-1)
        expect(done?._tag === "RunCompleted" && done.result.output).toMatch(/^Word0/)
      }
      expect(reasons).toEqual([
        "primary-model → backup-model: ServerError: upstream down",
        "primary-model → backup-model: RateLimited: slow down",
        "primary-model → backup-model: circuit open (RateLimited: slow down)"
      ])
      // The third call did not reach the first server: its circuit was open.
      expect(completions(primary)).toBe(2)
      expect(completions(backup)).toBe(3)
    }))
})

/**
 * valet.yaml's remote agents: `agents.<name>: { a2a: { url, tokenEnv?, headers?, allowedOrigins?, timeouts } }`, usable by name as another
 * agent's worker, against valet's own A2A server behind a token; and the refusals, each naming the key.
 */
import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Result } from "effect"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import * as Agent from "../../src/core/Agent.js"
import * as AgentConfig from "../../src/serve/AgentConfig.js"
import { scriptedAgent, serveAgents } from "../support/serve.js"

const parse = (text: string) => AgentConfig.parse(text, "valet.yaml")

const refusal = (text: string): string => {
  const parsed = parse(text)
  if (Result.isSuccess(parsed)) throw new Error("the file was accepted")
  return parsed.failure.message
}

describe("valet.yaml a2a agents", () => {
  it.live("a remote agent by name: a supervisor's worker, its token read from tokenEnv, its card under the URL's path", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("assistant", ["4"])], { token: "secret" })
      process.env.VALET_TEST_A2A_TOKEN = "secret"
      yield* Effect.addFinalizer(() => Effect.sync(() => delete process.env.VALET_TEST_A2A_TOKEN))
      const loaded = yield* Result.match(parse(`
model: { provider: scripted, replies: [x] }
agents:
  math:
    description: Adds numbers.
    a2a: { url: "${url}/a2a/assistant", tokenEnv: VALET_TEST_A2A_TOKEN, headers: { x-team: docs } }
  lead:
    architecture: supervisor
    instructions: Delegate.
    options: { workers: [math] }
    model:
      provider: scripted
      replies:
        - { toolCalls: [{ name: delegate, arguments: { worker: math, instructions: "2 + 2?" } }] }
        - "It is 4."
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      expect(agents.list.map((entry) => [entry.name, entry.architecture, entry.description])).toEqual([
        ["math", "a2a", "Adds numbers."],
        ["lead", "supervisor", "lead (supervisor)"]
      ])
      const math = yield* Agent.run(agents.get("math")!.agent, "2 + 2?")
      expect(math.output).toBe("4")
      const lead = yield* Agent.run(agents.get("lead")!.agent, "Add.")
      expect(lead.output).toBe("It is 4.")
      expect(lead.modelCalls).toBe(3)
      const unsetFile = yield* Result.match(parse(`agents:\n  math:\n    a2a: { url: "${url}/a2a/assistant", tokenEnv: VALET_TEST_A2A_UNSET }\n`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const unset = yield* Effect.flip(AgentConfig.build(unsetFile))
      expect(unset.message).toMatch(/^valet\.yaml:3:\d+: agents\.math\.a2a\.tokenEnv names VALET_TEST_A2A_UNSET, which is not set in the environment$/)
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(NodeServices.layer, NodeHttpClient.layerUndici))), 30_000)

  it.live("allowedOrigins: a card whose endpoint is on another origin gets the token only when the file lists that origin", () =>
    Effect.gen(function*() {
      const url = yield* serveAgents([scriptedAgent("assistant", ["4"])], { token: "secret" })
      // The card is read from another loopback server (another origin): it names valet's endpoint as its own.
      const card = yield* Effect.promise(() => fetch(`${url}/a2a/assistant/.well-known/agent-card.json`, { headers: { authorization: "Bearer secret" } }).then((response) => response.text()))
      const cards = yield* Effect.acquireRelease(
        Effect.promise(() =>
          new Promise<Server>((resolve) => {
            const server = createServer((_request, response) => response.writeHead(200, { "content-type": "application/json" }).end(card))
            server.listen(0, "127.0.0.1", () => resolve(server))
          })
        ),
        (server) => Effect.sync(() => server.close())
      )
      const cardUrl = `http://127.0.0.1:${(cards.address() as AddressInfo).port}/agent-card.json`
      process.env.VALET_TEST_A2A_TOKEN = "secret"
      yield* Effect.addFinalizer(() => Effect.sync(() => delete process.env.VALET_TEST_A2A_TOKEN))
      const agentOf = (extra: string) =>
        Effect.gen(function*() {
          const loaded = yield* Result.match(
            parse(`agents:\n  math:\n    a2a: { url: "${cardUrl}", tokenEnv: VALET_TEST_A2A_TOKEN${extra} }\n`),
            { onFailure: Effect.fail, onSuccess: Effect.succeed }
          )
          return (yield* AgentConfig.build(loaded)).get("math")!.agent
        })
      const withheld = yield* Effect.flip(Agent.run(yield* agentOf(""), "2 + 2?"))
      expect(withheld.message).toMatch(/401/)
      const allowed = yield* Agent.run(yield* agentOf(`, allowedOrigins: ["${url}"], requestTimeout: "10 seconds"`), "2 + 2?")
      expect(allowed.output).toBe("4")
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(NodeServices.layer, NodeHttpClient.layerUndici))), 30_000)

  it("refused: a key of an agent that runs here beside a2a, a URL that is not http(s), an agent with neither instructions nor a2a", () => {
    expect(refusal(`model: { provider: scripted, replies: [x] }\nagents:\n  r:\n    a2a: { url: "http://h/a2a/x" }\n    tools: [fs]\n`)).toMatch(
      /^valet\.yaml:5:\d+: agents\.r\.tools is for an agent that runs here, not for a remote a2a agent/
    )
    expect(refusal(`agents:\n  r:\n    architecture: supervisor\n    a2a: { url: "http://h/a2a/x" }\n`)).toMatch(
      /^valet\.yaml:3:\d+: agents\.r\.architecture is for an agent that runs here, not for a remote a2a agent$/
    )
    expect(refusal(`agents:\n  r:\n    a2a: { url: "ftp://h/x" }\n`)).toMatch(/agents\.r\.a2a\.url is not an http\(s\) URL: "ftp:\/\/h\/x"/)
    expect(refusal(`agents:\n  r:\n    a2a: { url: "http://h/a2a/x", requestTimeout: soon }\n`)).toMatch(/agents\.r\.a2a\.requestTimeout/)
    expect(refusal(`agents:\n  r:\n    a2a: { url: "http://h/a2a/x", allowedOrigins: ["mailto:x"] }\n`)).toMatch(/agents\.r\.a2a\.allowedOrigins\[0\] is not an http\(s\) URL/)
    expect(refusal(`model: { provider: scripted, replies: [x] }\nagents:\n  a: { description: x }\n`)).toMatch(/^valet\.yaml:\d+:\d+: agents\.a\.instructions is required$/)
  })
})

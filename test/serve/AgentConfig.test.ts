/**
 * `valet.yaml`: a good file builds agents that run (scripted models, references between agents, MCP tools from
 * server-everything); each kind of bad file is one error naming the file, the line and the key.
 */
import { NodeHttpClient, NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Result, Stream } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import * as Agent from "../../src/core/Agent.js"
import * as AgentConfig from "../../src/serve/AgentConfig.js"
import * as Agents from "../../src/serve/Agents.js"

const services = Layer.merge(NodeServices.layer, NodeHttpClient.layerUndici)

const everything = join(
  dirname(createRequire(import.meta.url).resolve("@modelcontextprotocol/server-everything/package.json")),
  "dist",
  "index.js"
)

const parse = (text: string) => AgentConfig.parse(text, "valet.yaml")

/** The error message of a file that must be refused. */
const refusal = (text: string): string => {
  const parsed = parse(text)
  if (Result.isSuccess(parsed)) throw new Error("the file was accepted")
  return parsed.failure.message
}

const scripted = (replies: ReadonlyArray<string>) =>
  `{ provider: scripted, replies: [${replies.map((reply) => JSON.stringify(reply)).join(", ")}] }`

describe("AgentConfig", () => {
  it.effect("a file of agents builds a catalog whose agents run on their own models, fresh scripts per run", () =>
    Effect.gen(function*() {
      const loaded = yield* Result.match(parse(`
model: ${scripted(["Paris."])}
agents:
  assistant:
    description: Answers in one sentence.
    instructions: Be brief.
    budget: { maxCalls: 3 }
  writer:
    architecture: self-refine
    instructions: Write well.
    options: { maxRounds: 1, critic: reviewer }
    model: ${scripted(["draft", "better: add a full stop", "draft."])}
  reviewer:
    instructions: Review strictly.
    model: ${scripted(["REVIEWER SAYS: no issues"])}
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      expect(agents.list.map((entry) => [entry.name, entry.architecture, entry.description])).toEqual([
        ["assistant", "react", "Answers in one sentence."],
        ["writer", "self-refine", "writer (self-refine)"],
        ["reviewer", "react", "reviewer (react)"]
      ])
      expect(agents.get("assistant")!.budget).toEqual({ maxCalls: 3 })
      // Two runs: each starts the script from its first reply.
      for (let i = 0; i < 2; i++) {
        const result = yield* Agent.run(agents.get("assistant")!.agent, "Capital of France?")
        expect(result.output).toBe("Paris.")
      }
      // The critic is the reviewer agent, on the reviewer's own model: its "no issues" ends the rounds.
      const written = yield* Agent.run(agents.get("writer")!.agent, "Write it.")
      expect(written.output).toBe("draft")
      expect(written.modelCalls).toBe(2)
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.effect("a supervisor's workers are agents of the file, by name", () =>
    Effect.gen(function*() {
      const loaded = yield* Result.match(parse(`
agents:
  boss:
    architecture: supervisor
    instructions: Delegate.
    options: { workers: [adder] }
    model:
      provider: scripted
      replies:
        - toolCalls: [{ name: delegate, arguments: { worker: adder, instructions: "2+3" } }]
        - "The adder says 5."
  adder:
    description: Adds numbers.
    instructions: Add.
    model: ${scripted(["5"])}
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      const events = yield* Stream.runCollect(Agent.stream(agents.get("boss")!.agent, "What is 2+3?"))
      const delegated = events.find((event) => event._tag === "ToolReturned" && event.name === "delegate")
      // The worker answered from its own script.
      expect(delegated).toMatchObject({ content: expect.stringContaining("5"), isError: false })
      expect(events.filter((event) => event._tag === "RunStarted").map((event) => event.agent)).toEqual(["boss", "adder"])
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "The adder says 5." } })
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.effect("a router's routes name agents of the file", () =>
    Effect.gen(function*() {
      const loaded = yield* Result.match(parse(`
agents:
  desk:
    architecture: router
    instructions: Route requests.
    options: { routes: [{ name: billing, agent: biller, description: invoices }], fallback: billing }
    model: ${scripted(["route: Billing"])}
  biller:
    instructions: Handle invoices.
    model: ${scripted(["Refund issued."])}
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      const result = yield* Agent.run(agents.get("desk")!.agent, "Charged twice.")
      expect(result).toMatchObject({ output: "Refund issued.", metadata: { route: "billing" } })
      expect(refusal(`model: ${scripted(["x"])}\nagents:\n  d:\n    architecture: router\n    instructions: x\n    options: { routes: [{ name: b, agent: nobody }] }\n`)).toBe(
        'valet.yaml:6:43: agents.d.options.routes[0].agent names the agent "nobody", which agents does not define'
      )
    }).pipe(Effect.scoped, Effect.provide(services)))

  it.live("an agent's tools come from the MCP servers it names (server-everything over stdio)", () =>
    Effect.gen(function*() {
      const loaded = yield* Result.match(parse(`
mcpServers:
  everything: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(everything)}, stdio] }
agents:
  tooled:
    instructions: Use tools.
    tools: [everything]
    model:
      provider: scripted
      replies:
        - toolCalls: [{ name: get-sum, arguments: { a: 2, b: 3 } }]
        - "The sum is 5."
  plain:
    instructions: No tools.
    model: ${scripted(["ok"])}
`), { onFailure: Effect.fail, onSuccess: Effect.succeed })
      const agents = yield* AgentConfig.build(loaded)
      expect(agents.get("tooled")!.agent.tools.map((tool) => tool.name)).toContain("get-sum")
      expect(agents.get("plain")!.agent.tools).toEqual([])
      const result = yield* Agent.run(agents.get("tooled")!.agent, "2+3?")
      expect(result.output).toBe("The sum is 5.")
    }).pipe(Effect.scoped, Effect.provide(services)), 30_000)

  it.effect("load reads the file; a missing file is one line", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-config-"))
      try {
        writeFileSync(join(dir, "valet.yaml"), `model: ${scripted(["hi"])}\nagents:\n  a: { instructions: x }\n`)
        const loaded = yield* AgentConfig.load(join(dir, "valet.yaml"))
        expect(Object.keys(loaded.config.agents)).toEqual(["a"])
        expect(loaded.config.server).toMatchObject({ host: "127.0.0.1", port: 8787, maxConcurrentRuns: 16 })
        const missing = yield* Effect.flip(AgentConfig.load(join(dir, "nope.yaml")))
        expect(missing.message).toBe(`${join(dir, "nope.yaml")}: no such file`)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }).pipe(Effect.provide(NodeServices.layer)))

  describe("a bad file is one line naming the file, the line and the key", () => {
    const model = `model: ${scripted(["x"])}\n`
    it("an unknown architecture", () => {
      expect(refusal(`${model}agents:\n  a:\n    instructions: x\n    architecture: reactt\n`)).toBe(
        `valet.yaml:5:19: agents.a.architecture must be "react" or "self-refine" or "plan-and-execute" or "reflexion" or "actor-critic" or "supervisor" or "router" or "debate" or "rewoo" or "swarm" or "blackboard" or "tree-of-thoughts" or "ensemble", got "reactt"`
      )
    })
    it("a misspelt key", () => {
      expect(refusal(`${model}agents:\n  a:\n    instruction: x\n`)).toMatch(/^valet\.yaml:\d+:\d+: agents\.a\.(instructions is required|instruction is not a known key)$/)
    })
    it("a bad agent name", () => {
      expect(refusal(`${model}agents:\n  "two words": { instructions: x }\n`)).toBe("valet.yaml:3:16: agents.two words is not a usable agent name: letters and digits joined by single - or _, at most 48 characters")
    })
    it("no agents, and not YAML", () => {
      expect(refusal(`${model}agents: {}\n`)).toBe("valet.yaml:2:9: agents at least one agent is needed")
      expect(refusal(`agents: [\n`)).toMatch(/^valet\.yaml:\d+:\d+: not valid YAML/)
    })
    it("an agent with no model", () => {
      expect(refusal(`agents:\n  a: { instructions: x }\n`)).toBe(
        "valet.yaml:2:6: agents.a has no model: give it a model, or the file a top-level model"
      )
    })
    it("a reference to an agent or an MCP server that is not defined", () => {
      expect(refusal(`${model}agents:\n  a:\n    instructions: x\n    architecture: self-refine\n    options: { critic: nobody }\n`)).toBe(
        `valet.yaml:6:24: agents.a.options.critic names the agent "nobody", which agents does not define`
      )
      expect(refusal(`${model}mcpServers:\n  fs: { command: x }\nagents:\n  a:\n    instructions: x\n    tools: [fss]\n`)).toBe(
        `valet.yaml:7:13: agents.a.tools[0] names the MCP server "fss", which mcpServers does not define (it defines fs)`
      )
    })
    it("agents that name each other in a circle", () => {
      expect(refusal(`${model}agents:
  a: { instructions: x, architecture: supervisor, options: { workers: [b] } }
  b: { instructions: x, architecture: self-refine, options: { critic: a } }
`)).toBe("valet.yaml:4:61: agents.b.options agents name each other in a circle: a → b → a")
    })
  })

  it.effect("options the architecture refuses, an unset apiKeyEnv: errors of build, on the option's line", () =>
    Effect.gen(function*() {
      const build = (text: string) =>
        Effect.flip(Effect.flatMap(Result.match(parse(text), { onFailure: Effect.fail, onSuccess: Effect.succeed }), AgentConfig.build))
      const options = yield* build(`model: ${scripted(["x"])}\nagents:\n  a:\n    instructions: x\n    architecture: self-refine\n    options: { maxRounds: 0 }\n`)
      expect(options.message).toBe("valet.yaml:6:14: agents.a.options SelfRefine: maxRounds must be an integer >= 1, got 0")
      const key = yield* build(`model: { provider: openai-compatible, baseUrl: "http://127.0.0.1:1/v1", model: m, apiKeyEnv: VALET_TEST_UNSET_KEY }\nagents:\n  a: { instructions: x }\n`)
      expect(key.message).toBe("valet.yaml:1:94: model.apiKeyEnv names VALET_TEST_UNSET_KEY, which is not set in the environment")
    }).pipe(Effect.scoped, Effect.provide(services)))

  it("a run's budget is the lower of the agent's caps and the caller's", () => {
    const entry = { name: "a", description: "", architecture: "react", agent: Agent.make({ name: "a", instructions: "" }) as Agent.Agent<never> }
    expect(Agents.budgetOf(entry, undefined)).toBeUndefined()
    expect(Agents.budgetOf(entry, { maxCalls: 4 })).toEqual({ maxCalls: 4 })
    const capped = { ...entry, budget: { maxCalls: 10, maxTotalTokens: 1000, warnAt: 0.5 } }
    expect(Agents.budgetOf(capped, undefined)).toEqual(capped.budget)
    expect(Agents.budgetOf(capped, { maxCalls: 20, maxTotalTokens: 500, maxDurationMs: 60_000 })).toEqual({
      maxCalls: 10,
      maxTotalTokens: 500,
      maxDurationMs: 60_000,
      warnAt: 0.5
    })
  })

  it("the README's valet.yaml is a valid config", () => {
    const readme = readFileSync(join(import.meta.dirname, "..", "..", "README.md"), "utf8")
    const section = readme.slice(readme.indexOf("### Agents as MCP tools"))
    const yaml = /```yaml\n([\s\S]*?)```/.exec(section)![1]!
    const parsed = parse(yaml)
    expect(Result.isSuccess(parsed) ? Object.keys(parsed.success.config.agents) : parsed.failure.message).toEqual(["assistant", "writer"])
  })

  it.effect("examples/serve/valet.yaml runs as written, with no model server", () =>
    Effect.gen(function*() {
      const loaded = yield* AgentConfig.load(join(import.meta.dirname, "..", "..", "examples", "serve", "valet.yaml"))
      const agents = yield* AgentConfig.build(loaded)
      for (const entry of agents.list) {
        const result = yield* Agent.run(entry.agent, "What is the capital of France?")
        expect(result.output).toBe("Paris is the capital of France.")
      }
    }).pipe(Effect.scoped, Effect.provide(services)))
})


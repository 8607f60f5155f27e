/**
 * Served agents take their services from the layers `Agents.layer` is built with (the first point): one
 * agent value, a scripted model in a test and another model elsewhere, by providing another layer.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, References, Schema, Tracer } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as OpenAiCompatible from "../../src/providers/OpenAiCompatible.js"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as AgentConfig from "../../src/serve/AgentConfig.js"
import * as Agents from "../../src/serve/Agents.js"
import * as OpenAiServer from "../support/openAiServer.js"

/** A service a tool needs: the served agent takes it from the layer too. */
class Greeting extends Context.Service<Greeting, { readonly word: string }>()("test/Greeting") {}

const greet = Tool.make({
  name: "greet",
  description: "Greets someone",
  parameters: Schema.Struct({ who: Schema.String }),
  handler: ({ who }) => Effect.map(Effect.service(Greeting), (greeting) => `${greeting.word}, ${who}`)
})

// Agent<Model | Greeting>: defined once, served in every test below.
const assistant = Agent.make({ name: "assistant", instructions: "Greet people.", tools: [greet] })

/** Runs the named entry with nothing left to provide: its services came with the catalog. */
const runEntry = (name: string, prompt: string) =>
  Effect.gen(function*() {
    const entry = (yield* Agents.Agents).get(name)!
    return yield* Agent.run(entry.agent, prompt)
  })

describe("Agents.layer takes agents that need services", () => {
  it.effect("the same agent value runs on whichever model and services the layer is given", () =>
    Effect.gen(function*() {
      const catalog = Agents.layer([assistant, { name: "brief", description: "brief", architecture: "react", agent: assistant, budget: { maxCalls: 2 } }])
      const scripted = (reply: string) =>
        ScriptedModel.layer([{ toolCalls: [{ name: "greet", arguments: { who: "Ada" } }] }, reply])
      const first = yield* runEntry("assistant", "Greet Ada").pipe(
        Effect.provide(catalog.pipe(Layer.provide([scripted("Done: hello."), Layer.succeed(Greeting, { word: "Hello" })])))
      )
      expect(first.output).toBe("Done: hello.")
      expect(first.modelCalls).toBe(2)
      const second = yield* Effect.gen(function*() {
        const result = yield* runEntry("brief", "Greet Ada")
        // The tool ran with the service given to the layer, and the model saw its result.
        const calls = yield* ScriptedModel.calls
        return { result, toolResult: calls[1]?.messages?.at(-1) }
      }).pipe(
        Effect.provide(
          catalog.pipe(Layer.provideMerge(Layer.mergeAll(scripted("Done: bonjour."), Layer.succeed(Greeting, { word: "Bonjour" }))))
        )
      )
      expect(second.result.output).toBe("Done: bonjour.")
      expect(second.toolResult).toMatchObject({ role: "tool", content: "Bonjour, Ada" })
    }))

  it.effect("an agent's own model wins over a Model given by the layer; sub-agents take the given services", () =>
    Effect.gen(function*() {
      const own = Agent.make({ name: "own", instructions: "x", model: ScriptedModel.layer(["from its own model"]) })
      const critic = Agent.make({ name: "critic", instructions: "Review." })
      const writer = Agent.make({
        name: "writer",
        instructions: "Write.",
        architecture: SelfRefine.makeUnsafe({ critic, maxRounds: 1 })
      })
      const results = yield* Effect.all([runEntry("own", "go"), runEntry("writer", "go")]).pipe(
        Effect.provide(Agents.layer([own, writer]).pipe(Layer.provide(ScriptedModel.layer(["draft", "No issues."]))))
      )
      expect(results[0].output).toBe("from its own model")
      // The writer and its critic (a sub-agent) both ran on the given model: two calls of its script.
      expect(results[1].output).toBe("draft")
      expect(results[1].modelCalls).toBe(2)
    }))

  it.effect("what belongs to the running fiber stays the caller's: the tracing parent span and log annotations", () =>
    Effect.gen(function*() {
      // A tool that reports what its fiber holds: the parent span and the log annotations.
      const seen: Array<{ span: string | undefined; annotations: Record<string, unknown> }> = []
      const probe = Tool.make({
        name: "probe",
        description: "Reports its fiber",
        parameters: Schema.Struct({}),
        handler: () =>
          Effect.gen(function*() {
            const span = yield* Effect.serviceOption(Tracer.ParentSpan)
            const annotations = yield* References.CurrentLogAnnotations
            seen.push({ span: span._tag === "Some" && span.value._tag === "Span" ? span.value.name : undefined, annotations: { ...annotations } })
            return "ok"
          })
      })
      const agent = Agent.make({ name: "prober", instructions: "x", tools: [probe] })
      // The catalog is built at startup, in a span of its own and with startup annotations.
      const agents = yield* Effect.service(Agents.Agents).pipe(
        Effect.withSpan("startup"),
        Effect.annotateLogs({ phase: "startup" }),
        Effect.provide(Agents.layer([agent]).pipe(Layer.provide(ScriptedModel.layer([{ toolCalls: [{ name: "probe" }] }, "done"])))),
        Effect.withSpan("startup"),
        Effect.annotateLogs({ phase: "startup" })
      )
      // A request runs it, in its own span and with its own annotations.
      yield* Agent.run(agents.get("prober")!.agent, "go").pipe(Effect.annotateLogs({ requestId: "r1" }), Effect.withSpan("request"))
      expect(seen).toHaveLength(1)
      expect(seen[0]!.annotations).toEqual({ requestId: "r1" })
      expect(seen[0]!.span).not.toBe("startup")
    }))

  it.effect("Agent.provide: the first services given win, as with nested Effect.provide", () =>
    Effect.gen(function*() {
      // A script that always answers the same: one context serves every run below.
      const inner = Agent.provide(Agent.make({ name: "a", instructions: "x" }), ScriptedModel.context(() => "inner"))
      const both = Agent.provide(inner, ScriptedModel.context(["outer"]))
      expect((yield* Agent.run(both, "go")).output).toBe("inner")
      // And a Model in the caller's context loses to the one given.
      const result = yield* Agent.run(inner, "go").pipe(Effect.provide(ScriptedModel.layer(["caller"])))
      expect(result.output).toBe("inner")
    }))

  it.effect("an own model layer that fails with a typed error fails the run with it (OpenAiCompatible.layerNode)", () =>
    Effect.gen(function*() {
      // Type-checks as written: the layer's InvalidOptions is an AgentError, the run's error channel.
      const agent = Agent.make({
        name: "remote",
        instructions: "x",
        model: OpenAiCompatible.layerNode({ baseUrl: "not a url", model: "m" })
      })
      const error = yield* Effect.flip(Agent.run(agent, "go"))
      expect(error._tag).toBe("InvalidOptions")
      expect(error.message).toContain("baseUrl")
    }))
})

describe("AgentConfig.layer(path, { model: \"context\" })", () => {
  it.effect("the production file's agents run on the Model the layer is given; its model server is never started", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-agents-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const file = join(dir, "valet.yaml")
      // Port 1 on loopback: nothing listens, and the key's variable is unset; neither is touched.
      writeFileSync(file, `model: { provider: openai-compatible, baseUrl: "http://127.0.0.1:1/v1", apiKeyEnv: VALET_TEST_UNSET_KEY }
agents:
  assistant: { instructions: Be brief. }
  writer:
    architecture: self_refine
    instructions: Write.
    options: { maxRounds: 1, critic: assistant }
`)
      const layer = AgentConfig.layer(file, { model: "context" }).pipe(
        Layer.provide([ScriptedModel.layer(["Hi!", "draft", "No issues."]), NodeHttpClient.layerUndici, NodeServices.layer])
      )
      const results = yield* Effect.all([runEntry("assistant", "Hello"), runEntry("writer", "Write")]).pipe(Effect.provide(layer))
      expect(results.map((result) => result.output)).toEqual(["Hi!", "draft"])
      // Without the option, the same file needs its key.
      const error = yield* Effect.flip(
        Effect.provide(Effect.service(Agents.Agents), AgentConfig.layer(file).pipe(Layer.provide([NodeHttpClient.layerUndici, NodeServices.layer])))
      )
      expect(error.message).toContain("VALET_TEST_UNSET_KEY")
    }).pipe(Effect.scoped))
})

describe("valet.yaml: a model's context window", () => {
  it.effect("from the file's contextWindow, else the server's max_model_len when the file names no model", () =>
    Effect.gen(function*() {
      const server = yield* OpenAiServer.make()
      const dir = mkdtempSync(join(tmpdir(), "valet-window-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const windowOf = (model: string) =>
        Effect.gen(function*() {
          const file = join(dir, `${Math.random().toString(36).slice(2)}.yaml`)
          writeFileSync(file, `model: { provider: openai-compatible, baseUrl: "${server.url}/v1"${model} }\nagents:\n  a: { instructions: x }\n`)
          const agents = yield* Effect.service(Agents.Agents).pipe(
            Effect.provide(AgentConfig.layer(file).pipe(Layer.provide([NodeHttpClient.layerUndici, NodeServices.layer])))
          )
          // The agent's own model layer (the file's): built here to read what it says of its window.
          const own = agents.get("a")!.agent.model! as Layer.Layer<Model.Model, unknown>
          return yield* Effect.map(Effect.service(Model.Model), (m) => m.contextWindow).pipe(Effect.provide(own))
        })
      expect(yield* windowOf("")).toBe(4096)
      expect(yield* windowOf(", contextWindow: 1000")).toBe(1000)
      expect(yield* windowOf(", model: loopback-model")).toBeUndefined()
    }).pipe(Effect.scoped))
})

// The types a user relies on: what the layers need, written out.
const _typed: Layer.Layer<Agents.Agents, never, Model.Model | Greeting> = Agents.layer([assistant])
void _typed

/**
 * Spans with the OpenTelemetry GenAI attributes: recorded in memory by a tracer the test installs (a span per run,
 * sub-agent run, model call and tool call, nested as the run nests them), and exported over OTLP/HTTP to a
 * loopback collector the test starts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, Stream } from "effect"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Agent from "../../src/core/Agent.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as Telemetry from "../../src/serve/Telemetry.js"
import { collector } from "../support/serve.js"
import { recordingTracer } from "../support/spans.js"

const add = Tool.make({
  name: "add",
  description: "Adds two numbers.",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(String(a + b))
})
const calculator = Agent.make({ name: "calculator", instructions: "Use the tool.", tools: [add] })
const script: ScriptedModel.Script = [
  { toolCalls: [{ id: "call_1", name: "add", arguments: { a: 2, b: 3 } }], usage: { inputTokens: 30, outputTokens: 8 } },
  { text: "5", usage: { inputTokens: 45, outputTokens: 1 } }
]

describe("Telemetry", () => {
  for (const mode of ["run", "stream"] as const) {
    it.effect(`Agent.${mode}: invoke_agent around chat and execute_tool spans, with the GenAI attributes`, () =>
      Effect.gen(function*() {
        const { ended, layer } = recordingTracer()
        const sessionId = `telemetry-${mode}`
        yield* (mode === "run"
          ? Effect.asVoid(Agent.run(calculator, "2 + 3?", { sessionId }))
          : Stream.runDrain(Agent.stream(calculator, "2 + 3?", { sessionId }))).pipe(Effect.provide(layer))
        const run = ended.find((span) => span.name === "invoke_agent calculator")!
        expect(Object.fromEntries(run.attributes)).toMatchObject({
          "gen_ai.operation.name": "invoke_agent",
          "gen_ai.agent.name": "calculator",
          "valet.session_id": sessionId,
          "valet.architecture": "react"
        })
        const chats = ended.filter((span) => span.name === "chat")
        expect(chats.map((span) => span.parent)).toEqual([run.spanId, run.spanId])
        expect(chats.map((span) => Object.fromEntries(span.attributes))).toEqual([
          expect.objectContaining({
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": 30,
            "gen_ai.usage.output_tokens": 8,
            "gen_ai.response.finish_reasons": ["tool_calls"],
            "valet.step": "react.turn_1"
          }),
          expect.objectContaining({ "gen_ai.usage.input_tokens": 45, "gen_ai.usage.output_tokens": 1, "gen_ai.response.finish_reasons": ["stop"] })
        ])
        const tool = ended.find((span) => span.name === "execute_tool add")!
        expect(tool.parent).toBe(run.spanId)
        expect(Object.fromEntries(tool.attributes)).toMatchObject({
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": "add",
          "gen_ai.tool.call.id": "call_1"
        })
        // No prompt or answer text in any attribute.
        expect(JSON.stringify(ended.map((span) => Object.fromEntries(span.attributes)))).not.toContain("2 + 3?")
      }).pipe(Effect.provide(ScriptedModel.layer(script))))
  }

  it.effect("chat spans carry the cached and cache-written input tokens the model reported (GenAI semconv), and no such key otherwise", () =>
    Effect.gen(function*() {
      const { ended, layer } = recordingTracer()
      yield* Agent.run(calculator, "2 + 3?").pipe(Effect.provide(layer))
      const chats = ended.filter((span) => span.name === "chat").map((span) => Object.fromEntries(span.attributes))
      expect(chats[0]).toMatchObject({
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.cache_read.input_tokens": 24,
        "gen_ai.usage.cache_creation.input_tokens": 6
      })
      expect(Object.keys(chats[1]!).filter((key) => key.includes("cache"))).toEqual([])
    }).pipe(Effect.provide(ScriptedModel.layer([
      {
        toolCalls: [{ id: "call_1", name: "add", arguments: { a: 2, b: 3 } }],
        usage: { inputTokens: 30, outputTokens: 8, cachedInputTokens: 24, cacheWriteTokens: 6 }
      },
      { text: "5", usage: { inputTokens: 45, outputTokens: 1 } }
    ]))))

  it.effect("sub-agents' invoke_agent spans nest under their parent's", () =>
    Effect.gen(function*() {
      const { ended, layer } = recordingTracer()
      const writer = Agent.make({ name: "writer", instructions: "", architecture: SelfRefine.architecture })
      yield* Agent.run(writer, "x").pipe(Effect.provide(layer))
      const root = ended.find((span) => span.name === "invoke_agent writer" && span.attributes.get("valet.session_id") !== undefined && !String(span.attributes.get("valet.session_id")).includes("__"))!
      const children = ended.filter((span) => span.parent === root.spanId && span.name.startsWith("invoke_agent"))
      expect(children.map((span) => String(span.attributes.get("valet.session_id")).split("__")[1])).toEqual(["base", "critic_1"])
      expect(ended.filter((span) => span.name === "chat").every((span) => children.some((child) => child.spanId === span.parent))).toBe(true)
    }).pipe(Effect.provide(ScriptedModel.layer(["draft", "No issues."]))))

  it.live("layerOtlp exports the spans over OTLP/HTTP to a collector", () =>
    Effect.gen(function*() {
      const { bodies, url } = yield* collector
      // The layer flushes what is left when it closes.
      yield* Agent.run(calculator, "2 + 3?").pipe(
        Effect.provide(ScriptedModel.layer(script)),
        Effect.provide(Telemetry.layerOtlp({ url, serviceName: "valet-test" }))
      )
      const exported = bodies.join("\n")
      expect(exported).toContain("invoke_agent calculator")
      expect(exported).toContain("execute_tool add")
      expect(exported).toContain("gen_ai.usage.input_tokens")
      expect(exported).toContain("valet-test")
      expect(Telemetry.tracesUrl("http://h:4318/")).toBe("http://h:4318/v1/traces")
    }).pipe(Effect.scoped), 30_000)
})

/**
 * Structured output (issue 13, item 4): `Agent.run(agent, prompt, { output: schema })` decodes the final answer
 * into `RunResult.value`, asking natively where it can, repairing with the decode error otherwise, and failing
 * with `OutputInvalid` when the repairs run out.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, Stream } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as AgentEvent from "../../src/core/AgentEvent.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as PlanAndExecute from "../../src/architectures/PlanAndExecute.js"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"

const City = Schema.Struct({ city: Schema.String, population: Schema.Number })
const paris = `{"city": "Paris", "population": 2100000}`

const assistant = Agent.make({ name: "geo", instructions: "Answer about cities." })

describe("structured output", () => {
  it.effect("native: a tool-less ReAct call asks with response_format json_schema; the value is decoded", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(assistant, "Largest city of France?", { output: City })
      const value: { readonly city: string; readonly population: number } = result.value
      expect(value).toEqual({ city: "Paris", population: 2100000 })
      expect(result.output).toBe(paris)
      const [request] = yield* ScriptedModel.calls
      expect(request!.responseFormat).toMatchObject({ type: "json_schema", name: "output" })
      expect((request!.responseFormat as { schema: Record<string, unknown> }).schema).toMatchObject({
        type: "object",
        required: ["city", "population"]
      })
    }).pipe(Effect.provide(ScriptedModel.layer([paris]))))

  it.effect("repair: an answer that does not decode is shown back with the error; the second one decodes", () =>
    Effect.gen(function*() {
      const events = yield* Agent.stream(assistant, "Largest city of France?", { output: City, textDeltas: false }).pipe(
        Stream.runCollect
      )
      const attempts = events.filter((e): e is AgentEvent.Of<"Progress"> => e._tag === "Progress" && e.name === "output.attempt")
      expect(attempts.map((e) => e.data)).toEqual([
        { attempt: 1, ok: false, error: expect.stringContaining("population") },
        { attempt: 2, ok: true }
      ])
      const completed = events.at(-1) as AgentEvent.Of<"RunCompleted">
      expect(completed.result.value).toEqual({ city: "Paris", population: 2100000 })
      expect(completed.result.modelCalls).toBe(2)
      const [, repair] = yield* ScriptedModel.calls
      const last = repair!.messages!.at(-1)!
      expect(last.content).toContain("does not match the required output")
      expect(last.content).toContain("population")
      expect(repair!.messages!.at(-2)).toEqual({ role: "assistant", content: `{"city": "Paris"}` })
      expect(repair!.responseFormat).toMatchObject({ type: "json_schema" })
    }).pipe(Effect.provide(ScriptedModel.layer([`{"city": "Paris"}`, paris]))))

  it.effect("exhaustion: after outputRetries repairs the run fails with OutputInvalid carrying the last text and error", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Agent.run(assistant, "Largest city of France?", { output: City, outputRetries: 1 })
      )
      expect(error._tag).toBe("OutputInvalid")
      if (error._tag !== "OutputInvalid") return
      expect(error.attempts).toBe(2)
      expect(error.text).toBe("still Paris")
      expect(error.error).toMatch(/JSON/)
      expect(yield* ScriptedModel.remaining).toBe(0)
    }).pipe(Effect.provide(ScriptedModel.layer(["Paris, about 2.1 million", "still Paris"]))))

  it.effect("with tools, the loop is not constrained (tools stay callable); the answer is repaired afterwards", () =>
    Effect.gen(function*() {
      const lookup = Tool.make({
        name: "lookup",
        description: "Population of a city",
        parameters: Schema.Struct({ city: Schema.String }),
        handler: () => Effect.succeed(2100000)
      })
      const agent = Agent.make({ name: "geo", instructions: "", tools: [lookup] })
      const result = yield* Agent.run(agent, "Largest city of France, and its population?", { output: City })
      expect(result.value).toEqual({ city: "Paris", population: 2100000 })
      const requests = yield* ScriptedModel.calls
      expect(requests.map((r) => r.responseFormat?.type)).toEqual([undefined, undefined, "json_schema"])
    }).pipe(Effect.provide(ScriptedModel.layer([
      { toolCalls: [{ name: "lookup", arguments: { city: "Paris" } }] },
      "Paris, 2.1 million people.",
      paris
    ]))))

  it.effect("other architectures: the final answer is what is decoded (Self-Refine, Plan-and-Execute)", () =>
    Effect.gen(function*() {
      const selfRefine = Agent.make({
        name: "refiner",
        instructions: "",
        architecture: SelfRefine.makeUnsafe({ maxRounds: 1 })
      })
      const refined = yield* Agent.run(selfRefine, "Largest city of France?", { output: City }).pipe(
        Effect.provide(ScriptedModel.layer(["Paris", "score: 0.5\nGive the population.", paris]))
      )
      expect(refined.value).toEqual({ city: "Paris", population: 2100000 })

      const planner = Agent.make({ name: "planner", instructions: "", architecture: PlanAndExecute.makeUnsafe({}) })
      const planned = yield* Agent.run(planner, "Largest city of France?", { output: City }).pipe(
        Effect.provide(ScriptedModel.layer(['["Find the largest city"]', "Paris", paris]))
      )
      expect(planned.value).toEqual({ city: "Paris", population: 2100000 })
    }))

  it.effect("a bad outputRetries is InvalidOptions", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.run(assistant, "x", { output: City, outputRetries: -1 }))
      expect(error.message).toBe("Agent: outputRetries must be an integer >= 0, got -1")
    }).pipe(Effect.provide(ScriptedModel.layer([]))))
})

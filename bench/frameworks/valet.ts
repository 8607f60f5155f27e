/** valet: `Agent.run` / `Agent.stream` (read to the end) with a `ScriptedModel` and one tool. */
import { Context, Effect, Schema, Stream } from "effect"
import * as Valet from "valet"
import { Agent, Model, ScriptedModel, Tool } from "valet"
import { argsAt, finalText, type Framework, instructions, prompt, yieldToEventLoop } from "./work.js"

const add = Tool.make({
  name: "add",
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a + b)
})

/**
 * `VALET_BENCH_GUARDRAILS=pass`: the agent has a pass-through guardrail of each kind (input, output, tool), to
 * measure what guardrails cost a step (the tool one checks each call's arguments and result).
 */
// Read through the namespace only when asked: the bench also runs against builds that have no `Guardrail`.
const guardrails = process.env.VALET_BENCH_GUARDRAILS === "pass"
  ? (() => {
    const passThrough = Valet.Guardrail.make("pass", () => Effect.succeed(Valet.Guardrail.pass))
    return { input: [passThrough], output: [passThrough], tool: [passThrough] }
  })()
  : undefined

/** `valet`, or (`fallback`) the same model behind a one-model `Model.fallback` chain with its circuit breaker. */
const make = (name: string, fallback: boolean): Framework => ({
  name,
  run: (steps, options) => {
    const agent = Agent.make({ name: "calculator", instructions, tools: [add], maxTurns: steps + 1, ...(guardrails !== undefined ? { guardrails } : {}) })
    const turn = (index: number): ScriptedModel.Turn =>
      index < steps - 1 ? { toolCalls: [{ name: "add", arguments: argsAt(index + 1) }] } : finalText
    // A model of its own per session, as the other frameworks have their mock per session (a context: no layer to build).
    const model = ScriptedModel.context(
      options.yieldPerCall
        ? (_request, index) => Effect.as(Effect.promise(yieldToEventLoop), turn(index))
        : (_request, index) => turn(index)
    )
    const program = options.stream
      ? Agent.stream(agent, prompt).pipe(
        Stream.runFold(() => "", (output, event) => (event._tag === "RunCompleted" ? event.result.output : output))
      )
      : Effect.map(Agent.run(agent, prompt), (result) => result.output)
    if (!fallback) return Effect.runPromise(Effect.provide(program, model))
    // The chain's layer is built once per run (as an agent's model layer is): its cost is per run, not per step.
    return Effect.runPromise(Effect.provide(program, Model.fallback([Context.get(model, Model.Model)])))
  }
})

export const valet: Framework = make("valet", false)

/** valet with its model behind `Model.fallback` (one model that always answers): the wrapper's cost per step. */
export const valetFallback: Framework = make("valet-fallback", true)

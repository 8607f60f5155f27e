/**
 * A process that runs one durable agent run on a SQLite file, for the kill tests: `durableChild.ts <db> <phase>`.
 * Its model answers by the call's step and prints `call <step>` for each call it receives; in phase 1 the third
 * call never answers (the test kills the process there), in phase 2 every call answers. Its tool prints `tool <q>`
 * when it runs. Prints `result <output>`.
 */
import { Effect, Layer, Schema } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as Durable from "../../src/rollouts/Durable.js"

const [file, phase] = process.argv.slice(2)
const lookup = Tool.make({
  name: "lookup",
  description: "",
  parameters: Schema.Struct({ q: Schema.String }),
  handler: ({ q }) => Effect.sync(() => (console.log(`tool ${q}`), `found ${q}`))
})
const agent = Agent.make({ name: "researcher", instructions: "", tools: [lookup] })
const model = ScriptedModel.layer(() =>
  Effect.flatMap(Effect.service(Model.currentCallContext), (call): Effect.Effect<ScriptedModel.Turn> => {
    const step = call?.step ?? "?"
    console.log(`call ${step}`)
    if (step === "react.turn_1") return Effect.succeed({ toolCalls: [{ name: "lookup", arguments: { q: "a" } }] })
    if (step === "react.turn_2") return Effect.succeed({ toolCalls: [{ name: "lookup", arguments: { q: "b" } }] })
    return phase === "1" ? Effect.never : Effect.succeed("a and b")
  })
)

Durable.AgentRun.execute({ agent: "researcher", prompt: "Find a and b.", runId: "run-1" }).pipe(
  Effect.provide(Durable.layer([agent]).pipe(Layer.provideMerge(Durable.layerSqlite(file!)), Layer.provide(model))),
  Effect.runPromise
).then(
  (result) => {
    console.log(`result ${result.output}`)
    process.exit(0)
  },
  (error) => {
    console.log(`failed ${String(error)}`)
    process.exit(1)
  }
)

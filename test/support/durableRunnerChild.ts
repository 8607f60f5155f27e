/**
 * A runner of a durable cluster over PostgreSQL (valet's runner layer, its defaults), for the takeover test:
 * `durableRunnerChild.ts <url>`. It serves `AgentRun` workflows of one agent, "worker", whose model answers each run
 * in three calls (two tool calls, then the answer), each after 200 ms, and prints `call <runId> <step>` as a call
 * starts. It prints `listening` once it serves.
 */
import { Effect, Layer, Schema } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as Durable from "../../src/rollouts/Durable.js"

const [url] = process.argv.slice(2)

const note = Tool.make({
  name: "note",
  description: "",
  parameters: Schema.Struct({ n: Schema.Number }),
  handler: ({ n }) => Effect.succeed(`noted ${n}`)
})
const worker = Agent.make({ name: "worker", instructions: "", tools: [note] })

const model = ScriptedModel.layer(() =>
  Effect.gen(function*() {
    const call = yield* Model.currentCallContext
    console.log(`call ${call?.rootSessionId} ${call?.step}`)
    yield* Effect.sleep("200 millis")
    if (call?.step === "react.turn_1") return { toolCalls: [{ name: "note", arguments: { n: 1 } }] }
    if (call?.step === "react.turn_2") return { toolCalls: [{ name: "note", arguments: { n: 2 } }] }
    return "done"
  })
)

const runner = Durable.layerPostgresRunner({ url: url! })

Layer.launch(
  Layer.mergeAll(
    Durable.layer([worker]).pipe(Layer.provide(model)),
    Layer.effectDiscard(Effect.sync(() => console.log("listening")))
  ).pipe(Layer.provideMerge(runner))
).pipe(Effect.runPromise).then(
  () => process.exit(0),
  (error) => {
    console.log(`failed ${String(error)}`)
    process.exit(1)
  }
)

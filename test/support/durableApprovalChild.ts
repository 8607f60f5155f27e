/**
 * A process with a durable agent run whose call waits for a person, for the kill test of durable approvals:
 * `durableApprovalChild.ts <db> start` starts run "run-k" (its first model call asks for tool `act`, which needs
 * approval), prints `waiting <callId>` once the call waits, and stays up until killed;
 * `durableApprovalChild.ts <db> decide` decides that call (approved) from a new process on the same file and prints
 * `result <output>` when the run ends. The model prints `call <step>` for each call it receives, the tool `tool <n>`.
 */
import { Effect, Layer, Schema } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as Durable from "../../src/rollouts/Durable.js"

const [file, mode] = process.argv.slice(2)
const act = Tool.make({
  name: "act",
  description: "",
  parameters: Schema.Struct({ n: Schema.Number }),
  handler: ({ n }) => Effect.sync(() => (console.log(`tool ${n}`), `did ${n}`)),
  needsApproval: true
})
const agent = Agent.make({ name: "worker", instructions: "", tools: [act] })
const model = ScriptedModel.layer(() =>
  Effect.flatMap(Effect.service(Model.currentCallContext), (call): Effect.Effect<ScriptedModel.Turn> => {
    const step = call?.step ?? "?"
    console.log(`call ${step}`)
    return Effect.succeed(step === "react.turn_1" ? { toolCalls: [{ id: "k1", name: "act", arguments: { n: 1 } }] } : "finished")
  })
)
const payload = { agent: "worker", prompt: "go", runId: "run-k" }

const program = Effect.gen(function*() {
  if (mode === "start") {
    yield* Durable.AgentRun.execute(payload, { discard: true })
    while ((yield* Durable.pending("run-k")).length === 0) yield* Effect.sleep("20 millis")
    console.log(`waiting ${(yield* Durable.pending("run-k"))[0]!.toolCallId}`)
    return yield* Effect.never
  }
  yield* Durable.decide("run-k", "k1", { approved: true })
  const result = yield* Durable.AgentRun.execute(payload)
  console.log(`result ${result.output}`)
})

program.pipe(
  Effect.provide(Durable.layer([agent]).pipe(Layer.provideMerge(Durable.layerSqlite(file!)), Layer.provide(model))),
  Effect.runPromise
).then(
  () => process.exit(0),
  (error) => {
    console.log(`failed ${String(error)}`)
    process.exit(1)
  }
)

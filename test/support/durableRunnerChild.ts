/**
 * A runner of a durable cluster over PostgreSQL (valet's runner layer, its defaults), for the takeover test:
 * `durableRunnerChild.ts <url> <port>`. It serves `AgentRun` workflows of one agent, "worker", whose model answers each run
 * in three calls (two tool calls, then the answer), each after 200 ms, and prints `call <runId> <step>` as a call
 * starts. It prints `listening` once it serves, and `health-check here` while the shard of effect/cluster's
 * runner-health singleton is assigned to it (the runner that notices dead runners: killing it is the slow case).
 */
import { Effect, Layer, Schema } from "effect"
import { EntityId, Sharding } from "effect/cluster"
import * as Agent from "../../src/core/Agent.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import * as Durable from "../../src/rollouts/Durable.js"

const [url, port] = process.argv.slice(2)

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

// The singleton effect/cluster registers to check the other runners' health, and the shard it lives on.
const healthCheck = Effect.gen(function*() {
  const sharding = yield* Sharding.Sharding
  const shard = sharding.getShardId(EntityId.make("effect/cluster/Sharding/RunnerHealth"), "default")
  let here = false
  while (true) {
    if (sharding.hasShardId(shard) !== here) {
      here = !here
      console.log(here ? "health-check here" : "health-check elsewhere")
    }
    yield* Effect.sleep("100 millis")
  }
})

const runner = Durable.layerPostgresRunner({ url: url!, port: Number(port) })

Layer.launch(
  Layer.mergeAll(
    Durable.layer([worker]).pipe(Layer.provide(model)),
    Layer.effectDiscard(Effect.forkDetach(healthCheck)),
    Layer.effectDiscard(Effect.sync(() => console.log("listening")))
  ).pipe(Layer.provideMerge(runner))
).pipe(Effect.runPromise).then(
  () => process.exit(0),
  (error) => {
    console.log(`failed ${String(error)}`)
    process.exit(1)
  }
)

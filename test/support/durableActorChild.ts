/**
 * A process that runs one durable actor-loop step on SQLite files, for the kill test:
 * `durableActorChild.ts <dir> <phase>`. Its model prints `call` for each call it receives; its sandbox prints
 * `command` for each command and, in phase 1, never finishes one (the test kills the process there). State and
 * trajectories are files in `<dir>`. Prints `recorded <step>` or `failed <error>`.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect, Layer, Stream } from "effect"
import { join } from "node:path"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as Durable from "../../src/rollouts/Durable.js"

const [dir, phase] = process.argv.slice(2)
const output = "<action>{\"command\": [\"python3\", \"-c\", \"print(1)\"]}</action>\n<state_update>{\"goals\": [\"g\"]}</state_update>"
const services = Layer.mergeAll(
  ScriptedModel.layer(() => Effect.sync(() => (console.log("call"), output))),
  Sandbox.layerTest(() => Effect.flatMap(Effect.sync(() => console.log("command")), () => (phase === "1" ? Effect.never : Effect.succeed({ stdout: "1\n" })))),
  StateStore.layerSqlite({ filename: join(dir!, "state.db") }),
  TrajectoryStore.layerFile({ root: join(dir!, "trajectories") }).pipe(Layer.provide(NodeFileSystem.layer))
)

Durable.actorLoop(Stream.make({ taskId: "t1", prompt: "Fix it." }), { loop: "loop" }).pipe(
  Stream.runForEach((outcome) =>
    Effect.sync(() => console.log(outcome._tag === "Recorded" ? `recorded ${outcome.record.step}` : `failed ${outcome.error.message}`))
  ),
  Effect.provide(Durable.layerActorLoop.pipe(Layer.provideMerge(Durable.layerSqlite(join(dir!, "durable.db"))), Layer.provide(services))),
  Effect.runPromise
).then(() => process.exit(0), (error) => {
  console.log(`error ${String(error)}`)
  process.exit(1)
})

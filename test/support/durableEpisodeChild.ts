/**
 * A process that runs a durable actor-loop group on SQLite files, for the kill test:
 * `durableEpisodeChild.ts <dir> <hangAt> <isolation>`: task `t1` (seed 10), a group of 2 rollouts of up to 3 steps,
 * one at a time, with a real sandbox whose workspaces are made under `<dir>/sandbox`. Its model prints
 * `call <n> <session>` for each call it receives and answers from the prompt alone: a command appending `x` to
 * `f.txt` in the workspace and printing its length, and a state update `did <k>`, `k` the `did` lines the prompt's
 * state shows plus one — so a step that saw a wrong state or a wrong workspace writes another record. Its `hangAt`-th
 * call never answers (0: none; the test kills the process there). Each step's reward (1) prints `score <n>` when it is
 * evaluated. Prints `recorded <episode id> <steps>` per episode, or `failed <error>`.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect, Layer, Stream } from "effect"
import { join } from "node:path"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as Durable from "../../src/rollouts/Durable.js"
import * as Reward from "../../src/rollouts/Reward.js"

const [dir, hangAt, isolation] = process.argv.slice(2)
let calls = 0
const model = ScriptedModel.layer((request) =>
  Effect.flatMap(Effect.service(Model.currentCallContext), (call): Effect.Effect<string> => {
    calls++
    console.log(`call ${calls} ${call?.sessionId ?? "?"}`)
    if (calls === Number(hangAt)) return Effect.never
    const did = ((request.prompt ?? "").match(/did \d+/g) ?? []).length
    const command = ["python3", "-c", "open('f.txt', 'a').write('x'); print(len(open('f.txt').read()))"]
    return Effect.succeed(
      `<action>${JSON.stringify({ command })}</action>\n<state_update>${JSON.stringify({ history: [`did ${did + 1}`] })}</state_update>`
    )
  })
)
let scores = 0
const services = Layer.mergeAll(
  model,
  Reward.layer(Reward.make("one", () => Effect.sync(() => (console.log(`score ${++scores}`), 1)))),
  Sandbox.layerProcess({ isolation: isolation as "bwrap" | "process", workRoot: join(dir!, "sandbox"), allow: ["python3"] }),
  StateStore.layerSqlite({ filename: join(dir!, "state.db") }),
  TrajectoryStore.layerFile({ root: join(dir!, "trajectories") }).pipe(Layer.provide(NodeFileSystem.layer))
)

Durable.actorLoop(Stream.make({ taskId: "t1", prompt: "Grow f.txt.", seed: 10 }), { loop: "loop", group: 2, maxSteps: 3 }).pipe(
  Stream.runForEach((outcome) =>
    Effect.sync(() =>
      console.log(
        outcome._tag === "Recorded"
          ? `recorded ${outcome.episode?.episodeId} ${outcome.episode?.records.length}`
          : `failed ${outcome.error.message}`
      )
    )
  ),
  Effect.provide(Durable.layerActorLoop.pipe(Layer.provideMerge(Durable.layerSqlite(join(dir!, "durable.db"))), Layer.provide(services))),
  Effect.runPromise
).then(() => process.exit(0), (error) => {
  console.log(`error ${String(error)}`)
  process.exit(1)
})

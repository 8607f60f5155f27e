/**
 * `valet runner --store postgres://…`: one runner of a durable cluster. It serves its share of
 * the workflows stored in PostgreSQL — the problems of `valet eval --durable <url>`, the steps of
 * `valet actor-loop --durable <url>` and agent runs — on its own model (the model flags, environment or vLLM pool
 * file, as for `valet eval`) and sandbox, with task states in the same database and trajectories under
 * `--trajectories`, and takes over the work of a runner that dies. Runs until interrupted; start as many as you
 * like, on one machine or many: they meet in the database and listen on no port.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect, Layer, Option } from "effect"
import { Command, Flag } from "effect/cli"
import type { WorkflowEngine } from "effect/workflow"
import type * as Model from "../../core/Model.js"
import type * as Sandbox from "../../environment/Sandbox.js"
import * as StateStore from "../../environment/StateStore.js"
import * as TrajectoryStore from "../../environment/TrajectoryStore.js"
import { flags as actorLoopFlags } from "./actorLoop.js"
import * as Durable from "../../rollouts/Durable.js"
import { describeStore, resolveAgent, storeOf } from "./durable.js"
import { flags as evaluationFlags } from "./evaluation.js"
import { modelLayer } from "./model.js"
import { commandSandbox } from "./sandbox.js"
import { CommandFailed } from "./failure.js"

const note = (text: string) => Effect.sync(() => void process.stderr.write(`${text}\n`))

// A runner without a usable sandbox still serves the architectures that run no command; a problem or actor-loop step
// that needs one fails with the reason, and this line says why at start.
const sandboxOrNone = (options: Sandbox.Options) =>
  commandSandbox(options).pipe(
    Layer.catch((error) =>
      Layer.effectDiscard(note(`valet runner: no sandbox (${error.message}); problems and steps that run commands will fail`))
    )
  ) as Layer.Layer<never>

/** `valet runner`. */
export const runnerCommand = Command.make(
  "runner",
  {
    store: Flag.String("store").pipe(Flag.withDescription("The cluster's PostgreSQL server: postgres://user:password@host:port/database.")),
    baseUrl: evaluationFlags.baseUrl,
    model: evaluationFlags.model,
    apiKey: evaluationFlags.apiKey,
    config: evaluationFlags.config,
    trajectories: actorLoopFlags.trajectories,
    workRoot: actorLoopFlags.workRoot
  },
  (values) =>
    Effect.gen(function*() {
      const store = storeOf(values.store)
      if (store._tag !== "Postgres") {
        return yield* new CommandFailed({
          message: `--store must be a postgres:// URL (got ${JSON.stringify(values.store)}); on a SQLite file, ` +
            "`valet eval --durable <file>` runs the work itself"
        })
      }
      // The handlers read the sandbox optionally (see `sandboxOrNone`).
      const handlers = Layer.mergeAll(Durable.layer(resolveAgent), Durable.layerActorLoop) as Layer.Layer<
        never,
        never,
        WorkflowEngine.WorkflowEngine | Model.Model | StateStore.StateStore | TrajectoryStore.TrajectoryStore
      >
      // Task states live in the cluster's database, so every runner sees a task's state; trajectories are files.
      const stores = Layer.merge(
        StateStore.layerSql(),
        TrajectoryStore.layerFile({ root: values.trajectories }).pipe(Layer.provide(NodeFileSystem.layer))
      )
      const sandbox = Option.isSome(values.workRoot) ? sandboxOrNone({ workRoot: values.workRoot.value }) : sandboxOrNone({})
      const runner = handlers.pipe(
        Layer.provide(stores),
        Layer.provideMerge(Durable.layerPostgresRunner({ url: store.url })),
        Layer.provide(Layer.merge(modelLayer(values), sandbox))
      )
      yield* Layer.launch(runner.pipe(Layer.tap(() => note(`valet runner: serving ${describeStore(store)}`))))
    })
).pipe(
  Command.withDescription(
    "Runs one runner of a durable cluster over PostgreSQL: it does the work of `valet eval --durable postgres://…` " +
      "and takes over a dead runner's. Start several, on one machine or many."
  )
)

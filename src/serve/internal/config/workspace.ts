/**
 * A `valet.yaml` agent's `workspace:` — a directory each run works on a fresh sandbox copy of. Served runs go on side
 * by side: were they given the directory itself, two would write one file at once, and a model's edit would land in
 * the user's tree unreviewed. So every run (not every sub-agent: a `task` of the run shares the run's workspace) gets
 * `Workspace.layerSandbox` seeded from the directory, removed when the run ends; commands run in the file's one sandbox
 * (bubblewrap, or plain processes where the environment opts in: `VALET_SANDBOX_ISOLATION=process`).
 */
import { Context, Effect, Layer, Option } from "effect"
import * as DeepAgent from "../../../architectures/DeepAgent.js"
import * as Catalog from "../../../architectures/Catalog.js"
import { ArchitectureFailed } from "../../../core/AgentError.js"
import type * as Architecture from "../../../core/Architecture.js"
import * as Runtime from "../../../core/internal/runtime.js"
import * as Sandbox from "../../../environment/Sandbox.js"
import * as Workspace from "../../../environment/Workspace.js"

/** The architectures whose agents work on files of a `Workspace` (and so may have `workspace:`). */
export const workspaceArchitectures: ReadonlyArray<string> = [DeepAgent.name]

/** Whether the architecture named so (any accepted spelling) works on a workspace. */
export const takesWorkspace = (architecture: string): boolean =>
  workspaceArchitectures.includes(Catalog.find(architecture)?.definition.name ?? architecture)

/**
 * `architecture` with a fresh sandbox workspace, a copy of `from`, around each run that has none yet (a sub-agent of
 * the run works in its parent's). The sandbox task id is `taskId` (its directory gets a unique suffix).
 */
export const perRun = <R>(
  architecture: Architecture.Architecture<R>,
  options: { readonly taskId: string; readonly from: string; readonly sandbox: Sandbox.Service }
): Architecture.Architecture<R> => {
  const layer = Workspace.layerSandbox(options.taskId, { from: options.from }).pipe(
    Layer.provide(Layer.succeed(Sandbox.Sandbox, options.sandbox))
  )
  const execute: Architecture.Architecture<R>["execute"] = (input, emitter) =>
    Effect.flatMap(Effect.serviceOption(Workspace.Workspace), (found) =>
      Option.isSome(found)
        ? architecture.execute(input, emitter)
        : Effect.scoped(Effect.gen(function*() {
          const built = yield* Layer.build(layer).pipe(
            Effect.mapError((error) =>
              new ArchitectureFailed({ architecture: architecture.name, message: `cannot make the run's workspace from ${options.from}: ${error.message}` })
            )
          )
          return yield* Effect.provideService(architecture.execute(input, emitter), Workspace.Workspace, Context.get(built, Workspace.Workspace))
        })))
  return { ...architecture, execute, run: (input) => Runtime.streamEvents(Effect.succeed(input), execute) }
}

/**
 * A `valet.yaml` agent's `workspace:` — a directory each run works on a fresh sandbox copy of. Served runs go on side
 * by side: were they given the directory itself, two would write one file at once, and a model's edit would land in
 * the user's tree unreviewed. So every run (not every sub-agent: a `task` of the run shares the run's workspace) gets
 * a sandbox copy of the directory (`Workspace.makeSandboxCopy`), removed when the run ends, its diff in the run's
 * result; commands run in the file's one sandbox (bubblewrap, or plain processes where the environment opts in:
 * `VALET_SANDBOX_ISOLATION=process`).
 */
import { Effect, Option } from "effect"
import * as DeepAgent from "../../../architectures/DeepAgent.js"
import * as Catalog from "../../../architectures/Catalog.js"
import { ArchitectureFailed } from "../../../core/AgentError.js"
import type * as AgentEvent from "../../../core/AgentEvent.js"
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
 * the run works in its parent's). The sandbox task id is `taskId` (its directory gets a unique suffix). The run's
 * result says what it changed — `metadata.workspace`: `changedFiles` and the unified `diff` — in its `RunCompleted`
 * (what `GET /runs/:id`, the event stream and an MCP tool result carry) as in the `RunResult` it answers: the copy is
 * removed when the run ends, so that is where a served run's work goes.
 */
export const perRun = <R>(
  architecture: Architecture.Architecture<R>,
  options: { readonly taskId: string; readonly from: string; readonly sandbox: Sandbox.Service }
): Architecture.Architecture<R> => {
  const failed = (error: { readonly message: string }) =>
    new ArchitectureFailed({ architecture: architecture.name, message: `the run's workspace, a copy of ${options.from}: ${error.message}` })
  const execute: Architecture.Architecture<R>["execute"] = (input, emitter) =>
    Effect.flatMap(Effect.serviceOption(Workspace.Workspace), (found) =>
      Option.isSome(found)
        ? architecture.execute(input, emitter)
        : Effect.scoped(Effect.gen(function*() {
          const copy = yield* Workspace.makeSandboxCopy(options.taskId, options.from).pipe(
            Effect.provideService(Sandbox.Sandbox, options.sandbox),
            Effect.mapError(failed)
          )
          // Past the run, a copy that cannot be read (too many files now) is said in the result, not a failed run.
          const withChanges = (result: AgentEvent.RunResult): Effect.Effect<AgentEvent.RunResult> =>
            Effect.match(copy.changes, {
              onFailure: (error) => ({ ...result, metadata: { ...result.metadata, workspace: { error: error.message } } }),
              onSuccess: (changes) => ({
                ...result,
                metadata: { ...result.metadata, workspace: { changedFiles: changes.changedFiles, diff: changes.diff } }
              })
            })
          let completed: AgentEvent.RunResult | undefined
          // The run's own RunCompleted waits for the changes (its sub-runs' pass as they are).
          const isEnd = (event: AgentEvent.AgentEvent): event is typeof AgentEvent.RunCompleted.Type =>
            event._tag === "RunCompleted" && event.sessionId === input.sessionId
          const watched: Architecture.Emitter = {
            observed: emitter.observed,
            emit: (event) =>
              isEnd(event)
                ? Effect.flatMap(withChanges(event.result), (result) => {
                  completed = result
                  return emitter.emit({ ...event, result })
                })
                : emitter.emit(event),
            ...(emitter.unsafeEmit !== undefined
              ? { unsafeEmit: (event: AgentEvent.AgentEvent) => !isEnd(event) && emitter.unsafeEmit!(event) }
              : {})
          }
          const result = yield* Effect.provideService(architecture.execute(input, watched), Workspace.Workspace, copy.workspace)
          return completed ?? (yield* withChanges(result))
        })))
  return { ...architecture, execute, run: (input) => Runtime.streamEvents(Effect.succeed(input), execute) }
}

/**
 * `valet run --architecture deep_agent --workspace DIR`: the agent works on a copy of DIR, never on DIR itself. The
 * copy is a fresh workspace of the command's sandbox (bubblewrap; plain processes only with
 * `VALET_SANDBOX_ISOLATION=process`, said on stderr), so its commands run there and what it writes stays there. At the
 * end — also when the run failed or was interrupted (Ctrl-C), so the work done is not lost — the copy's changes are
 * printed as a unified diff after the answer (`git apply` and `patch` skip the answer in front of it) or written to
 * `--diff FILE`; `--apply` writes them back to DIR after a run that succeeded (a non-empty answer, not stopped by a
 * limit), refused when a file to change was changed in DIR meanwhile.
 */
import { Cause, Effect, Exit, FileSystem, Schema } from "effect"
import * as Sandbox from "../../environment/Sandbox.js"
import * as Workspace from "../../environment/Workspace.js"
import { CommandFailed, notAnswered, UsageError } from "./failure.js"

/** What this prints on: text on stdout (the diff), notes on stderr (`run.ts`'s `Printer` is one). */
export interface Printer {
  readonly write: (text: string) => Effect.Effect<void>
  readonly note: (text: string) => Effect.Effect<void>
}

/** What `--workspace`, `--diff` and `--apply` ask. */
export interface WorkspaceSettings {
  /** The directory the agent's workspace is a copy of. */
  readonly directory: string
  /** Where to write the diff (instead of printing it). */
  readonly diff: string | undefined
  /** Write the changes back to `directory` after a run that succeeded. */
  readonly apply: boolean
}

/** The workspace's task id in the sandbox (its directory's name starts with it). */
const taskId = "valet-run"

/** Fails with a `UsageError` naming `flag` unless `path` is a directory. */
export const requireDirectory = (flag: string, path: string): Effect.Effect<void, UsageError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* Effect.result(fs.stat(path))
    if (info._tag === "Failure") return yield* new UsageError({ message: `${flag} ${path}: no such directory` })
    if (info.success.type !== "Directory") return yield* new UsageError({ message: `${flag} ${path}: not a directory` })
  })

/** What a run answers that `onWorkspace` needs to tell whether it succeeded (an `AgentEvent.RunResult` is one). */
export interface Outcome {
  readonly output: string
  readonly interrupted: boolean
  readonly interruptionReason?: string | undefined
}

/** Why a run that ended with `exit` did not succeed (so its changes are not written back), or `undefined`. */
const whyNotApplied = <A extends Outcome, E>(exit: Exit.Exit<A, E>): string | undefined => {
  if (Exit.isFailure(exit)) return Cause.hasInterruptsOnly(exit.cause) ? "the run was interrupted" : "the run failed"
  return notAnswered(exit.value) ?? (exit.value.interrupted ? `the run was interrupted: ${exit.value.interruptionReason}` : undefined)
}

/**
 * Runs `run` with a `Workspace` that is a sandbox copy of the settings' directory, then prints or writes its changes
 * — also when the run failed or was interrupted (Ctrl-C: the diff is printed, then the command ends as interrupted)
 * — and writes them back with `apply` only after a run that succeeded: it ended with a non-empty answer, not stopped
 * by a limit. When the changes cannot be read (the copy grew past its limits), that is a note on stderr and the run
 * ends as it did. The copy is removed when this ends.
 */
export const onWorkspace = <A extends Outcome, E, R>(
  settings: WorkspaceSettings,
  run: Effect.Effect<A, E, R>,
  printer: Printer
): Effect.Effect<A, E | Workspace.WorkspaceError | Sandbox.SandboxError | UsageError | CommandFailed, Exclude<R, Workspace.Workspace> | Sandbox.Sandbox | FileSystem.FileSystem> =>
  Effect.scoped(Effect.gen(function*() {
    const copy = yield* Workspace.makeSandboxCopy(taskId, settings.directory)
    const info = yield* Sandbox.info
    yield* printer.note(
      `valet: the agent works on a copy of ${copy.from} (commands: ${info.isolation}); ` +
        (settings.apply ? "its changes are written back at the end" : "the directory is left as it is (--apply writes the changes back)")
    )
    // Only the run can be interrupted: on Ctrl-C what follows still runs, so the work done is reported, not lost.
    return yield* Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(restore(Effect.provideService(run, Workspace.Workspace, copy.workspace)))
        const changes = yield* Effect.result(copy.changes)
        if (changes._tag === "Failure") {
          yield* printer.note(`valet: the workspace's changes cannot be shown${settings.apply ? " nor written back" : ""}: ${changes.failure.message}`)
          return yield* exit
        }
        yield* reportChanges(settings.diff, changes.success, printer)
        if (settings.apply && changes.success.changedFiles.length > 0) {
          const why = whyNotApplied(exit)
          if (why !== undefined) {
            yield* printer.note(`valet: nothing written back to ${copy.from}: ${why}`)
          } else {
            const applied = yield* copy.apply
            const skipped = applied.skipped.length > 0 ? `; not written (not regular files, or in a .git): ${applied.skipped.join(", ")}` : ""
            yield* printer.note(`valet: written back to ${copy.from}: ${applied.written.length} written, ${applied.removed.length} removed${skipped}`)
          }
        }
        return yield* exit
      })
    )
  })) as Effect.Effect<A, E | Workspace.WorkspaceError | Sandbox.SandboxError | UsageError | CommandFailed, Exclude<R, Workspace.Workspace> | Sandbox.Sandbox | FileSystem.FileSystem>

/** Prints the diff after the answer, or writes it to `diff` (`--diff`); the changed paths on stderr. */
export const reportChanges = (diff: string | undefined, changes: Workspace.Changes, printer: Printer) =>
  Effect.gen(function*() {
    const count = changes.changedFiles.length
    if (count === 0) {
      yield* printer.note("valet: the workspace is unchanged")
      if (diff !== undefined) yield* writeDiff(diff, "")
      return
    }
    const paths = `${count} file${count === 1 ? "" : "s"} changed: ${changes.changedFiles.join(", ")}`
    if (diff !== undefined) {
      yield* writeDiff(diff, changes.diff)
      yield* printer.note(`valet: ${paths}; the diff is in ${diff}`)
    } else {
      yield* printer.note(`valet: ${paths}`)
      yield* printer.write(`\n${changes.diff}`)
    }
  })

const ReportedChanges = Schema.Struct({ changedFiles: Schema.Array(Schema.String), diff: Schema.String })
const isReportedChanges = Schema.is(ReportedChanges)

/** The changes a deep_agent's run with a valet.yaml `workspace:` reports in `metadata.workspace`, if any. */
export const workspaceChanges = (value: unknown): Workspace.Changes | undefined => (isReportedChanges(value) ? value : undefined)

const writeDiff = (path: string, diff: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.writeFileString(path, diff).pipe(
      Effect.mapError((error) => new CommandFailed({ message: `--diff ${path}: cannot write it: ${error.message}` }))
    )
  })

/**
 * What both sandbox layers share: the error, the command schema and its check, the refusal results, task-id
 * checks and the per-task locks of kept workspaces.
 */
import { Effect, Result, Schema, Semaphore } from "effect"
import { formatSchemaError } from "../../../core/internal/decode.js"
import { Command, type ErrorKind, SandboxError, type SandboxResult } from "./types.js"
import { describeUnsafeTaskId, isSafeTaskId } from "../taskId.js"
import type { PathRefused } from "./workspace.js"


const decodeCommand = Schema.decodeUnknownResult(Command)

/** A result for a command that did not run. */
export const refused = (
  command: ReadonlyArray<string>,
  exitCode: number,
  error: ErrorKind,
  stderr: string
): SandboxResult => ({ command, exitCode, stdout: "", stderr, durationMs: 0, timedOut: false, error, isolation: "none" })

const preview = (value: unknown): string => {
  let text: string
  try {
    text = JSON.stringify(value) ?? String(value)
  } catch {
    text = String(value)
  }
  return text.length > 120 ? `${text.slice(0, 119)}…` : text
}

/** Checks a command from a model: a list of strings, else exit 127 `invalid_command`. */
export const checkCommand = (command: unknown): Result.Result<ReadonlyArray<string>, SandboxResult> =>
  Result.mapError(decodeCommand(command), (error) => {
    // `command: [1] must be a string, got {"code":1}`; the whole value too when the detail does not show it.
    const detail = formatSchemaError("command", error, command)
    const got = detail.includes(", got ") ? "" : `, got ${preview(command)}`
    return refused([], 127, "invalid_command", `invalid_command: a command is a non-empty list of strings${got}; ${detail}\n`)
  })

/** An I/O failure, saying what was being done. */
export const ioError = (what: string, taskId?: string) => (cause: unknown) =>
  new SandboxError({
    reason: "io",
    taskId,
    message: `${what}: ${cause instanceof Error ? cause.message : String(cause)}`
  })

/** A refused seed path as an error. */
export const refusal = (taskId: string, refused: PathRefused) =>
  new SandboxError({ reason: refused.reason, taskId, path: refused.path, message: refused.message })

/** Fails with `unsafe_task_id` unless the task id is a safe file name. */
export const checkTaskId = (taskId: string): Effect.Effect<void, SandboxError> =>
  isSafeTaskId(taskId)
    ? Effect.void
    : Effect.fail(new SandboxError({ reason: "unsafe_task_id", taskId, message: describeUnsafeTaskId(taskId) }))

/** One lock per kept workspace, created on first use. */
export const makeLocks = () => {
  const locks = new Map<string, Semaphore.Semaphore>()
  return (taskId: string): Semaphore.Semaphore => {
    let lock = locks.get(taskId)
    if (lock === undefined) {
      lock = Semaphore.makeUnsafe(1)
      locks.set(taskId, lock)
    }
    return lock
  }
}

/** A timeout a caller asked for, or the default when it is not a positive finite number. */
export const timeoutOr = (requested: number | undefined, fallback: number): number =>
  requested !== undefined && Number.isFinite(requested) && requested > 0 ? requested : fallback

/**
 * An actor-loop task as the tasks file spells it (`ActorLoop.Task`, re-exported there with its documentation) and
 * the reading of a tasks-file line (`ActorLoop.decodeTaskLine`). It lives here so that the step's program
 * (`step.ts`) uses it without importing `ActorLoop`.
 */
import { Result, Schema } from "effect"
import * as Opts from "../../core/internal/options.js"
import { checkRelativePath, PathRefused } from "../../environment/internal/sandbox/workspace.js"
import { isSafeTaskId } from "../../environment/internal/taskId.js"
import * as Sandbox from "../../environment/Sandbox.js"

const WorkspaceFiles = Sandbox.Files.check(
  Schema.makeFilter((files) => {
    for (const path of Object.keys(files)) {
      const checked = checkRelativePath(path)
      if (checked instanceof PathRefused) return `is refused: ${checked.message}`
    }
    return true
  })
)

// The rule is the sandbox's (`isSafeTaskId`); the wording reads after the field's name in a one-line error.
const TaskIdSchema = Schema.String.check(
  Schema.makeFilter((taskId: string) =>
    isSafeTaskId(taskId) ||
    "is not a safe name: use 1 to 128 letters, digits, '.', '_' or '-', not starting with '.' or '-'"
  )
)

/** A task (`ActorLoop.Task`): snake case when encoded, as in the tasks JSONL. */
export const Task = Schema.Struct({
  taskId: TaskIdSchema,
  prompt: Schema.String,
  workspaceFiles: Schema.optional(WorkspaceFiles),
  stop: Schema.optional(Schema.Array(Schema.String)),
  temperature: Schema.optional(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 2 }))),
  /**
   * The request's seed; an episode's or group's later steps take seeds derived from it (the module doc), and one
   * that would pass `Number.MAX_SAFE_INTEGER` there is refused before any step.
   */
  seed: Schema.optional(Schema.Int),
  maxTokens: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  timeoutMs: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  /** The reference answer, for the answer rewards (`Reward.exactAnswer`, `Reward.normalizedAnswer`). */
  reference: Schema.optional(Schema.String)
}).pipe(Schema.encodeKeys({ taskId: "task_id", workspaceFiles: "workspace_files", maxTokens: "max_tokens", timeoutMs: "timeout_ms" }))
/** A task. */
export type Task = typeof Task.Type

// A field the task does not know is refused, not dropped: a misspelt `max_token` would otherwise be a silent default.
const decodeTask = Schema.decodeUnknownResult(Task, { onExcessProperty: "error" })

/** A task from JSON text, or what was wrong with it on one line (`ActorLoop.decodeTaskLine`). */
export const decodeLine = (line: string): Result.Result<Task, string> => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (error) {
    return Result.fail(`not JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  return Result.mapError(
    decodeTask(json),
    // The shared wording is for options; here the key is a task's field.
    (error) => Opts.describeIssue(error.issue, json).replaceAll("is not a known option", "is not a known task field")
  )
}

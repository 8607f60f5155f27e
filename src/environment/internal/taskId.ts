/**
 * Task ids name files and directories (`trajectories/raw/<task_id>.jsonl`, a sandbox workspace), so they are
 * checked once, the same way, wherever one arrives from outside.
 */
import { Schema } from "effect"

const pattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

/** Whether `taskId` is safe as a file name: letters, digits, `.`, `_`, `-`, not starting with `.`, ≤ 128 chars. */
export const isSafeTaskId = (taskId: string): boolean => pattern.test(taskId)

/** Why a task id is refused, in words. */
export const describeUnsafeTaskId = (taskId: string): string =>
  `task id ${JSON.stringify(taskId)} is not a safe name: use 1 to 128 letters, digits, '.', '_' or '-', not starting with '.' or '-'`

/** A task id that is safe as a file name. */
export const TaskId = Schema.String.check(
  Schema.makeFilter((taskId: string) => isSafeTaskId(taskId), {
    expected: "a safe task id (1 to 128 letters, digits, '.', '_' or '-', not starting with '.' or '-')"
  })
)

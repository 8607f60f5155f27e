/**
 * The trajectory store's one error (re-exported by `TrajectoryStore`) and its task id check: they live here so that
 * the file store's internals fail with them without importing the public module that imports them.
 */
import { Effect, Schema } from "effect"
import { describeUnsafeTaskId, isSafeTaskId } from "../taskId.js"

/**
 * A trajectory could not be written or read; `path` and `line` point at the bad place.
 *
 * @since 0.1.0
 * @category errors
 */
export class TrajectoryStoreError extends Schema.TaggedError<TrajectoryStoreError>()("TrajectoryStoreError", {
  operation: Schema.String,
  taskId: Schema.String,
  path: Schema.optional(Schema.String),
  line: Schema.optional(Schema.Int),
  message: Schema.String
}) {}

/** Fails `operation` when `taskId` is not a safe file name (the sandbox's rule). */
export const checkTaskId = (operation: string, taskId: string): Effect.Effect<void, TrajectoryStoreError> =>
  isSafeTaskId(taskId)
    ? Effect.void
    : Effect.fail(new TrajectoryStoreError({ operation, taskId, message: describeUnsafeTaskId(taskId) }))

/** An I/O failure of `operation` on `path`, as the store's error (the message starts with the path). */
export const failure = (operation: string, taskId: string, path: string) => (error: { readonly message: string }) =>
  new TrajectoryStoreError({ operation, taskId, path, message: `${path}: ${error.message}` })

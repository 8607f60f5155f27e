/**
 * The export's one error (re-exported by `Export`): it lives here so that the export's internals can fail with it
 * without importing the public module that imports them.
 */
import { Schema } from "effect"

/**
 * An export could not read its trajectories or write its output: `path` names the file, `message` says what was
 * wrong, on one line. (A corrupt record is not an error: it is skipped and counted.)
 *
 * @since 0.2.0
 * @category errors
 */
export class ExportError extends Schema.TaggedError<ExportError>()("ExportError", {
  path: Schema.optional(Schema.String),
  message: Schema.String
}) {}

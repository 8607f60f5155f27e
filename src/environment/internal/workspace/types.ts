/**
 * The data of `Workspace`: the error, what each operation answers, and the service's shape. `Workspace` re-exports
 * all of it; it lives here so that the layers' internals use it without importing `Workspace`.
 */
import { type Effect, Schema } from "effect"
import type { RunRequest, SandboxError, SandboxResult } from "../sandbox/types.js"

/**
 * An operation on a workspace was refused or failed: `reason` says why, `path` names the path (or pattern) it was
 * given. Path refusals are spelled as the sandbox spells them (`absolute_path`, `parent_path`, `invalid_path` for an
 * empty one or a NUL byte, `symlink_escape`); `string_not_found` and `string_not_unique` (with `occurrences`) are
 * `edit`'s; `conflict` is a copy's changes refused when written back over a directory changed meanwhile. A model's
 * tool reads the `message`.
 *
 * @since 0.2.0
 * @category errors
 */
export class WorkspaceError extends Schema.TaggedError<WorkspaceError>()("WorkspaceError", {
  reason: Schema.Literals([
    "absolute_path",
    "parent_path",
    "invalid_path",
    "symlink_escape",
    "not_found",
    "not_a_file",
    "not_a_directory",
    "string_not_found",
    "string_not_unique",
    "invalid_argument",
    "too_large",
    "conflict",
    "io"
  ]),
  path: Schema.String,
  /** How many times `edit`'s string occurs, when that is why it was refused. */
  occurrences: Schema.optional(Schema.Int),
  message: Schema.String
}) {}

/**
 * What a workspace copied from a directory changed (`Workspace.makeSandboxCopy`): every added, modified or deleted
 * path, sorted, and the unified diff of the text files among them (binary and large files are only listed).
 *
 * @since 0.2.0
 * @category models
 */
export interface Changes {
  readonly changedFiles: ReadonlyArray<string>
  readonly diff: string
}

/**
 * What writing a copy's changes back did: files written, files removed, and paths not written (links or other
 * non-files the agent made).
 *
 * @since 0.2.0
 * @category models
 */
export interface Applied {
  readonly written: ReadonlyArray<string>
  readonly removed: ReadonlyArray<string>
  readonly skipped: ReadonlyArray<string>
}

/**
 * One entry of a directory (`list`): its path from the workspace's root, its kind, and a file's size in bytes. A
 * symbolic link on disk is listed as `symlink` and never followed.
 *
 * @since 0.2.0
 * @category models
 */
export interface Entry {
  readonly path: string
  readonly kind: "file" | "directory" | "symlink"
  readonly size?: number | undefined
}

/**
 * Options of `read`: `offset`, the first line (1-based, default 1), and `limit`, how many lines (default 2,000).
 *
 * @since 0.2.0
 * @category options
 */
export interface ReadOptions {
  readonly offset?: number | undefined
  readonly limit?: number | undefined
}

/**
 * Lines of a file as `read` answers them: `content` is the lines numbered (`cat -n`: the number right-aligned in six
 * columns, a tab, the line; a line over 2,000 characters cut with a note), `startLine` and `endLine` the numbers of
 * the first and last line given (0 and 0 for an empty file), `totalLines` the file's.
 *
 * @since 0.2.0
 * @category models
 */
export interface Lines {
  readonly path: string
  readonly content: string
  readonly startLine: number
  readonly endLine: number
  readonly totalLines: number
}

/**
 * What `write` did: the path, the bytes written, whether the file is new.
 *
 * @since 0.2.0
 * @category models
 */
export interface Written {
  readonly path: string
  readonly bytes: number
  readonly created: boolean
}

/**
 * An exact string replacement (`edit`): `oldString` must occur once (or, with `replaceAll`, at least once).
 *
 * @since 0.2.0
 * @category models
 */
export interface Edit {
  readonly oldString: string
  readonly newString: string
  readonly replaceAll?: boolean | undefined
}

/**
 * What `edit` did: the path and how many occurrences it replaced.
 *
 * @since 0.2.0
 * @category models
 */
export interface Edited {
  readonly path: string
  readonly replacements: number
}

/**
 * Options of `glob`: the directory to search from (default the root) and at most `limit` paths (default 1,000).
 *
 * @since 0.2.0
 * @category options
 */
export interface GlobOptions {
  readonly path?: string | undefined
  readonly limit?: number | undefined
}

/**
 * The files a `glob` matched, paths from the workspace's root in order; `truncated` when there were more than its limit.
 *
 * @since 0.2.0
 * @category models
 */
export interface Found {
  readonly paths: ReadonlyArray<string>
  readonly truncated: boolean
}

/**
 * Options of `grep`: the directory or file to search (default the root), a `glob` the files' paths must match,
 * `ignoreCase`, and at most `limit` matches (default 1,000).
 *
 * @since 0.2.0
 * @category options
 */
export interface GrepOptions {
  readonly path?: string | undefined
  readonly glob?: string | undefined
  readonly ignoreCase?: boolean | undefined
  readonly limit?: number | undefined
}

/**
 * A line that contains what `grep` looked for: the file, the line's number (1-based) and its text (cut at 500
 * characters).
 *
 * @since 0.2.0
 * @category models
 */
export interface Match {
  readonly path: string
  readonly line: number
  readonly text: string
}

/**
 * What `grep` found, in path and line order; `truncated` when there were more matches than its limit.
 *
 * @since 0.2.0
 * @category models
 */
export interface Matches {
  readonly matches: ReadonlyArray<Match>
  readonly truncated: boolean
}

/**
 * What a workspace implements. Every path is relative to the workspace's root, `/`-separated; `list`, `glob` and
 * `grep` take `""` or `"."` for the root itself.
 *
 * @since 0.2.0
 * @category services
 */
export interface Service {
  /** Where the files are: `memory`, or the directory on disk. */
  readonly location: string
  /** The entries of a directory, in name order (not recursive). */
  readonly list: (path?: string) => Effect.Effect<ReadonlyArray<Entry>, WorkspaceError>
  /** Lines of a text file, numbered. */
  readonly read: (path: string, options?: ReadOptions) => Effect.Effect<Lines, WorkspaceError>
  /** The whole text of a file, as it is. */
  readonly readText: (path: string) => Effect.Effect<string, WorkspaceError>
  /** Writes a file (replacing it), creating the directories it needs. */
  readonly write: (path: string, content: string) => Effect.Effect<Written, WorkspaceError>
  /** Replaces an exact string in a file: refused when it is absent, or occurs more than once without `replaceAll`. */
  readonly edit: (path: string, edit: Edit) => Effect.Effect<Edited, WorkspaceError>
  /** The files whose paths match a glob pattern (`**` crosses directories; names starting with `.` only when the pattern says so). */
  readonly glob: (pattern: string, options?: GlobOptions) => Effect.Effect<Found, WorkspaceError>
  /** The lines of text files that contain `text` (a literal string, not a regular expression). */
  readonly grep: (text: string, options?: GrepOptions) => Effect.Effect<Matches, WorkspaceError>
  /**
   * Runs a command in the workspace through its `Sandbox` (`layerSandbox`); undefined where the workspace has no
   * sandbox (memory, a plain directory).
   */
  readonly run: ((request: RunRequest) => Effect.Effect<SandboxResult, SandboxError>) | undefined
}

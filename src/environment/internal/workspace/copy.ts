/**
 * A workspace seeded from a directory of the user's: the directory is measured (past 10,000 files or 256 MiB it is
 * refused before anything is copied), copied in (files as bytes, symbolic links as they are, every `.git` and the
 * tools' `.valet/tool_results` left out), the copy is snapshotted, and at the end its changes are the difference to
 * that snapshot — a unified diff of the text files (the sandbox's snapshot and diff, not a second implementation) —
 * which can be written back to the directory. Writing back refuses when a file to change was changed in the directory
 * meanwhile, or a directory on its way is no longer one (`conflict`, nothing written), never writes through a symbolic
 * link (the sandbox's `seed`), never writes into a `.git` at any depth (a model that could add a hook or a config
 * there would run code on the user's next git command), and carries over only the execute bits of the agent's modes.
 */
import * as fs from "node:fs/promises"
import { join, relative, sep } from "node:path"
import * as Snapshot from "../sandbox/snapshot.js"
import { PathRefused, seed } from "../sandbox/workspace.js"
import type { Applied, Changes } from "./types.js"
import { WorkspaceError } from "./types.js"

/** The folder where the tools keep results too large for the context: the agent's scratch, not its work. */
const toolResults = ".valet/tool_results"

/**
 * Whether a path (relative, `/`-separated) is never copied, compared or written back: anything in a `.git` at any
 * depth (a nested repository's `vendor/lib/.git` too), its name compared case-insensitively as git's own
 * `verify_path` does (`.GIT` is `.git` on a case-insensitive file system), and the tools' `.valet/tool_results`.
 */
export const isSkipped = (relative: string): boolean =>
  relative === toolResults || relative.startsWith(`${toolResults}/`) ||
  relative.split("/").some((segment) => segment.toLowerCase() === ".git")

/**
 * The limits of a copy: the sandbox's snapshot defaults, and 256 MiB of files in all. A larger directory is refused
 * before anything is copied (not half-copied, not half-diffed).
 */
export const copyLimits: Snapshot.SnapshotLimits = { maxDiffBytes: 256 * 1024, maxFiles: 10_000, maxBytes: 256 * 1024 * 1024 }

/** A directory copied into a workspace, and what the copy held when it was made. */
export interface Copy {
  /** The directory copied (its real path). */
  readonly from: string
  /** The workspace directory. */
  readonly path: string
  readonly before: Snapshot.Snapshot
  /** The limits the copy was made with (its later snapshots keep them). */
  readonly limits: Snapshot.SnapshotLimits
}

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null ? (error as { code?: string }).code : undefined

const io = (path: string, what: string) => (error: unknown) =>
  new WorkspaceError({ reason: "io", path, message: `cannot ${what}: ${error instanceof Error ? error.message : String(error)}` })

/** Checks that `from` is a directory and answers its real path, or the `WorkspaceError` naming it. */
export const directoryOf = async (from: string): Promise<string | WorkspaceError> => {
  const stat = await fs.stat(from).catch((error) => (codeOf(error) === "ENOENT" || codeOf(error) === "ENOTDIR" ? undefined : Promise.reject(error)))
  if (stat === undefined) return new WorkspaceError({ reason: "not_found", path: from, message: `${from}: no such directory` })
  if (!stat.isDirectory()) return new WorkspaceError({ reason: "not_a_directory", path: from, message: `${from} is not a directory` })
  return fs.realpath(from)
}

/** Whether `inner` is `outer` or inside it (`outer` may be `/`, which already ends with the separator). */
const within = (outer: string, inner: string): boolean =>
  inner === outer || inner.startsWith(outer.endsWith(sep) ? outer : outer + sep)

/** The `too_large` error of a snapshot or a measure stopped at a limit. */
const tooLarge = (path: string, what: string, stoppedAt: "files" | "bytes" | undefined, limits: Snapshot.SnapshotLimits, advice: string) =>
  new WorkspaceError({
    reason: "too_large",
    path,
    message: stoppedAt === "bytes"
      ? `${what} holds more than ${mebibytes(limits.maxBytes ?? 0)} of files: ${advice}`
      : `${what} holds more than ${limits.maxFiles} files: ${advice}`
  })

const mebibytes = (bytes: number): string => (bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes} bytes`)

/**
 * Copies the directory `from` into the workspace directory `path` (with `onlyMissing`, files already there are kept:
 * a kept workspace keeps its edits) and snapshots the copy. `from` is measured first: past `limits` it is refused
 * before anything is copied.
 */
export const make = async (from: string, path: string, onlyMissing = false, limits: Snapshot.SnapshotLimits = copyLimits): Promise<Copy | WorkspaceError> => {
  const real = await directoryOf(from).catch(io(from, `read ${from}`))
  if (real instanceof WorkspaceError) return real
  const target = await fs.realpath(path)
  if (within(real, target)) {
    return new WorkspaceError({
      reason: "invalid_argument",
      path: from,
      message: `${from} holds the sandbox's work root (${path}): copying it would copy the copy; set VALET_SANDBOX_ROOT elsewhere`
    })
  }
  const size = await Snapshot.measure(real, limits, isSkipped).catch(io(from, `read ${from}`))
  if (size instanceof WorkspaceError) return size
  if (!size.complete) return tooLarge(from, from, size.stoppedAt, limits, "a copy that large is not made; give a smaller directory")
  try {
    await fs.cp(real, path, {
      recursive: true,
      verbatimSymlinks: true,
      force: !onlyMissing,
      errorOnExist: false,
      // Files, directories and links; a socket or a FIFO of the user's is not the agent's to open.
      filter: async (source) => {
        if (source === real) return true
        if (isSkipped(relative(real, source).split(sep).join("/"))) return false
        const stat = await fs.lstat(source)
        return stat.isFile() || stat.isDirectory() || stat.isSymbolicLink()
      }
    })
  } catch (error) {
    return io(from, `copy ${from} into the workspace`)(error)
  }
  const before = await Snapshot.take(path, limits, isSkipped).catch(io(from, "read the copy"))
  if (before instanceof WorkspaceError) return before
  // Grown since it was measured: refused all the same.
  if (!before.complete) return tooLarge(from, from, before.stoppedAt, limits, "a copy that large is not diffed; give a smaller directory")
  return { from: real, path, before, limits }
}

/** What the workspace changed since the copy was made. */
export const changes = async (copy: Copy): Promise<Changes & { readonly after: Snapshot.Snapshot } | WorkspaceError> => {
  const after = await Snapshot.take(copy.path, copy.limits, isSkipped).catch(io(copy.from, "read the workspace"))
  if (after instanceof WorkspaceError) return after
  if (!after.complete) return tooLarge(copy.path, "the workspace", after.stoppedAt, copy.limits, "no diff")
  return { ...Snapshot.compare(copy.before, after), after }
}

/**
 * Why writing `path` (or removing it) in `copy.from` would not land where the copy says, or `undefined` when it
 * would: each parent directory must be a real directory or absent (not a link, not a file), unless it is a link or
 * file the copy had and the changes remove first; a file to write must not be a directory there.
 */
const parentProblem = async (copy: Copy, after: Snapshot.Snapshot, path: string): Promise<string | undefined> => {
  const segments = path.split("/")
  for (let i = 1; i < segments.length; i++) {
    const parent = segments.slice(0, i).join("/")
    const stat = await fs.lstat(join(copy.from, parent)).catch((error) => (codeOf(error) === "ENOENT" ? undefined : Promise.reject(error)))
    // Absent: made by the write, and so is everything under it.
    if (stat === undefined) return undefined
    if (stat.isDirectory()) continue
    // A link or a file the copy had, which the agent replaced by a directory: removed before (it sorts first), and
    // checked to be as it was like every path removed.
    if (copy.before.entries.has(parent) && !after.entries.has(parent)) return undefined
    return `${parent} is ${stat.isSymbolicLink() ? "a symbolic link" : "not a directory"} in ${copy.from}`
  }
  if (after.entries.get(path)?.kind === "file") {
    const stat = await fs.lstat(join(copy.from, path)).catch(() => undefined)
    if (stat?.isDirectory() === true) return `${path} is a directory in ${copy.from}`
  }
  return undefined
}

/**
 * Writes the workspace's changes back to the directory it was copied from: changed and new files written, deleted
 * ones removed. First every path to change is checked — to be in the directory as it was copied, and to be reached
 * through real directories only — otherwise `conflict` naming the paths, and nothing is written. Links and other
 * non-files made by the agent, and anything in a `.git`, are not written (`skipped`). A file is given only the
 * execute bits of the agent's (its own mode otherwise kept; a new one 0644), never a mode the agent set. Should a
 * write still fail halfway, the error names what was already written.
 */
export const apply = async (copy: Copy): Promise<Applied | WorkspaceError> => {
  const found = await changes(copy)
  if (found instanceof WorkspaceError) return found
  const notWritten: Array<string> = found.changedFiles.filter(isSkipped)
  const paths = found.changedFiles.filter((path) => !isSkipped(path))
  const conflicts: Array<string> = []
  for (const path of paths) {
    const problem = await parentProblem(copy, found.after, path).catch((error) => `${path}: ${error instanceof Error ? error.message : String(error)}`)
    if (problem !== undefined) {
      conflicts.push(`${path} (${problem})`)
      continue
    }
    const now = await Snapshot.entryAt(copy.from, path, copy.limits).catch(() => ({ kind: "other" as const }))
    const was = copy.before.entries.get(path)
    const same = now === undefined ? was === undefined : was !== undefined && Snapshot.sameEntry(now, was)
    if (!same) conflicts.push(path)
  }
  if (conflicts.length > 0) {
    return new WorkspaceError({
      reason: "conflict",
      path: copy.from,
      message: `${conflicts.join(", ")} changed in ${copy.from} since it was copied: nothing written back (the diff still shows the agent's changes)`
    })
  }
  const written: Array<string> = []
  const removed: Array<string> = []
  const done = () =>
    written.length + removed.length === 0
      ? "nothing was written back"
      : `already written back: ${[...written, ...removed.map((path) => `${path} (removed)`)].join(", ")}`
  for (const path of paths) {
    const entry = found.after.entries.get(path)
    const target = join(copy.from, path)
    try {
      if (entry === undefined) {
        await fs.unlink(target).catch((error) => (codeOf(error) === "ENOENT" ? undefined : Promise.reject(error)))
        removed.push(path)
      } else if (entry.kind === "file") {
        const source = join(copy.path, path)
        // Only the execute bits of the agent's file are carried over (an executable it made stays one); seed sets
        // them through the file's open handle, never by its path again.
        const execute = (await fs.lstat(source)).mode & 0o111
        const refused = await seed(copy.from, [[path, await fs.readFile(source)]], false, execute)
        if (refused instanceof PathRefused) {
          return new WorkspaceError({
            reason: refused.reason === "unsafe_task_id" ? "invalid_path" : refused.reason,
            path,
            message: `${refused.message}; ${done()}`
          })
        }
        written.push(path)
      } else {
        notWritten.push(path)
      }
    } catch (error) {
      return new WorkspaceError({
        reason: "io",
        path,
        message: `cannot write ${path} back to ${copy.from}: ${error instanceof Error ? error.message : String(error)}; ${done()}`
      })
    }
  }
  return { written, removed, skipped: notWritten.sort() }
}

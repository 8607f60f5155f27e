/**
 * A workspace seeded from a directory of the user's: the directory is copied in (files as bytes, symbolic links as
 * they are, `.git` and the tools' `.valet/tool_results` left out), the copy is snapshotted, and at the end its changes are the difference to that snapshot
 * — a unified diff of the text files (the sandbox's snapshot and diff, not a second implementation) — which can be
 * written back to the directory. Writing back refuses when a file to change was changed in the directory meanwhile
 * (`conflict`, nothing written), never writes through a symbolic link (the sandbox's `seed`), and never writes
 * `.git` (a model that could add a hook there would run code on the user's next commit).
 */
import * as fs from "node:fs/promises"
import { join, relative, sep } from "node:path"
import * as Snapshot from "../sandbox/snapshot.js"
import { PathRefused, seed } from "../sandbox/workspace.js"
import type { Applied, Changes } from "./types.js"
import { WorkspaceError } from "./types.js"

/**
 * Paths never copied, compared or written back: the directory's `.git`, and the files where the tools keep results
 * too large for the context (`.valet/tool_results`: the agent's scratch, not its work).
 */
export const skipped: ReadonlySet<string> = new Set([".git", ".valet/tool_results"])

/** The limits of the copy's snapshots: the sandbox's defaults (a larger directory is refused, not half-diffed). */
export const limits: Snapshot.SnapshotLimits = { maxDiffBytes: 256 * 1024, maxFiles: 10_000 }

/** A directory copied into a workspace, and what the copy held when it was made. */
export interface Copy {
  /** The directory copied (its real path). */
  readonly from: string
  /** The workspace directory. */
  readonly path: string
  readonly before: Snapshot.Snapshot
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

/**
 * Copies the directory `from` into the workspace directory `path` (with `onlyMissing`, files already there are kept:
 * a kept workspace keeps its edits) and snapshots the copy.
 */
export const make = async (from: string, path: string, onlyMissing = false): Promise<Copy | WorkspaceError> => {
  const real = await directoryOf(from).catch(io(from, `read ${from}`))
  if (real instanceof WorkspaceError) return real
  const target = await fs.realpath(path)
  if (target === real || target.startsWith(real + sep)) {
    return new WorkspaceError({
      reason: "invalid_argument",
      path: from,
      message: `${from} holds the sandbox's work root (${path}): copying it would copy the copy; set VALET_SANDBOX_ROOT elsewhere`
    })
  }
  try {
    await fs.cp(real, path, {
      recursive: true,
      verbatimSymlinks: true,
      force: !onlyMissing,
      errorOnExist: false,
      // Files, directories and links; a socket or a FIFO of the user's is not the agent's to open.
      filter: async (source) => {
        if (source === real) return true
        if (skipped.has(relative(real, source).split(sep).join("/"))) return false
        const stat = await fs.lstat(source)
        return stat.isFile() || stat.isDirectory() || stat.isSymbolicLink()
      }
    })
  } catch (error) {
    return io(from, `copy ${from} into the workspace`)(error)
  }
  const before = await Snapshot.take(path, limits, skipped).catch(io(from, "read the copy"))
  if (before instanceof WorkspaceError) return before
  if (!before.complete) {
    return new WorkspaceError({
      reason: "too_large",
      path: from,
      message: `${from} holds more than ${limits.maxFiles} files: a copy that large is not diffed; give a smaller directory`
    })
  }
  return { from: real, path, before }
}

/** What the workspace changed since the copy was made. */
export const changes = async (copy: Copy): Promise<Changes & { readonly after: Snapshot.Snapshot } | WorkspaceError> => {
  const after = await Snapshot.take(copy.path, limits, skipped).catch(io(copy.from, "read the workspace"))
  if (after instanceof WorkspaceError) return after
  if (!after.complete) {
    return new WorkspaceError({ reason: "too_large", path: copy.path, message: `the workspace holds more than ${limits.maxFiles} files: no diff` })
  }
  return { ...Snapshot.compare(copy.before, after), after }
}

/**
 * Writes the workspace's changes back to the directory it was copied from: changed and new files written, deleted
 * ones removed. First every path to change is checked to be in the directory as it was copied: otherwise `conflict`
 * naming the paths, and nothing is written. Links and other non-files made by the agent are not written (`skipped`).
 */
export const apply = async (copy: Copy): Promise<Applied | WorkspaceError> => {
  const found = await changes(copy)
  if (found instanceof WorkspaceError) return found
  const conflicts: Array<string> = []
  for (const path of found.changedFiles) {
    const now = await Snapshot.entryAt(copy.from, path, limits).catch(() => ({ kind: "other" as const }))
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
  const notWritten: Array<string> = []
  for (const path of found.changedFiles) {
    const entry = found.after.entries.get(path)
    const target = join(copy.from, path)
    try {
      if (entry === undefined) {
        await fs.unlink(target).catch((error) => (codeOf(error) === "ENOENT" ? undefined : Promise.reject(error)))
        removed.push(path)
      } else if (entry.kind === "file") {
        const source = join(copy.path, path)
        const refused = await seed(copy.from, [[path, await fs.readFile(source)]], false)
        if (refused instanceof PathRefused) {
          return new WorkspaceError({ reason: refused.reason === "unsafe_task_id" ? "invalid_path" : refused.reason, path, message: refused.message })
        }
        // An executable the agent made stays one (seed writes 0644).
        const mode = (await fs.stat(source)).mode & 0o777
        if ((mode & 0o111) !== 0) await fs.chmod(target, mode)
        written.push(path)
      } else {
        notWritten.push(path)
      }
    } catch (error) {
      return io(path, `write ${path} back to ${copy.from}`)(error)
    }
  }
  return { written, removed, skipped: notWritten }
}

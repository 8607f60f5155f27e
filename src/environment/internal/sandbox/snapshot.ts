/**
 * What a workspace holds before and after a command, and the difference as `changedFiles` plus a unified diff
 * of the text files. Only regular files are read (a FIFO or a device left by a command is never opened) and
 * symbolic links are compared by their target, never followed.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import { join } from "node:path"
import { unifiedDiff } from "./diff.js"

/** One entry of a snapshot. `content` is kept for files up to the diff limit; larger ones only by hash. */
export type Entry =
  | { readonly kind: "file"; readonly size: number; readonly content?: Buffer; readonly hash?: string }
  | { readonly kind: "symlink"; readonly target: string }
  | { readonly kind: "other" }

/**
 * A workspace's files by relative path (`/`-separated). `complete` is false past a limit, and `stoppedAt` says which:
 * `files` (`maxFiles`) or `bytes` (`maxBytes`).
 */
export interface Snapshot {
  readonly entries: Map<string, Entry>
  readonly complete: boolean
  readonly stoppedAt?: "files" | "bytes" | undefined
}

/** Limits of a snapshot. */
export interface SnapshotLimits {
  /** Files larger than this are compared by hash and listed without a diff. */
  readonly maxDiffBytes: number
  /** Past this many entries the snapshot stops and no diff is made. */
  readonly maxFiles: number
  /** Past this many bytes of files in all (their sizes, before any is read) the snapshot stops; no limit when absent. */
  readonly maxBytes?: number | undefined
}

/** How large a tree is (`measure`): its entries and the bytes of its files, counted up to the limits. */
export interface Measured {
  readonly files: number
  readonly bytes: number
  readonly complete: boolean
  readonly stoppedAt?: "files" | "bytes" | undefined
}

/**
 * Walks the tree at `root` in name order, calling `visit` with every entry that is not a directory (directories are
 * entered, never followed through a link). Paths for which `skip` (relative, `/`-separated) answers true are left out
 * with all they hold. `visit` answers false to stop the walk.
 */
const walkTree = async (
  root: string,
  skip: ((relative: string) => boolean) | undefined,
  visit: (path: string, relative: string, dirent: import("node:fs").Dirent) => Promise<boolean>
): Promise<void> => {
  let going = true
  const walk = async (dir: string, prefix: string): Promise<void> => {
    let names: Array<import("node:fs").Dirent>
    try {
      names = await fs.readdir(dir, { withFileTypes: true })
    } catch (error) {
      // A directory the command made unreadable or removed meanwhile: nothing to compare inside it.
      if (isCode(error, "ENOENT") || isCode(error, "EACCES") || isCode(error, "ENOTDIR")) return
      throw error
    }
    names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    for (const dirent of names) {
      if (!going) return
      const path = join(dir, dirent.name)
      const relative = prefix === "" ? dirent.name : `${prefix}/${dirent.name}`
      if (skip?.(relative) === true) continue
      if (dirent.isDirectory()) await walk(path, relative)
      else going = await visit(path, relative, dirent)
    }
  }
  await walk(root, "")
}

/** A file's size by `lstat`, 0 when it is gone or unreadable (then it is read as `other`). */
const sizeOf = (path: string): Promise<number> =>
  fs.lstat(path).then((stat) => stat.size, (error) => (isCode(error, "ENOENT") || isCode(error, "EACCES") ? 0 : Promise.reject(error)))

/**
 * Reads the workspace at `root`. Paths for which `skip` answers true (relative; files or whole directories) are left
 * out: a copy of a user's directory leaves out every `.git`, so the agent's changes are compared, and written back,
 * outside them.
 */
export const take = async (root: string, limits: SnapshotLimits, skip?: (relative: string) => boolean): Promise<Snapshot> => {
  const entries = new Map<string, Entry>()
  let stoppedAt: "files" | "bytes" | undefined = undefined
  let bytes = 0
  await walkTree(root, skip, async (path, relative, dirent) => {
    if (entries.size >= limits.maxFiles) {
      stoppedAt = "files"
      return false
    }
    if (dirent.isSymbolicLink()) {
      entries.set(relative, { kind: "symlink", target: await fs.readlink(path).catch(() => "") })
    } else if (dirent.isFile()) {
      // Counted before the file is read: a file past the limit is never read (nor hashed).
      if (limits.maxBytes !== undefined) {
        bytes += await sizeOf(path)
        if (bytes > limits.maxBytes) {
          stoppedAt = "bytes"
          return false
        }
      }
      entries.set(relative, await readFile(path, limits.maxDiffBytes))
    } else {
      entries.set(relative, { kind: "other" })
    }
    return true
  })
  return { entries, complete: stoppedAt === undefined, stoppedAt }
}

/**
 * Counts the entries of the tree at `root` and the bytes of its files, without reading any, stopping past
 * `limits.maxFiles` or `limits.maxBytes`: what a directory is checked with before it is copied.
 */
export const measure = async (root: string, limits: SnapshotLimits, skip?: (relative: string) => boolean): Promise<Measured> => {
  let files = 0
  let bytes = 0
  let stoppedAt: "files" | "bytes" | undefined = undefined
  await walkTree(root, skip, async (path, _relative, dirent) => {
    if (files >= limits.maxFiles) {
      stoppedAt = "files"
      return false
    }
    files++
    if (dirent.isFile()) {
      bytes += await sizeOf(path)
      if (limits.maxBytes !== undefined && bytes > limits.maxBytes) {
        stoppedAt = "bytes"
        return false
      }
    }
    return true
  })
  return { files, bytes, complete: stoppedAt === undefined, stoppedAt }
}

const readFile = async (path: string, maxDiffBytes: number): Promise<Entry> => {
  try {
    const stat = await fs.lstat(path)
    if (stat.size <= maxDiffBytes) {
      const content = await fs.readFile(path)
      return { kind: "file", size: content.length, content }
    }
    const hash = createHash("sha256")
    const handle = await fs.open(path, "r")
    try {
      for await (const chunk of handle.createReadStream()) hash.update(chunk as Buffer)
    } finally {
      await handle.close()
    }
    return { kind: "file", size: stat.size, hash: hash.digest("hex") }
  } catch (error) {
    if (isCode(error, "ENOENT") || isCode(error, "EACCES")) return { kind: "other" }
    throw error
  }
}

/**
 * The entry of one path under `root` as `take` would read it, or `undefined` when nothing (or a directory) is there:
 * what a copy applied back checks first, that the user's file is still the one the copy was made from.
 */
export const entryAt = async (root: string, relative: string, limits: SnapshotLimits): Promise<Entry | undefined> => {
  const path = join(root, relative)
  const stat = await fs.lstat(path).catch((error) => (isCode(error, "ENOENT") || isCode(error, "ENOTDIR") ? undefined : Promise.reject(error)))
  if (stat === undefined || stat.isDirectory()) return undefined
  if (stat.isSymbolicLink()) return { kind: "symlink", target: await fs.readlink(path).catch(() => "") }
  if (stat.isFile()) return readFile(path, limits.maxDiffBytes)
  return { kind: "other" }
}

const isCode = (error: unknown, code: string): boolean =>
  typeof error === "object" && error !== null && (error as { code?: unknown }).code === code

/** Whether two entries hold the same thing (content, or hash for large files; a link's target). */
export const sameEntry = (a: Entry, b: Entry): boolean => {
  if (a.kind !== b.kind) return false
  if (a.kind === "symlink") return a.target === (b as typeof a).target
  if (a.kind === "other") return true
  const other = b as typeof a
  if (a.size !== other.size) return false
  if (a.content !== undefined && other.content !== undefined) return a.content.equals(other.content)
  return a.hash !== undefined && a.hash === other.hash
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** The text of a file entry, or `undefined` when it is binary (a NUL byte, invalid UTF-8) or too large. */
const textOf = (entry: Entry | undefined): string | undefined => {
  if (entry === undefined || entry.kind !== "file" || entry.content === undefined) return undefined
  const content = entry.content
  if (content.subarray(0, 8000).includes(0)) return undefined
  try {
    return utf8.decode(content)
  } catch {
    return undefined
  }
}

/** What changed between two snapshots. */
export interface Changes {
  /** Every added, modified or deleted path, sorted. */
  readonly changedFiles: Array<string>
  /** The unified diff of the changed text files (binary and large files are only in `changedFiles`). */
  readonly diff: string
}

/** Compares two snapshots of one workspace. */
export const compare = (before: Snapshot, after: Snapshot): Changes => {
  const paths = new Set([...before.entries.keys(), ...after.entries.keys()])
  const changedFiles: Array<string> = []
  const parts: Array<string> = []
  for (const path of [...paths].sort()) {
    const a = before.entries.get(path)
    const b = after.entries.get(path)
    if (a !== undefined && b !== undefined && sameEntry(a, b)) continue
    changedFiles.push(path)
    const textA = a === undefined ? undefined : textOf(a)
    const textB = b === undefined ? undefined : textOf(b)
    // A side that exists but is not text (binary, large, a link) makes the file undiffable.
    if ((a !== undefined && textA === undefined) || (b !== undefined && textB === undefined)) continue
    parts.push(unifiedDiff(path, textA, textB))
  }
  return { changedFiles, diff: parts.join("") }
}

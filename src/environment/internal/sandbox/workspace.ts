/**
 * Workspace directories: created under the work root, seeded from `relativePath -> content` with every path
 * checked (no absolute paths, no `..`, nothing written through a symbolic link), handed to a pooled uid before
 * a run, removed when done.
 */
import * as fs from "node:fs/promises"
import { basename, dirname, join, posix, sep } from "node:path"

/** Why a path or task id was refused. */
export type Refusal = "unsafe_task_id" | "absolute_path" | "parent_path" | "invalid_path" | "symlink_escape"

/** A refused path: what and why, in words. */
export class PathRefused {
  constructor(readonly reason: Refusal, readonly path: string, readonly message: string) {}
}

/** Checks a seed path and answers it normalized (`/`-separated, no `.` segments), or why it is refused. */
export const checkRelativePath = (path: string): string | PathRefused => {
  if (path === "" || path.includes("\0")) {
    return new PathRefused("invalid_path", path, `workspace path ${JSON.stringify(path)} is empty or contains a NUL byte`)
  }
  if (path.startsWith("/") || path.startsWith("\\") || /^[A-Za-z]:/.test(path)) {
    return new PathRefused("absolute_path", path, `workspace path ${JSON.stringify(path)} is absolute: give a path relative to the workspace`)
  }
  const segments = path.split(/[\\/]/)
  if (segments.includes("..")) {
    return new PathRefused("parent_path", path, `workspace path ${JSON.stringify(path)} contains '..': it could leave the workspace`)
  }
  const normalized = posix.normalize(segments.filter((segment) => segment !== "" && segment !== ".").join("/"))
  if (normalized === "" || normalized === ".") {
    return new PathRefused("invalid_path", path, `workspace path ${JSON.stringify(path)} names the workspace itself, not a file`)
  }
  return normalized
}

const isCode = (error: unknown, code: string): boolean =>
  typeof error === "object" && error !== null && (error as { code?: unknown }).code === code

/**
 * Writes the seed files into `root`. Each parent directory is created or checked one segment at a time with
 * `lstat`, so a symbolic link left by an earlier command (`evil -> /etc`) is refused instead of followed.
 * With `onlyMissing`, files that already exist are left as they are (a kept workspace keeps its edits). `addMode`
 * (bits such as `0o111`) is added to each written file's mode through its open handle: a file keeps its own mode
 * (a new one 0644), plus those bits.
 */
export const seed = async (
  root: string,
  files: ReadonlyArray<readonly [string, string | Uint8Array]>,
  onlyMissing: boolean,
  addMode = 0
): Promise<PathRefused | undefined> => {
  const checked: Array<readonly [string, string | Uint8Array]> = []
  for (const [path, content] of files) {
    const normalized = checkRelativePath(path)
    if (normalized instanceof PathRefused) return normalized
    checked.push([normalized, content])
  }
  // Directories first, one segment at a time and each once; then the files, all at once (each write is guarded on
  // its own, below): a seed of n files waits for about one write, not n in a row. The same path twice: the last wins.
  const checkedDirs = new Set<string>()
  const writes = new Map<string, { readonly segments: ReadonlyArray<string>; readonly content: string | Uint8Array }>()
  for (const [path, content] of checked) {
    const segments = path.split("/")
    let dir = root
    for (const segment of segments.slice(0, -1)) {
      dir = join(dir, segment)
      if (checkedDirs.has(dir)) continue
      const stat = await fs.lstat(dir).catch((error) => (isCode(error, "ENOENT") ? undefined : Promise.reject(error)))
      if (stat === undefined) await fs.mkdir(dir)
      else if (stat.isSymbolicLink()) {
        return new PathRefused("symlink_escape", path, `workspace path ${JSON.stringify(path)} goes through the symbolic link ${JSON.stringify(dir.slice(root.length + 1))}`)
      } else if (!stat.isDirectory()) {
        return new PathRefused("invalid_path", path, `workspace path ${JSON.stringify(path)}: ${JSON.stringify(dir.slice(root.length + 1))} is not a directory`)
      }
      checkedDirs.add(dir)
    }
    writes.delete(path)
    writes.set(path, { segments, content })
  }
  if (writes.size === 0) return undefined
  // Resolved once for all the files: the root is ours, made or checked by the caller.
  const rootReal = await fs.realpath(root)
  const refusals = await Promise.all([...writes].map(async ([path, { segments, content }]): Promise<PathRefused | undefined> => {
    const target = join(root, path)
    const stat = await fs.lstat(target).catch((error) => (isCode(error, "ENOENT") ? undefined : Promise.reject(error)))
    if (stat?.isSymbolicLink() === true) {
      return new PathRefused("symlink_escape", path, `workspace path ${JSON.stringify(path)} is a symbolic link: writing it would write outside the workspace`)
    }
    if (stat !== undefined && !stat.isFile()) {
      return new PathRefused("invalid_path", path, `workspace path ${JSON.stringify(path)} exists and is not a regular file`)
    }
    if (stat !== undefined && onlyMissing) return undefined
    // The file is opened in its directory as opened and checked here, not by its path again: a command running beside
    // the write (a workspace's) may have put a link where a directory of the path was since the `lstat`s above. The
    // directory's handle is checked to be inside `root` by its own path (`/proc/self/fd`); the file is opened through
    // it (what `openat` does). O_NOFOLLOW: a link created where the file is is not followed either.
    const parent = segments.length > 1 ? join(root, ...segments.slice(0, -1)) : root
    const opened = await openIn(rootReal, parent, segments[segments.length - 1]!)
    if (opened instanceof PathRefused) return new PathRefused(opened.reason, path, opened.message.replace("{path}", JSON.stringify(path)))
    const handle = opened
    try {
      await handle.writeFile(content)
      if (addMode !== 0) {
        const mode = (await handle.stat()).mode & 0o7777
        if ((mode | addMode) !== mode) await handle.chmod(mode | addMode)
      }
    } finally {
      await handle.close()
    }
    return undefined
  }))
  // The first refused, in the order the files were given.
  return refusals.find((refused) => refused !== undefined)
}

const writeFlags = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_NOFOLLOW

/**
 * Opens `name` in the directory `parent` for writing, through the directory's handle once it is checked to be inside
 * `rootReal` (the workspace's real path); where `/proc` cannot tell (not Linux), by its path, as before.
 */
const openIn = async (rootReal: string, parent: string, name: string): Promise<fs.FileHandle | PathRefused> => {
  let directory: fs.FileHandle
  try {
    directory = await fs.open(parent, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW)
  } catch (error) {
    if (isCode(error, "ELOOP") || isCode(error, "ENOTDIR")) {
      return new PathRefused("symlink_escape", "", "workspace path {path} went through a symbolic link made while it was written")
    }
    throw error
  }
  try {
    const where = await fs.readlink(`/proc/self/fd/${directory.fd}`).catch(() => undefined)
    if (where === undefined) return await fs.open(join(parent, name), writeFlags, 0o644)
    if (where !== rootReal && !where.startsWith(rootReal + sep)) {
      return new PathRefused("symlink_escape", "", "workspace path {path} went through a symbolic link to outside the workspace, made while it was written")
    }
    return await fs.open(`/proc/self/fd/${directory.fd}/${name}`, writeFlags, 0o644)
  } finally {
    await directory.close()
  }
}

/** Gives the whole tree to `uid` (links themselves, never their targets). */
export const chownTree = async (root: string, uid: number): Promise<void> => {
  await fs.lchown(root, uid, uid)
  const entries = await fs.readdir(root, { withFileTypes: true, recursive: true })
  await Promise.all(entries.map((entry) => fs.lchown(join(entry.parentPath, entry.name), uid, uid).catch(() => undefined)))
}

/**
 * Takes a directory tree out of the way at once (renamed to a hidden name beside it, one system call) and answers
 * the removal of what it became (`done`, never failing), to be awaited later: a workspace is gone from its path when
 * its scope closes, and the files are deleted off the way of the next run. Where the rename fails, removes it in place.
 */
export const removeLater = async (path: string): Promise<{ readonly done: Promise<void> }> => {
  const aside = join(dirname(path), `.removed-${basename(path)}`)
  try {
    await fs.rename(path, aside)
  } catch {
    await remove(path).catch(() => undefined)
    return { done: Promise.resolve() }
  }
  return { done: remove(aside).catch(() => undefined) }
}

/** Removes a directory tree; a missing one is fine. */
export const remove = (path: string): Promise<void> => fs.rm(path, { recursive: true, force: true, maxRetries: 3 })

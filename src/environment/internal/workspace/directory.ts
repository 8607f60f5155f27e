/**
 * The workspace on disk: a directory (a sandbox's workspace, or one of the user's). Every path is checked as the
 * sandbox checks seed paths, then resolved: what resolves outside the directory through a symbolic link is refused
 * (`symlink_escape`), writes go through the sandbox's `seed` (no symbolic link on the way, `O_NOFOLLOW` at the end),
 * and `list`, `glob` and `grep` never follow a link (a link to `/etc` is listed as a link, its files not searched).
 */
import type { Dirent } from "node:fs"
import * as fs from "node:fs/promises"
import { join as joinPath, sep } from "node:path"
import { Effect } from "effect"
import { PathRefused, seed } from "../sandbox/workspace.js"
import type { Edit, Entry, GlobOptions, GrepOptions, Match, ReadOptions, Service } from "./types.js"
import { WorkspaceError } from "./types.js"
import * as Shared from "./shared.js"

/** Files a `glob` or `grep` walks at most; past it their answer is `truncated`. */
const maxWalkFiles = 100_000

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null ? (error as { code?: string }).code : undefined

const ioError = (path: string, what: string) => (error: unknown) =>
  Shared.fail("io", path, `cannot ${what} ${path === "" ? "the workspace" : path}: ${error instanceof Error ? error.message : String(error)}`)

/** A workspace over the directory `root` (which must exist). */
export const make = (root: string): Effect.Effect<Service, WorkspaceError> =>
  Effect.map(
    Effect.tryPromise({ try: () => fs.realpath(root), catch: ioError(root, "open the workspace directory") }),
    (rootReal) => makeAt(rootReal)
  )

const makeAt = (rootReal: string): Service => {
  const absolute = (relative: string): string => (relative === "" ? rootReal : joinPath(rootReal, relative))
  const inside = (real: string): boolean => real === rootReal || real.startsWith(rootReal + sep)

  /**
   * The real path of an existing `relative`, checked to be inside the workspace; `not_found` when it does not exist
   * (a dangling link included).
   */
  const resolve = (relative: string): Effect.Effect<string, WorkspaceError> =>
    Effect.flatMap(
      Effect.tryPromise({ try: () => fs.realpath(absolute(relative)).catch((error) => (codeOf(error) === "ENOENT" || codeOf(error) === "ENOTDIR" ? undefined : Promise.reject(error))), catch: ioError(relative, "resolve") }),
      (real) =>
        real === undefined
          ? Effect.fail(Shared.fail("not_found", relative, `${relative === "" ? "the workspace" : relative} does not exist`))
          : inside(real)
          ? Effect.succeed(real)
          : Effect.fail(Shared.fail("symlink_escape", relative, `${relative} is (or goes through) a symbolic link to outside the workspace`))
    )

  const statOf = (relative: string, real: string) => Effect.tryPromise({ try: () => fs.stat(real), catch: ioError(relative, "read") })

  const fileText = (path: string): Effect.Effect<{ readonly path: string; readonly text: string }, WorkspaceError> =>
    Effect.gen(function*() {
      const checked = Shared.checkFile(path)
      if (checked instanceof WorkspaceError) return yield* checked
      const real = yield* resolve(checked)
      return yield* readInside(checked, real)
    })

  /**
   * A file's text read through one handle, checked once open: a command of the sandbox (running beside this call) may
   * put a link where the file or one of its directories was after it was resolved or listed. `O_NOFOLLOW` refuses a
   * link at the end; the handle's own path (`/proc/self/fd`) tells whether a directory on the way became one.
   */
  const readInside = (checked: string, real: string): Effect.Effect<{ readonly path: string; readonly text: string }, WorkspaceError> =>
    Effect.acquireUseRelease(
      Effect.tryPromise({
        try: () => fs.open(real, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK),
        catch: (error) =>
          codeOf(error) === "ELOOP"
            ? Shared.fail("symlink_escape", checked, `${checked} became a symbolic link while it was read`)
            : ioError(checked, "read")(error)
      }),
      (handle) =>
        Effect.gen(function*() {
          const opened = yield* Effect.promise(() => fs.readlink(`/proc/self/fd/${handle.fd}`).catch(() => real))
          if (!inside(opened)) {
            return yield* Shared.fail("symlink_escape", checked, `${checked} went through a symbolic link to outside the workspace while it was read`)
          }
          const stat = yield* Effect.tryPromise({ try: () => handle.stat(), catch: ioError(checked, "read") })
          if (stat.isDirectory()) return yield* Shared.fail("not_a_file", checked, `${checked} is a directory, not a file: list it instead`)
          if (!stat.isFile()) return yield* Shared.fail("not_a_file", checked, `${checked} is not a regular file`)
          if (stat.size > Shared.maxFileBytes) return yield* Shared.fail("too_large", checked, `${checked} is larger than ${Shared.maxFileBytes} bytes: read it in a command instead`)
          const text = yield* Effect.tryPromise({ try: () => handle.readFile("utf8"), catch: ioError(checked, "read") })
          return { path: checked, text }
        }),
      (handle) => Effect.promise(() => handle.close().catch(() => undefined))
    )

  /** Where a directory argument resolves: its checked path and its real path, which must be a directory. */
  const directory = (path: string | undefined): Effect.Effect<{ readonly path: string; readonly real: string }, WorkspaceError> =>
    Effect.gen(function*() {
      const checked = Shared.checkDirectory(path)
      if (checked instanceof WorkspaceError) return yield* checked
      const real = yield* resolve(checked)
      const stat = yield* statOf(checked, real)
      if (!stat.isDirectory()) return yield* Shared.fail("not_a_directory", checked, `${checked} is a file, not a directory`)
      return { path: checked, real }
    })

  /**
   * Writes through the sandbox's `seed`, after the checks that name what is in the way: a file where a directory of
   * the path should be, a directory where the file should be.
   */
  const writeFile = (path: string, content: string): Effect.Effect<boolean, WorkspaceError> =>
    Effect.gen(function*() {
      const segments = path.split("/")
      for (let i = 1; i < segments.length; i++) {
        const parent = segments.slice(0, i).join("/")
        const stat = yield* Effect.promise(() => fs.lstat(absolute(parent)).catch(() => undefined))
        if (stat === undefined) break
        if (stat.isFile()) return yield* Shared.fail("not_a_directory", path, `cannot write ${path}: ${parent} is a file, not a directory`)
      }
      const before = yield* Effect.promise(() => fs.lstat(absolute(path)).catch(() => undefined))
      if (before?.isDirectory() === true) return yield* Shared.fail("not_a_file", path, `cannot write ${path}: it is a directory`)
      const refused = yield* Effect.tryPromise({ try: () => seed(rootReal, [[path, content]], false), catch: ioError(path, "write") })
      if (refused instanceof PathRefused) {
        const reason = refused.reason === "unsafe_task_id" ? "invalid_path" : refused.reason
        return yield* Shared.fail(reason, path, refused.message)
      }
      return before === undefined
    })

  /**
   * The entries of the directory `real`, read through a handle checked inside the workspace once open: a command of
   * the sandbox may have put a link where it was since it was resolved or listed (`O_NOFOLLOW` refuses one at the
   * end; the handle's own path, one on the way). `undefined` when it is no longer a directory of the workspace.
   */
  const readdirInside = async (real: string): Promise<Array<Dirent> | undefined> => {
    let handle: fs.FileHandle
    try {
      handle = await fs.open(real, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW)
    } catch (error) {
      if (codeOf(error) === "ELOOP" || codeOf(error) === "ENOTDIR") return undefined
      throw error
    }
    try {
      const opened = `/proc/self/fd/${handle.fd}`
      const where = await fs.readlink(opened).catch(() => undefined)
      // Without /proc (not Linux): by its path, as before.
      if (where === undefined) return await fs.readdir(real, { withFileTypes: true })
      return inside(where) ? await fs.readdir(opened, { withFileTypes: true }) : undefined
    } finally {
      await handle.close()
    }
  }

  /** The files under a directory (real path `real`, workspace path `dir`), sorted, never following a link. */
  const walk = (dir: string, real: string): Effect.Effect<{ readonly files: Array<string>; readonly truncated: boolean }, WorkspaceError> =>
    Effect.tryPromise({
      try: async () => {
        const files: Array<string> = []
        const pending: Array<readonly [string, string]> = [[dir, real]]
        while (pending.length > 0) {
          const [relative, at] = pending.pop()!
          const entries = await readdirInside(at)
          // The directory became a link (to outside, maybe) since it was listed: not walked.
          if (entries === undefined) continue
          for (const entry of entries) {
            const path = Shared.join(relative, entry.name)
            if (entry.isDirectory()) pending.push([path, joinPath(at, entry.name)])
            else if (entry.isFile()) {
              if (files.length === maxWalkFiles) return { files: files.sort(), truncated: true }
              files.push(path)
            }
          }
        }
        return { files: files.sort(), truncated: false }
      },
      catch: ioError(dir, "walk")
    })

  return {
    location: rootReal,
    list: (path) =>
      Effect.gen(function*() {
        const dir = yield* directory(path)
        const entries = yield* Effect.tryPromise({ try: () => readdirInside(dir.real), catch: ioError(dir.path, "list") })
        if (entries === undefined) {
          return yield* Shared.fail("symlink_escape", dir.path, `${dir.path === "" ? "the workspace" : dir.path} became a symbolic link while it was listed`)
        }
        const listed: Array<Entry> = []
        for (const entry of entries) {
          const entryPath = Shared.join(dir.path, entry.name)
          if (entry.isSymbolicLink()) listed.push({ path: entryPath, kind: "symlink" })
          else if (entry.isDirectory()) listed.push({ path: entryPath, kind: "directory" })
          else if (entry.isFile()) {
            const stat = yield* Effect.promise(() => fs.lstat(joinPath(dir.real, entry.name)).catch(() => undefined))
            listed.push({ path: entryPath, kind: "file", size: stat?.size ?? 0 })
          }
        }
        return listed.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
      }),
    read: (path, options?: ReadOptions) =>
      Effect.flatMap(fileText(path), ({ path, text }) => {
        const lines = Shared.numbered(path, text, options)
        return lines instanceof WorkspaceError ? Effect.fail(lines) : Effect.succeed(lines)
      }),
    readText: (path) => Effect.map(fileText(path), ({ text }) => text),
    write: (path, content) =>
      Effect.gen(function*() {
        const checked = Shared.checkFile(path)
        if (checked instanceof WorkspaceError) return yield* checked
        const created = yield* writeFile(checked, content)
        return { path: checked, bytes: Buffer.byteLength(content, "utf8"), created }
      }),
    edit: (path, edit: Edit) =>
      Effect.gen(function*() {
        const file = yield* fileText(path)
        const edited = Shared.applyEdit(file.path, file.text, edit)
        if (edited instanceof WorkspaceError) return yield* edited
        yield* writeFile(file.path, edited.text)
        return { path: file.path, replacements: edited.replacements }
      }),
    glob: (pattern, options?: GlobOptions) =>
      Effect.gen(function*() {
        const checked = Shared.checkPattern(pattern)
        if (checked instanceof WorkspaceError) return yield* checked
        const dir = yield* directory(options?.path)
        const walked = yield* walk(dir.path, dir.real)
        const found = Shared.globOf(walked.files, dir.path, checked, options)
        if (found instanceof WorkspaceError) return yield* found
        return { paths: found.paths, truncated: found.truncated || walked.truncated }
      }),
    grep: (text, options?: GrepOptions) =>
      Effect.gen(function*() {
        const matcher = Shared.grepMatcher(text, options)
        if (matcher instanceof WorkspaceError) return yield* matcher
        const where = Shared.checkDirectory(options?.path)
        if (where instanceof WorkspaceError) return yield* where
        const real = yield* resolve(where)
        const stat = yield* statOf(where, real)
        const single = stat.isFile()
        const walked = single ? { files: [where], truncated: false } : yield* walk(where, real)
        const found: Array<Match> = []
        for (const file of walked.files) {
          const relative = single ? file.slice(file.lastIndexOf("/") + 1) : where === "" ? file : file.slice(where.length + 1)
          if (!Shared.passesGlob(relative, matcher.glob)) continue
          const at = single ? real : joinPath(real, relative)
          // Through a checked handle: a file that became a link (or too large, or no file) since the walk is skipped.
          const read = yield* Effect.catchIf(
            readInside(file, at),
            (error) => error.reason !== "io",
            () => Effect.succeed(undefined)
          )
          if (read === undefined) continue
          if (Shared.grepText(file, read.text, matcher.test, found, matcher.limit)) return { matches: found, truncated: true }
        }
        return { matches: found, truncated: walked.truncated }
      }),
    run: undefined
  }
}

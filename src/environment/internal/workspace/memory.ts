/**
 * The workspace in memory: a map of path → text, directories implied by the paths (as git sees a tree). For tests
 * and runs that need no processes; it answers exactly as the directory layer does (the conformance suite runs both).
 */
import { Effect } from "effect"
import type { Edit, Entry, GlobOptions, GrepOptions, Match, Matches, ReadOptions, Service } from "./types.js"
import { WorkspaceError } from "./types.js"
import * as Shared from "./shared.js"

const bytes = (text: string): number => Buffer.byteLength(text, "utf8")

/** A workspace in memory seeded with `files` (paths checked as any other). */
export const make = (files: Readonly<Record<string, string>> = {}): Effect.Effect<Service, WorkspaceError> =>
  Effect.suspend(() => {
    const contents = new Map<string, string>()

    /** Whether some file lies under `path`, which is then a directory. */
    const isDirectory = (path: string): boolean => {
      if (path === "") return true
      for (const file of contents.keys()) if (file.startsWith(`${path}/`)) return true
      return false
    }

    const writeNow = (path: string, content: string): WorkspaceError | boolean => {
      // A file where a directory of the path should be: refused, as the disk refuses it.
      const segments = path.split("/")
      for (let i = 1; i < segments.length; i++) {
        const parent = segments.slice(0, i).join("/")
        if (contents.has(parent)) return Shared.fail("not_a_directory", path, `cannot write ${path}: ${parent} is a file, not a directory`)
      }
      if (isDirectory(path)) return Shared.fail("not_a_file", path, `cannot write ${path}: it is a directory`)
      const created = !contents.has(path)
      contents.set(path, content)
      return created
    }

    for (const [path, content] of Object.entries(files)) {
      const checked = Shared.checkFile(path)
      if (checked instanceof WorkspaceError) return Effect.fail(checked)
      const written = writeNow(checked, content)
      if (written instanceof WorkspaceError) return Effect.fail(written)
    }

    const fileText = (path: string): string | WorkspaceError => {
      const checked = Shared.checkFile(path)
      if (checked instanceof WorkspaceError) return checked
      const text = contents.get(checked)
      if (text !== undefined) {
        return bytes(text) > Shared.maxFileBytes
          ? Shared.fail("too_large", checked, `${checked} is larger than ${Shared.maxFileBytes} bytes: read it in a command instead`)
          : text
      }
      return isDirectory(checked)
        ? Shared.fail("not_a_file", checked, `${checked} is a directory, not a file: list it instead`)
        : Shared.fail("not_found", checked, `${checked} does not exist`)
    }

    const directory = (path: string | undefined): string | WorkspaceError => {
      const checked = Shared.checkDirectory(path)
      if (checked instanceof WorkspaceError) return checked
      if (contents.has(checked)) return Shared.fail("not_a_directory", checked, `${checked} is a file, not a directory`)
      if (!isDirectory(checked)) return Shared.fail("not_found", checked, `${checked} does not exist`)
      return checked
    }

    const sortedFiles = (): Array<string> => [...contents.keys()].sort()

    const service: Service = {
      location: "memory",
      list: (path) =>
        Effect.suspend(() => {
          const dir = directory(path)
          if (dir instanceof WorkspaceError) return Effect.fail(dir)
          const entries = new Map<string, Entry>()
          for (const file of contents.keys()) {
            if (!Shared.isWithin(file, dir) || file === dir) continue
            const rest = dir === "" ? file : file.slice(dir.length + 1)
            const slash = rest.indexOf("/")
            const name = slash === -1 ? rest : rest.slice(0, slash)
            const entryPath = Shared.join(dir, name)
            if (entries.has(entryPath)) continue
            entries.set(entryPath, slash === -1 ? { path: entryPath, kind: "file", size: bytes(contents.get(file)!) } : { path: entryPath, kind: "directory" })
          }
          return Effect.succeed([...entries.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)))
        }),
      read: (path, options?: ReadOptions) =>
        Effect.suspend(() => {
          const text = fileText(path)
          if (text instanceof WorkspaceError) return Effect.fail(text)
          const lines = Shared.numbered(Shared.checkFile(path) as string, text, options)
          return lines instanceof WorkspaceError ? Effect.fail(lines) : Effect.succeed(lines)
        }),
      readText: (path) =>
        Effect.suspend(() => {
          const text = fileText(path)
          return text instanceof WorkspaceError ? Effect.fail(text) : Effect.succeed(text)
        }),
      write: (path, content) =>
        Effect.suspend(() => {
          const checked = Shared.checkFile(path)
          if (checked instanceof WorkspaceError) return Effect.fail(checked)
          const created = writeNow(checked, content)
          return created instanceof WorkspaceError ? Effect.fail(created) : Effect.succeed({ path: checked, bytes: bytes(content), created })
        }),
      edit: (path, edit: Edit) =>
        Effect.suspend(() => {
          const text = fileText(path)
          if (text instanceof WorkspaceError) return Effect.fail(text)
          const checked = Shared.checkFile(path) as string
          const edited = Shared.applyEdit(checked, text, edit)
          if (edited instanceof WorkspaceError) return Effect.fail(edited)
          contents.set(checked, edited.text)
          return Effect.succeed({ path: checked, replacements: edited.replacements })
        }),
      glob: (pattern, options?: GlobOptions) =>
        Effect.suspend(() => {
          const checked = Shared.checkPattern(pattern)
          if (checked instanceof WorkspaceError) return Effect.fail(checked)
          const dir = directory(options?.path)
          if (dir instanceof WorkspaceError) return Effect.fail(dir)
          const found = Shared.globOf(sortedFiles(), dir, checked, options)
          return found instanceof WorkspaceError ? Effect.fail(found) : Effect.succeed(found)
        }),
      grep: (text, options?: GrepOptions) =>
        Effect.suspend((): Effect.Effect<Matches, WorkspaceError> => {
          const matcher = Shared.grepMatcher(text, options)
          if (matcher instanceof WorkspaceError) return Effect.fail(matcher)
          // A file or a directory may be searched.
          const where = Shared.checkDirectory(options?.path)
          if (where instanceof WorkspaceError) return Effect.fail(where)
          const single = contents.has(where)
          if (!single && !isDirectory(where)) return Effect.fail(Shared.fail("not_found", where, `${where} does not exist`))
          const found: Array<Match> = []
          for (const file of single ? [where] : sortedFiles()) {
            if (!single && !Shared.isWithin(file, where)) continue
            const relative = single ? file.slice(file.lastIndexOf("/") + 1) : where === "" ? file : file.slice(where.length + 1)
            if (!Shared.passesGlob(relative, matcher.glob)) continue
            const content = contents.get(file)!
            if (bytes(content) > Shared.maxFileBytes) continue
            if (Shared.grepText(file, content, matcher.test, found, matcher.limit)) return Effect.succeed({ matches: found, truncated: true })
          }
          return Effect.succeed({ matches: found, truncated: false })
        }),
      run: undefined
    }
    return Effect.succeed(service)
  })

import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as Workspace from "../../src/environment/Workspace.js"
import { testIsolation } from "../support/processes.js"
import { tempDirsOfFile } from "../support/tempDir.js"

const tempDir = tempDirsOfFile()

/** How a test gets a fresh, empty workspace of one kind. */
type Fresh = () => Layer.Layer<Workspace.Workspace, unknown>

let sandboxCount = 0
const sandboxService = Effect.runSync(Effect.cached(Sandbox.make({ isolation: testIsolation, workRoot: tempDir("valet-ws-sandbox-") })))

const kinds: ReadonlyArray<readonly [string, Fresh]> = [
  ["memory", () => Workspace.layerMemory()],
  ["directory", () => Workspace.layerDirectory(tempDir("valet-ws-dir-"))],
  ["sandbox", () =>
    Workspace.layerSandbox(`conformance-${++sandboxCount}`).pipe(
      Layer.provide(Layer.effect(Sandbox.Sandbox, sandboxService))
    )]
]

const reasonOf = <A>(effect: Effect.Effect<A, Workspace.WorkspaceError, Workspace.Workspace>) =>
  Effect.map(Effect.flip(effect), (error) => error.reason)

for (const [kind, fresh] of kinds) {
  describe(`Workspace conformance (${kind})`, () => {
    const test = (name: string, body: Effect.Effect<void, unknown, Workspace.Workspace>) =>
      it.live(name, () => Effect.scoped(Effect.provide(body, fresh())), 30_000)

    test("write, then read numbered lines with offset and limit", Effect.gen(function*() {
      const written = yield* Workspace.write("src/app.py", "one\ntwo\nthree\nfour\n")
      expect(written).toEqual({ path: "src/app.py", bytes: 19, created: true })
      expect((yield* Workspace.write("./src//app.py", "one\ntwo\nthree\nfour\n")).created).toBe(false)
      const all = yield* Workspace.read("src/app.py")
      expect(all).toEqual({ path: "src/app.py", content: "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour", startLine: 1, endLine: 4, totalLines: 4 })
      const part = yield* Workspace.read("src/app.py", { offset: 2, limit: 2 })
      expect(part).toMatchObject({ content: "     2\ttwo\n     3\tthree", startLine: 2, endLine: 3, totalLines: 4 })
      expect(yield* Workspace.readText("src/app.py")).toBe("one\ntwo\nthree\nfour\n")
      const past = yield* Effect.flip(Workspace.read("src/app.py", { offset: 9 }))
      expect(past.reason).toBe("invalid_argument")
      expect(past.message).toContain("has 4 lines")
      expect(yield* reasonOf(Workspace.read("src/app.py", { limit: 0 }))).toBe("invalid_argument")
      yield* Workspace.write("empty.txt", "")
      expect(yield* Workspace.read("empty.txt")).toEqual({ path: "empty.txt", content: "", startLine: 0, endLine: 0, totalLines: 0 })
      const long = "x".repeat(2_500)
      yield* Workspace.write("long.txt", `${long}\n`)
      expect((yield* Workspace.read("long.txt")).content).toBe(`     1\t${"x".repeat(2_000)}… [500 more characters]`)
    }))

    test("lists a directory: files with sizes, directories, in name order", Effect.gen(function*() {
      yield* Workspace.write("b.txt", "héllo")
      yield* Workspace.write("a/one.txt", "1")
      yield* Workspace.write("a/deep/two.txt", "22")
      expect(yield* Workspace.list()).toEqual([
        { path: "a", kind: "directory" },
        { path: "b.txt", kind: "file", size: 6 }
      ])
      expect(yield* Workspace.list("a")).toEqual([
        { path: "a/deep", kind: "directory" },
        { path: "a/one.txt", kind: "file", size: 1 }
      ])
      expect(yield* Workspace.list(".")).toHaveLength(2)
      expect(yield* reasonOf(Workspace.list("b.txt"))).toBe("not_a_directory")
      expect(yield* reasonOf(Workspace.list("nope"))).toBe("not_found")
    }))

    test("edit replaces an exact string once; absent or not unique is refused, saying which and how many", Effect.gen(function*() {
      yield* Workspace.write("m.py", "x = 1\ny = 1\nz = 1\nprint(x)\n")
      expect(yield* Workspace.edit("m.py", { oldString: "print(x)", newString: "print(x, '$&')" })).toEqual({ path: "m.py", replacements: 1 })
      expect(yield* Workspace.readText("m.py")).toBe("x = 1\ny = 1\nz = 1\nprint(x, '$&')\n")
      const absent = yield* Effect.flip(Workspace.edit("m.py", { oldString: "w = 1", newString: "w = 2" }))
      expect(absent).toMatchObject({ reason: "string_not_found", path: "m.py", occurrences: 0 })
      expect(absent.message).toContain("\"w = 1\"")
      const many = yield* Effect.flip(Workspace.edit("m.py", { oldString: " = 1", newString: " = 2" }))
      expect(many).toMatchObject({ reason: "string_not_unique", path: "m.py", occurrences: 3 })
      expect(many.message).toContain("occurs 3 times")
      // Nothing was changed by the refusals.
      expect(yield* Workspace.readText("m.py")).toBe("x = 1\ny = 1\nz = 1\nprint(x, '$&')\n")
      expect(yield* Workspace.edit("m.py", { oldString: " = 1", newString: " = 2", replaceAll: true })).toEqual({ path: "m.py", replacements: 3 })
      expect(yield* Workspace.readText("m.py")).toBe("x = 2\ny = 2\nz = 2\nprint(x, '$&')\n")
      expect(yield* reasonOf(Workspace.edit("missing.py", { oldString: "a", newString: "b" }))).toBe("not_found")
      expect(yield* reasonOf(Workspace.edit("m.py", { oldString: "", newString: "b" }))).toBe("invalid_argument")
    }))

    test("glob matches paths (** across directories, dot files only when asked), from a directory, up to a limit", Effect.gen(function*() {
      for (const path of ["a.py", "src/b.py", "src/c.ts", "src/sub/d.py", ".hidden/e.py", "src/.f.py"]) yield* Workspace.write(path, "")
      expect((yield* Workspace.glob("**/*.py")).paths).toEqual(["a.py", "src/b.py", "src/sub/d.py"])
      expect((yield* Workspace.glob("*.py")).paths).toEqual(["a.py"])
      expect((yield* Workspace.glob("src/*")).paths).toEqual(["src/b.py", "src/c.ts"])
      expect((yield* Workspace.glob("*.py", { path: "src" })).paths).toEqual(["src/b.py"])
      expect((yield* Workspace.glob(".hidden/*.py")).paths).toEqual([".hidden/e.py"])
      expect(yield* Workspace.glob("**/*.{py,ts}", { limit: 2 })).toEqual({ paths: ["a.py", "src/b.py"], truncated: true })
      expect(yield* Workspace.glob("*.rs")).toEqual({ paths: [], truncated: false })
      expect(yield* reasonOf(Workspace.glob("/etc/*"))).toBe("absolute_path")
      expect(yield* reasonOf(Workspace.glob("../**"))).toBe("parent_path")
      expect(yield* reasonOf(Workspace.glob("*", { path: "a.py" }))).toBe("not_a_directory")
    }))

    test("glob and grep refuse patterns whose matching would hold the event loop (extglob, brace ranges, many *)", Effect.gen(function*() {
      // Before: `*(a|a)c` matched against this 29-character name took 22 s; `{1..100000}` did not end in 20 s.
      yield* Workspace.write(`${"a".repeat(28)}b`, "x\n")
      yield* Workspace.write(`${"a".repeat(200)}b`, "x\n")
      const nines = `{${Array.from({ length: 9 }, (_, i) => i).join(",")}}`
      // The cheap ones first: on the code before, the first is a success (the test fails at once, not after minutes).
      for (const pattern of ["{a,{b,c}}", `${nines}${nines}`, "+(a|aa)", "*(a|a)c", "{1..100000}", "*a*a*a*a*c"]) {
        const error = yield* Effect.flip(Workspace.glob(pattern))
        expect(error.reason).toBe("invalid_argument")
        expect(error.message).toContain("glob pattern")
        expect(yield* reasonOf(Workspace.grep("x", { glob: pattern }))).toBe("invalid_argument")
      }
      // Plain globs still match.
      expect((yield* Workspace.glob("*a*b")).paths).toHaveLength(2)
      expect((yield* Workspace.glob("{a,b,c}*")).paths).toHaveLength(2)
    }))

    test("grep finds literal text (not a regular expression) in a directory, a file, by glob, ignoring case", Effect.gen(function*() {
      yield* Workspace.write("a.py", "def f(x):\n    return x.*2\n")
      yield* Workspace.write("lib/b.py", "# TODO: x.*2 again\nprint('ok')\n")
      yield* Workspace.write("lib/c.txt", "todo: x.*2\n")
      yield* Workspace.write("bin.dat", "x.*2\u0000\u0001")
      expect((yield* Workspace.grep("x.*2")).matches).toEqual([
        { path: "a.py", line: 2, text: "    return x.*2" },
        { path: "lib/b.py", line: 1, text: "# TODO: x.*2 again" },
        { path: "lib/c.txt", line: 1, text: "todo: x.*2" }
      ])
      expect((yield* Workspace.grep("todo", { ignoreCase: true, glob: "*.py" })).matches).toEqual([{ path: "lib/b.py", line: 1, text: "# TODO: x.*2 again" }])
      expect((yield* Workspace.grep("todo", { path: "lib" })).matches).toEqual([{ path: "lib/c.txt", line: 1, text: "todo: x.*2" }])
      expect((yield* Workspace.grep("print", { path: "lib/b.py" })).matches).toEqual([{ path: "lib/b.py", line: 2, text: "print('ok')" }])
      expect(yield* Workspace.grep("x.*2", { limit: 1 })).toEqual({ matches: [{ path: "a.py", line: 2, text: "    return x.*2" }], truncated: true })
      expect(yield* Workspace.grep("nothing here")).toEqual({ matches: [], truncated: false })
      expect(yield* reasonOf(Workspace.grep("x", { path: "nope" }))).toBe("not_found")
      expect(yield* reasonOf(Workspace.grep(""))).toBe("invalid_argument")
    }))

    test("paths are confined: absolute, '..', NUL and empty paths are typed errors naming the path", Effect.gen(function*() {
      const absolute = yield* Effect.flip(Workspace.read("/etc/passwd"))
      expect(absolute).toMatchObject({ _tag: "WorkspaceError", reason: "absolute_path", path: "/etc/passwd" })
      expect(yield* Effect.flip(Workspace.write("../escape.txt", "x"))).toMatchObject({ reason: "parent_path", path: "../escape.txt" })
      expect(yield* Effect.flip(Workspace.write("a/../../escape.txt", "x"))).toMatchObject({ reason: "parent_path" })
      expect(yield* Effect.flip(Workspace.edit("a\u0000b", { oldString: "a", newString: "b" }))).toMatchObject({ reason: "invalid_path" })
      expect(yield* reasonOf(Workspace.write("", "x"))).toBe("invalid_path")
      expect(yield* reasonOf(Workspace.list(".."))).toBe("parent_path")
      expect(yield* reasonOf(Workspace.list("/tmp"))).toBe("absolute_path")
      expect(yield* reasonOf(Workspace.grep("x", { path: "../" }))).toBe("parent_path")
      expect(yield* Workspace.list()).toEqual([])
    }))

    test("a file is not a directory, nor a directory a file", Effect.gen(function*() {
      yield* Workspace.write("f", "file")
      yield* Workspace.write("d/inner.txt", "x")
      expect(yield* reasonOf(Workspace.write("f/g.txt", "x"))).toBe("not_a_directory")
      expect(yield* reasonOf(Workspace.write("d", "x"))).toBe("not_a_file")
      expect(yield* reasonOf(Workspace.read("d"))).toBe("not_a_file")
      expect(yield* reasonOf(Workspace.read("nope.txt"))).toBe("not_found")
    }))
  })
}

describe("Workspace seeds", () => {
  it.effect("layerMemory takes seed files, checked like any path", () =>
    Effect.gen(function*() {
      const seeded = yield* Effect.provide(Workspace.readText("a/b.txt"), Workspace.layerMemory({ "a/b.txt": "seed" }))
      expect(seeded).toBe("seed")
      const refused = yield* Effect.flip(Effect.provide(Workspace.list(), Workspace.layerMemory({ "../x": "" })))
      expect(refused).toMatchObject({ reason: "parent_path", path: "../x" })
    }))
})

describe("Workspace on disk: symbolic links out of it are refused, for real", () => {
  it.live("read, write, edit, list, glob and grep never reach outside through a link", () =>
    Effect.gen(function*() {
      const outside = tempDir("valet-ws-outside-")
      writeFileSync(join(outside, "secret.txt"), "SECRET\n")
      const root = tempDir("valet-ws-links-")
      mkdirSync(join(root, "sub"))
      writeFileSync(join(root, "sub", "inside.txt"), "inside\n")
      symlinkSync(outside, join(root, "out"))
      symlinkSync(join(outside, "secret.txt"), join(root, "link.txt"))
      symlinkSync(join(root, "sub"), join(root, "inner"))
      symlinkSync(join(outside, "nothing-yet.txt"), join(root, "dangling.txt"))

      const checks = Effect.gen(function*() {
        expect(yield* Effect.flip(Workspace.read("link.txt"))).toMatchObject({ reason: "symlink_escape", path: "link.txt" })
        expect(yield* reasonOf(Workspace.read("out/secret.txt"))).toBe("symlink_escape")
        expect(yield* reasonOf(Workspace.readText("out/secret.txt"))).toBe("symlink_escape")
        expect(yield* reasonOf(Workspace.list("out"))).toBe("symlink_escape")
        expect(yield* reasonOf(Workspace.glob("*", { path: "out" }))).toBe("symlink_escape")
        expect(yield* reasonOf(Workspace.grep("SECRET", { path: "out" }))).toBe("symlink_escape")
        expect(yield* reasonOf(Workspace.edit("link.txt", { oldString: "SECRET", newString: "gone" }))).toBe("symlink_escape")
        expect(yield* reasonOf(Workspace.write("link.txt", "overwritten"))).toBe("symlink_escape")
        expect(yield* reasonOf(Workspace.write("out/new.txt", "planted"))).toBe("symlink_escape")
        expect(yield* reasonOf(Workspace.write("dangling.txt", "planted"))).toBe("symlink_escape")
        // Walks do not follow links: the secret is neither found nor searched.
        expect((yield* Workspace.glob("**/*")).paths).toEqual(["sub/inside.txt"])
        expect((yield* Workspace.grep("SECRET")).matches).toEqual([])
        expect(yield* Workspace.list()).toEqual([
          { path: "dangling.txt", kind: "symlink" },
          { path: "inner", kind: "symlink" },
          { path: "link.txt", kind: "symlink" },
          { path: "out", kind: "symlink" },
          { path: "sub", kind: "directory" }
        ])
        // A link that stays inside reads as its target.
        expect(yield* Workspace.readText("inner/inside.txt")).toBe("inside\n")
      })
      yield* Effect.provide(checks, Workspace.layerDirectory(root))
      // Nothing outside changed or appeared.
      expect(readFileSync(join(outside, "secret.txt"), "utf8")).toBe("SECRET\n")
      expect(existsSync(join(outside, "new.txt"))).toBe(false)
      expect(existsSync(join(outside, "nothing-yet.txt"))).toBe(false)
    }))
})

/**
 * Runs `effect` with one of `fs.promises`' functions hooked: `after` sees each call's arguments and result before
 * the caller does — where a test swaps a file for a link, as a command running beside the call could. Restored after.
 */
const withFsHook = <A, E>(
  name: "realpath" | "readdir" | "lstat",
  after: (args: ReadonlyArray<unknown>, result: unknown) => void,
  effect: Effect.Effect<A, E>
): Effect.Effect<A, E> =>
  Effect.gen(function*() {
    const fs = yield* Effect.promise(() => import("node:fs"))
    const { syncBuiltinESMExports } = yield* Effect.promise(() => import("node:module"))
    const promises = fs.promises as unknown as Record<string, (...args: Array<unknown>) => Promise<unknown>>
    const original = promises[name]!
    promises[name] = async (...args) => {
      const result = await original(...args)
      after(args, result)
      return result
    }
    syncBuiltinESMExports()
    return yield* Effect.ensuring(effect, Effect.sync(() => {
      promises[name] = original
      syncBuiltinESMExports()
    }))
  })

const names = (entries: unknown): ReadonlyArray<string> => (entries as ReadonlyArray<{ readonly name: string }>).map((entry) => entry.name)

describe("Workspace on disk: a file swapped for a link between the check and the read", () => {
  it.live("read refuses a file that became a link out of the workspace after its path was resolved", () =>
    Effect.gen(function*() {
      const outside = tempDir("valet-ws-swap-outside-")
      writeFileSync(join(outside, "secret.txt"), "SECRET\n")
      const root = tempDir("valet-ws-swap-")
      writeFileSync(join(root, "notes.txt"), "notes\n")
      // What a command of the sandbox, running beside the call, can do: once the path is resolved (its real path
      // checked), the file is replaced by a link to a file outside.
      let swapped = false
      const read = yield* withFsHook("realpath", (args) => {
        if (!swapped && String(args[0]).endsWith("notes.txt")) {
          swapped = true
          rmSync(join(root, "notes.txt"))
          symlinkSync(join(outside, "secret.txt"), join(root, "notes.txt"))
        }
      }, Effect.flip(Effect.provide(Workspace.readText("notes.txt"), Workspace.layerDirectory(root))))
      expect(swapped).toBe(true)
      expect(read).toMatchObject({ reason: "symlink_escape", path: "notes.txt" })
    }))
})

describe("Workspace on disk: a file swapped for a link between the walk and the search", () => {
  it.live("grep does not search a file that became a link out of the workspace after its directory was listed", () =>
    Effect.gen(function*() {
      const outside = tempDir("valet-ws-grepswap-outside-")
      writeFileSync(join(outside, "secret.txt"), "SECRET\n")
      const root = tempDir("valet-ws-grepswap-")
      writeFileSync(join(root, "notes.txt"), "notes\n")
      let swapped = false
      // Once the walk has listed the workspace (notes.txt a regular file), a command replaces the file by a link out.
      const found = yield* withFsHook("readdir", (_args, entries) => {
        if (!swapped && names(entries).includes("notes.txt")) {
          swapped = true
          rmSync(join(root, "notes.txt"))
          symlinkSync(join(outside, "secret.txt"), join(root, "notes.txt"))
        }
      }, Effect.provide(Workspace.grep("SECRET"), Workspace.layerDirectory(root)))
      expect(swapped).toBe(true)
      expect(found.matches).toEqual([])
    }))
})

describe("Workspace on disk: a directory swapped for a link between the check and the write", () => {
  it.live("write refuses a directory of the path that became a link out of the workspace after it was checked", () =>
    Effect.gen(function*() {
      const outside = tempDir("valet-ws-writeswap-outside-")
      const root = tempDir("valet-ws-writeswap-")
      mkdirSync(join(root, "sub"))
      let looks = 0
      // The directory checked twice (the workspace's check, then the write's own), then a command replaces it by a
      // link out.
      const written = yield* withFsHook("lstat", (args) => {
        if (String(args[0]) === join(root, "sub") && ++looks === 2) {
          rmSync(join(root, "sub"), { recursive: true })
          symlinkSync(outside, join(root, "sub"))
        }
      }, Effect.flip(Effect.provide(Workspace.write("sub/x.txt", "PLANTED"), Workspace.layerDirectory(root))))
      expect(looks).toBe(2)
      expect(existsSync(join(outside, "x.txt"))).toBe(false)
      expect(written).toMatchObject({ reason: "symlink_escape", path: "sub/x.txt" })
    }))
})

describe("Workspace on disk: a directory swapped for a link while the walk goes on", () => {
  it.live("glob does not walk into a directory that became a link out of the workspace after it was listed", () =>
    Effect.gen(function*() {
      const outside = tempDir("valet-ws-walkswap-outside-")
      writeFileSync(join(outside, "leak.txt"), "x\n")
      const root = tempDir("valet-ws-walkswap-")
      mkdirSync(join(root, "sub"))
      writeFileSync(join(root, "sub", "mine.txt"), "x\n")
      let swapped = false
      // Once the walk has listed the workspace (sub a directory), a command replaces sub by a link out.
      const found = yield* withFsHook("readdir", (_args, entries) => {
        if (!swapped && names(entries).includes("sub")) {
          swapped = true
          rmSync(join(root, "sub"), { recursive: true })
          symlinkSync(outside, join(root, "sub"))
        }
      }, Effect.provide(Workspace.glob("**/*"), Workspace.layerDirectory(root)))
      expect(swapped).toBe(true)
      // Before: the walk followed the link and answered sub/leak.txt, a file outside the workspace.
      expect(found.paths).toEqual([])
    }))
})

import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as Workspace from "../../src/environment/Workspace.js"
import * as Copy from "../../src/environment/internal/workspace/copy.js"
import { testIsolation } from "../support/processes.js"
import { tempDirsOfFile } from "../support/tempDir.js"

const tempDir = tempDirsOfFile()

const sandbox = Layer.effect(Sandbox.Sandbox, Sandbox.make({ isolation: testIsolation, workRoot: tempDir("valet-copy-root-") }))

/** A project: a text file, a binary one, an executable, a link inside, a `.git`. */
const project = (): string => {
  const dir = tempDir("valet-copy-project-")
  mkdirSync(join(dir, ".git"))
  mkdirSync(join(dir, "src"))
  writeFileSync(join(dir, ".git", "HEAD"), "ref: refs/heads/main\n")
  writeFileSync(join(dir, "src", "main.py"), "print('hi')\n")
  writeFileSync(join(dir, "logo.bin"), Buffer.from([0, 1, 2, 255]))
  writeFileSync(join(dir, "run.sh"), "#!/bin/sh\necho run\n")
  chmodSync(join(dir, "run.sh"), 0o755)
  symlinkSync("src/main.py", join(dir, "main-link"))
  return dir
}

const inCopy = <A, E>(dir: string, body: (copy: Workspace.SandboxCopy) => Effect.Effect<A, E, Workspace.Workspace>) =>
  Effect.scoped(Effect.flatMap(Workspace.makeSandboxCopy("copy", dir), (copy) => Effect.provideService(body(copy), Workspace.Workspace, copy.workspace))).pipe(
    Effect.provide(sandbox)
  )

describe("Workspace.makeSandboxCopy", () => {
  it.live("the agent works on a copy: binaries and links copied, .git left out; the diff of its changes; the directory untouched", () => {
    const dir = project()
    return inCopy(dir, (copy) =>
      Effect.gen(function*() {
        expect((yield* Workspace.list()).map((entry) => [entry.path, entry.kind])).toEqual([
          ["logo.bin", "file"],
          ["main-link", "symlink"],
          ["run.sh", "file"],
          ["src", "directory"]
        ])
        expect(yield* Workspace.readText("main-link")).toBe("print('hi')\n")
        expect([...readFileSync(join(copy.workspace.location, "logo.bin"))]).toEqual([0, 1, 2, 255])
        expect(yield* copy.changes).toEqual({ changedFiles: [], diff: "" })
        yield* Workspace.edit("src/main.py", { oldString: "hi", newString: "hello" })
        yield* Workspace.write("README.md", "# demo\n")
        // Scratch of the tools (large results) is not the agent's work: left out of the changes.
        yield* Workspace.write(".valet/tool_results/execute_1.txt", "x".repeat(100))
        const changes = yield* copy.changes
        expect(changes.changedFiles).toEqual(["README.md", "src/main.py"])
        expect(changes.diff).toBe(
          "--- /dev/null\n+++ b/README.md\n@@ -0,0 +1 @@\n+# demo\n" +
            "--- a/src/main.py\n+++ b/src/main.py\n@@ -1 +1 @@\n-print('hi')\n+print('hello')\n"
        )
        expect(readFileSync(join(dir, "src", "main.py"), "utf8")).toBe("print('hi')\n")
        expect(existsSync(join(dir, "README.md"))).toBe(false)
      }))
  })

  it.live("apply writes the changes back (a removal, a new executable kept one), never into .git; a link replaced by a directory is removed first", () => {
    const dir = project()
    return inCopy(dir, (copy) =>
      Effect.gen(function*() {
        const ws = copy.workspace
        yield* Workspace.write("src/main.py", "print('bye')\n")
        yield* Workspace.write(".git/hooks/pre-commit", "#!/bin/sh\nrm -rf ~\n")
        // Done by hand here, as a command in the workspace could: a file removed, a link replaced by a directory.
        rmSync(join(ws.location, "logo.bin"))
        rmSync(join(ws.location, "main-link"))
        mkdirSync(join(ws.location, "main-link"))
        writeFileSync(join(ws.location, "main-link", "evil.txt"), "through the link?\n")
        yield* Workspace.write("tool.sh", "#!/bin/sh\necho tool\n")
        chmodSync(join(ws.location, "tool.sh"), 0o755)
        const applied = yield* copy.apply
        expect(applied).toEqual({ written: ["main-link/evil.txt", "src/main.py", "tool.sh"], removed: ["logo.bin", "main-link"], skipped: [] })
        expect(readFileSync(join(dir, "src", "main.py"), "utf8")).toBe("print('bye')\n")
        expect(existsSync(join(dir, "logo.bin"))).toBe(false)
        expect(existsSync(join(dir, ".git", "hooks"))).toBe(false)
        expect(statSync(join(dir, "tool.sh")).mode & 0o777).toBe(0o755)
        // The link was removed before the directory was made: nothing was written to what it pointed to.
        expect(readFileSync(join(dir, "src", "main.py"), "utf8")).toBe("print('bye')\n")
        expect(readFileSync(join(dir, "main-link", "evil.txt"), "utf8")).toBe("through the link?\n")
      }))
  })

  it.live("apply refuses, writing nothing, when a file to change was changed in the directory since the copy", () => {
    const dir = project()
    return inCopy(dir, (copy) =>
      Effect.gen(function*() {
        yield* Workspace.write("src/main.py", "print('agent')\n")
        yield* Workspace.write("NEW.md", "new\n")
        writeFileSync(join(dir, "src", "main.py"), "print('user')\n")
        writeFileSync(join(dir, "NEW.md"), "mine\n")
        const error = yield* Effect.flip(copy.apply)
        expect(error.reason).toBe("conflict")
        expect(error.message).toBe(`NEW.md, src/main.py changed in ${dir} since it was copied: nothing written back (the diff still shows the agent's changes)`)
        expect(readFileSync(join(dir, "src", "main.py"), "utf8")).toBe("print('user')\n")
        expect(readlinkSync(join(dir, "main-link"))).toBe("src/main.py")
      }))
  })

  it.live("layerSandbox's from: each build of the layer is a fresh copy of the directory", () => {
    const dir = project()
    const layer = Workspace.layerSandbox("from", { from: dir, files: { "seed.txt": "seeded\n" } }).pipe(Layer.provide(sandbox))
    return Effect.gen(function*() {
      for (let i = 0; i < 2; i++) {
        yield* Effect.scoped(Effect.gen(function*() {
          expect((yield* Workspace.glob("**/*")).paths).toEqual(["logo.bin", "run.sh", "seed.txt", "src/main.py"])
          // The second build does not see the first one's edit.
          expect(yield* Workspace.readText("src/main.py")).toBe("print('hi')\n")
          yield* Workspace.write("src/main.py", "print('changed')\n")
        }).pipe(Effect.provide(layer)))
      }
      expect(readFileSync(join(dir, "src", "main.py"), "utf8")).toBe("print('hi')\n")
    })
  })

  it.live("a missing directory is a WorkspaceError naming it", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.scoped(Workspace.makeSandboxCopy("copy", "/nonexistent/valet-project")))
      expect(error).toMatchObject({ _tag: "WorkspaceError", reason: "not_found", message: "/nonexistent/valet-project: no such directory" })
    }).pipe(Effect.provide(sandbox)))
})

describe("Workspace.makeSandboxCopy: what is never written back (review of issue 30)", () => {
  it.live("a nested repository's .git (vendor/lib/.git, any case) is not copied, not in the changes and not written back", () => {
    const dir = tempDir("valet-copy-nested-git-")
    mkdirSync(join(dir, "vendor", "lib", ".git", "hooks"), { recursive: true })
    writeFileSync(join(dir, "vendor", "lib", ".git", "config"), "[core]\n")
    writeFileSync(join(dir, "vendor", "lib", "lib.py"), "x = 1\n")
    return inCopy(dir, (copy) =>
      Effect.gen(function*() {
        expect(existsSync(join(copy.workspace.location, "vendor", "lib", ".git"))).toBe(false)
        // A hook or an fsmonitor would run on the user's next git command.
        yield* Workspace.write("vendor/lib/.git/config", "[core]\n\tfsmonitor = touch /tmp/valet-pwned\n")
        yield* Workspace.write("vendor/lib/.git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/valet-pwned\n")
        yield* Workspace.write("sub/.GIT/hooks/post-checkout", "#!/bin/sh\n")
        yield* Workspace.write("vendor/lib/lib.py", "x = 2\n")
        expect((yield* copy.changes).changedFiles).toEqual(["vendor/lib/lib.py"])
        expect(yield* copy.apply).toEqual({ written: ["vendor/lib/lib.py"], removed: [], skipped: [] })
        expect(readFileSync(join(dir, "vendor", "lib", ".git", "config"), "utf8")).toBe("[core]\n")
        expect(existsSync(join(dir, "vendor", "lib", ".git", "hooks", "pre-commit"))).toBe(false)
        expect(existsSync(join(dir, "sub"))).toBe(false)
      }))
  })

  it.live("apply adds only execute bits: a file the agent made 0777 is written back 0755, one it made 0600 keeps its 0644", () => {
    const dir = tempDir("valet-copy-modes-")
    writeFileSync(join(dir, "run.sh"), "#!/bin/sh\n")
    chmodSync(join(dir, "run.sh"), 0o644)
    writeFileSync(join(dir, "notes.txt"), "a\n")
    chmodSync(join(dir, "notes.txt"), 0o644)
    return inCopy(dir, (copy) =>
      Effect.gen(function*() {
        yield* Workspace.write("run.sh", "#!/bin/sh\necho hi\n")
        yield* Workspace.write("notes.txt", "b\n")
        yield* Workspace.write("new.sh", "#!/bin/sh\n")
        // As a command in the workspace could.
        chmodSync(join(copy.workspace.location, "run.sh"), 0o777)
        chmodSync(join(copy.workspace.location, "notes.txt"), 0o600)
        chmodSync(join(copy.workspace.location, "new.sh"), 0o777)
        yield* copy.apply
        expect(statSync(join(dir, "run.sh")).mode & 0o7777).toBe(0o755)
        expect(statSync(join(dir, "notes.txt")).mode & 0o7777).toBe(0o644)
        expect(statSync(join(dir, "new.sh")).mode & 0o7777).toBe((0o644 & ~process.umask()) | 0o111)
      }))
  })

  it.live("apply checks the directories on the way before writing anything: a file made where the agent made a directory is a conflict, nothing written", () => {
    const dir = tempDir("valet-copy-parents-")
    writeFileSync(join(dir, "a.txt"), "a\n")
    mkdirSync(join(dir, "docs"))
    return inCopy(dir, (copy) =>
      Effect.gen(function*() {
        yield* Workspace.write("a.txt", "changed\n")
        yield* Workspace.write("build/out.txt", "x\n")
        yield* Workspace.write("docs/x.md", "x\n")
        // Meanwhile the user makes a file "build", and "docs" becomes a link elsewhere.
        writeFileSync(join(dir, "build"), "user's\n")
        rmSync(join(dir, "docs"), { recursive: true })
        symlinkSync(tempDir("valet-copy-elsewhere-"), join(dir, "docs"))
        const error = yield* Effect.flip(copy.apply)
        expect(error.reason).toBe("conflict")
        expect(error.message).toBe(
          `build/out.txt (build is not a directory in ${dir}), docs/x.md (docs is a symbolic link in ${dir}) changed in ${dir} since it was copied: ` +
            "nothing written back (the diff still shows the agent's changes)"
        )
        expect(readFileSync(join(dir, "a.txt"), "utf8")).toBe("a\n")
      }))
  })

  it.live("a directory past the limits is refused before anything is copied: too many files, too many bytes", () =>
    Effect.promise(async () => {
      const dir = tempDir("valet-copy-large-")
      for (let i = 0; i < 6; i++) writeFileSync(join(dir, `f${i}.txt`), "0123456789")
      const files = tempDir("valet-copy-target-")
      const tooMany = await Copy.make(dir, files, false, { maxDiffBytes: 1024, maxFiles: 5, maxBytes: 1024 })
      expect(tooMany).toMatchObject({ _tag: "WorkspaceError", reason: "too_large", message: `${dir} holds more than 5 files: a copy that large is not made; give a smaller directory` })
      expect(readdirSync(files)).toEqual([])
      const bytes = tempDir("valet-copy-target-")
      const tooBig = await Copy.make(dir, bytes, false, { maxDiffBytes: 1024, maxFiles: 100, maxBytes: 50 })
      expect(tooBig).toMatchObject({ _tag: "WorkspaceError", reason: "too_large", message: `${dir} holds more than 50 bytes of files: a copy that large is not made; give a smaller directory` })
      expect(readdirSync(bytes)).toEqual([])
    }))

  it.live("--workspace /: the root holds the sandbox's work root, refused before anything is read or copied", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.scoped(Workspace.makeSandboxCopy("copy", "/")))
      expect(error).toMatchObject({ _tag: "WorkspaceError", reason: "invalid_argument" })
      expect(error.message).toMatch(/^\/ holds the sandbox's work root/)
    }).pipe(Effect.provide(sandbox)))
})

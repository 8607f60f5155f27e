import { execFileSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { delimiter, join } from "node:path"
import { afterAll, describe, expect, it, layer } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Fiber, Layer, Schema } from "effect"
import * as ProcessLayer from "../../src/environment/internal/sandbox/processLayer.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import { bwrapWorks, marker, processesWith, skippedWithoutBwrap } from "../support/processes.js"

// Set before any layer is built: the sandbox must not pass them on.
process.env.VALET_TEST_SECRET = "s3cret"
process.env.HTTPS_PROXY = "http://proxy.invalid:3128"
process.env.no_proxy = "*"

const python = (code: string, ...args: Array<string>) => ["python3", "-c", code, ...args]

/** Waits (really) until `predicate` holds, polling every 20 ms, up to `ms`. */
const waitUntil = (predicate: () => boolean, ms = 5_000) =>
  Effect.gen(function*() {
    const until = Date.now() + ms
    while (!predicate()) {
      if (Date.now() > until) return yield* Effect.die(new Error("condition not reached in time"))
      yield* Effect.sleep("20 millis")
    }
  })

const roots: Array<string> = []
afterAll(() => {
  // A root whose layer was never built (a run filtered with -t) holds nothing to check.
  const left = roots.filter((root) => existsSync(join(root, "kept"))).map((root) => [readdirSync(root), readdirSync(join(root, "kept"))])
  for (const root of roots) rmSync(root, { recursive: true, force: true })
  // Nothing may be left behind but the (empty) directory of kept workspaces.
  for (const [entries, kept] of left) {
    expect(entries).toEqual(["kept"])
    expect(kept).toEqual([])
  }
})

const suite = (mode: "process" | "bwrap") => {
  const workRoot = mkdtempSync(join(tmpdir(), `valet-sandbox-test-${mode}-`))
  roots.push(workRoot)
  const options: Sandbox.Options = {
    isolation: mode,
    workRoot,
    graceMs: 300,
    maxOutputBytes: 10_000,
    limits: { maxProcesses: 32 }
  }

  layer(Sandbox.layerProcess(options), { timeout: "60 seconds", excludeTestServices: true })(`Sandbox (${mode} isolation)`, (it) => {
    it.effect("reports the isolation it uses", () =>
      Effect.gen(function*() {
        const info = yield* Sandbox.info
        expect(info.isolation).toBe(mode)
        expect(info.missing).toEqual([])
        const result = yield* Sandbox.runOnce("iso", {}, { command: python("print(1)") })
        expect(result.isolation).toBe(mode)
      }))

    it.effect("captures python3 output, with HOME the workspace and a scrubbed environment", () =>
      Effect.scoped(Effect.gen(function*() {
        const ws = yield* Sandbox.workspace("env-check", { "data/in.txt": "21\n" })
        const result = yield* Sandbox.run(ws, {
          command: python(
            "import json, os\nprint(int(open('data/in.txt').read()) * 2)\nprint(json.dumps(dict(os.environ)))"
          )
        })
        expect(result.exitCode).toBe(0)
        expect(result.error).toBeUndefined()
        const [answer, envLine] = result.stdout.trim().split("\n")
        expect(answer).toBe("42")
        const env = JSON.parse(envLine!) as Record<string, string>
        expect(env.HOME).toBe(ws.path)
        expect(env.PATH).toBeDefined()
        expect(env.VALET_TEST_SECRET).toBeUndefined()
        expect(Object.keys(env).filter((name) => /proxy/i.test(name))).toEqual([])
        expect(result.diff).toBe("")
        expect(result.changedFiles).toEqual([])
      })))

    it.effect("ast-grep rewrites a seeded file and the diff shows it", () =>
      Effect.scoped(Effect.gen(function*() {
        const ws = yield* Sandbox.workspace("astgrep", { "src/app.py": "def f(x):\n    print(x)\n    return x\n" })
        const result = yield* Sandbox.run(ws, {
          command: ["ast-grep", "run", "-p", "print($A)", "-r", "logger.info($A)", "-l", "python", "-U", "src"]
        })
        expect(result.exitCode).toBe(0)
        expect(result.changedFiles).toEqual(["src/app.py"])
        expect(result.diff).toBe(
          "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,3 +1,3 @@\n def f(x):\n-    print(x)\n+    logger.info(x)\n     return x\n"
        )
      })))

    // Issue 31 part 6: snapshots only where the diff is asked for.
    it.effect("diff: false answers no diff and no changed files (no snapshots); the default diffs the same edit", () =>
      Effect.scoped(Effect.gen(function*() {
        const ws = yield* Sandbox.workspace("nodiff", { "a.txt": "one\n" })
        const edit = (text: string) => python(`open('a.txt', 'w').write('${text}\\n')`)
        const quiet = yield* Sandbox.run(ws, { command: edit("two"), diff: false })
        expect(quiet.exitCode).toBe(0)
        expect(quiet).not.toHaveProperty("diff")
        expect(quiet).not.toHaveProperty("changedFiles")
        const diffed = yield* Sandbox.run(ws, { command: edit("three") })
        expect(diffed.changedFiles).toEqual(["a.txt"])
        expect(diffed.diff).toBe("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-two\n+three\n")
      })))

    it.effect("refuses programs off the allow-list, judged on the resolved executable", () =>
      Effect.scoped(Effect.gen(function*() {
        const ws = yield* Sandbox.workspace("refuse", {})
        const bash = yield* Sandbox.run(ws, { command: ["bash", "-c", "echo hi"] })
        expect(bash).toMatchObject({ exitCode: 126, error: "not_allowed", isolation: "none", stdout: "" })
        expect(bash.stderr).toContain("bash resolves to")
        const missing = yield* Sandbox.run(ws, { command: ["no-such-program-xyz"] })
        expect(missing).toMatchObject({ exitCode: 126, error: "not_allowed" })
        // A link named like an allowed program, pointing at a shell, is still a shell.
        yield* Sandbox.run(ws, { command: python("import os; os.symlink('/bin/sh', 'python3')") })
        const alias = yield* Sandbox.run(ws, { command: ["./python3", "-c", "echo pwned"] })
        expect(alias).toMatchObject({ exitCode: 126, error: "not_allowed" })
        // The allowed executable under another path is allowed.
        const info = yield* Sandbox.info
        const real = info.allowed.find((entry) => entry.name === "node")!.path
        const direct = yield* Sandbox.run(ws, { command: [real, "-e", "console.log(6 * 7)"] })
        expect(direct).toMatchObject({ exitCode: 0, stdout: "42\n" })
      })))

    it.effect("answers exit 127 invalid_command for anything but a non-empty list of strings", () =>
      Effect.scoped(Effect.gen(function*() {
        const ws = yield* Sandbox.workspace("invalid", {})
        for (const command of ["python3 -c 1", [], [1, 2], ["python3", { code: 1 }], null, undefined, ["python3", "a\0b"]]) {
          const result = yield* Sandbox.run(ws, { command })
          expect(result).toMatchObject({ exitCode: 127, error: "invalid_command", command: [], isolation: "none" })
          expect(result.stderr).toMatch(/^invalid_command: /)
        }
        // The message says which argument is wrong and how, on one line.
        const object = yield* Sandbox.run(ws, { command: ["python3", { code: 1 }] })
        expect(object.stderr).toBe(
          `invalid_command: a command is a non-empty list of strings; command: [1] must be a string, got {"code":1}\n`
        )
      })))

    it.effect("a timeout kills a process that ignores SIGTERM and its child, keeping the partial output", () =>
      Effect.gen(function*() {
        const mark = marker()
        const script = [
          "import signal, subprocess, sys, time",
          "signal.signal(signal.SIGTERM, signal.SIG_IGN)",
          `subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)', '${mark}'])`,
          "print('started', flush=True)",
          "time.sleep(60)"
        ].join("\n")
        const result = yield* Sandbox.runOnce("timeout", {}, { command: python(script, mark), timeoutMs: 1_500 })
        expect(result).toMatchObject({ exitCode: 124, timedOut: true, error: "timeout", stdout: "started\n" })
        // Both would sleep for a minute, past the test's own timeout: they were killed (SIGKILL after the 300 ms
        // grace period), not waited for. No bound on durationMs: it is wall-clock time.
        expect(processesWith(mark)).toEqual([])
      }))

    it.effect("a timeout sends SIGTERM to the command first (in bwrap too, where it has a session of its own)", () =>
      Effect.gen(function*() {
        const script = [
          "import signal, sys, time",
          "def stop(*_):",
          "    print('cleaned up', flush=True)",
          "    sys.exit(0)",
          "signal.signal(signal.SIGTERM, stop)",
          "print('started', flush=True)",
          "time.sleep(60)"
        ].join("\n")
        const result = yield* Sandbox.runOnce("graceful", {}, { command: python(script), timeoutMs: 1_000 })
        expect(result).toMatchObject({ exitCode: 124, timedOut: true, stdout: "started\ncleaned up\n" })
      }))

    it.effect("caps a process that prints forever and ends it", () =>
      Effect.gen(function*() {
        const result = yield* Sandbox.runOnce("printer", {}, { command: python("while True: print('x' * 100)"), timeoutMs: 10_000 })
        expect(result.timedOut).toBe(false)
        expect(result.stdoutTruncated).toBe(true)
        expect(result.stdout.endsWith("\n[valet: stdout truncated at 10000 bytes]\n")).toBe(true)
        expect(result.stdout.length).toBeLessThan(10_100)
        expect(result.exitCode).not.toBe(0)
      }))

    it.effect("interrupting a run kills the process group at once and removes the workspace", () =>
      Effect.gen(function*() {
        const mark = marker()
        let path = ""
        const fiber = yield* Effect.forkChild(Effect.scoped(Effect.gen(function*() {
          const ws = yield* Sandbox.workspace("interrupted", { "f.txt": "x\n" })
          path = ws.path
          return yield* Sandbox.run(ws, {
            command: python("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)", mark),
            timeoutMs: 60_000
          })
        })))
        yield* waitUntil(() => processesWith(mark).length > 0)
        expect(existsSync(path)).toBe(true)
        yield* Fiber.interrupt(fiber)
        const exit = yield* Fiber.await(fiber)
        expect(Exit.hasInterrupts(exit)).toBe(true)
        // The command ignores SIGTERM and would sleep for a minute, past the test's own timeout: the interruption
        // completed only once it was killed, and nothing of it is left.
        expect(processesWith(mark)).toEqual([])
        expect(existsSync(path)).toBe(false)
      }))

    it.effect("refuses absolute paths, '..', unsafe task ids and a run in a closed workspace", () =>
      Effect.gen(function*() {
        const error = (taskId: string, files: Sandbox.Files) =>
          Effect.flip(Effect.scoped(Sandbox.workspace(taskId, files)))
        expect(yield* error("t", { "../escape.txt": "" })).toMatchObject({ _tag: "SandboxError", reason: "parent_path", path: "../escape.txt" })
        expect(yield* error("t", { "a/../../b": "" })).toMatchObject({ reason: "parent_path" })
        expect(yield* error("t", { "/etc/passwd": "" })).toMatchObject({ reason: "absolute_path" })
        expect(yield* error("t", { "": "" })).toMatchObject({ reason: "invalid_path" })
        for (const taskId of ["../etc", "a/b", "", ".hidden", "x".repeat(200)]) {
          const refused = yield* error(taskId, {})
          expect(refused).toMatchObject({ reason: "unsafe_task_id" })
          expect(refused.message).toContain("not a safe name")
        }
        const ws = yield* Effect.scoped(Sandbox.workspace("closed", { "./a/./b.txt": "ok" }))
        const closed = yield* Effect.flip(Sandbox.run(ws, { command: python("print(1)") }))
        expect(closed).toMatchObject({ reason: "workspace_closed" })
        expect(existsSync(ws.path)).toBe(false)
      }))

    it.effect("a kept workspace keeps its edits across steps and refuses to seed through a symlink", () =>
      Effect.gen(function*() {
        const outside = mkdtempSync(join(tmpdir(), "valet-outside-"))
        try {
          const step = (files: Sandbox.Files, command?: ReadonlyArray<string>) =>
            Effect.scoped(Effect.gen(function*() {
              const ws = yield* Sandbox.workspace("keeper", files, { keep: true })
              return command === undefined ? undefined : yield* Sandbox.run(ws, { command })
            }))
          const increment = python("n = int(open('count.txt').read()); open('count.txt', 'w').write(f'{n + 1}\\n'); print(n + 1)")
          expect((yield* step({ "count.txt": "0\n" }, increment))!.stdout).toBe("1\n")
          const second = (yield* step({ "count.txt": "0\n" }, increment))!
          expect(second.stdout).toBe("2\n")
          expect(second.diff).toContain("-1\n+2\n")
          yield* step({}, python(`import os; os.symlink(${JSON.stringify(outside)}, 'evil'); os.symlink(${JSON.stringify(join(outside, "t.txt"))}, 'link.txt')`))
          const through = yield* Effect.flip(step({ "evil/x.txt": "pwned" }))
          expect(through).toMatchObject({ reason: "symlink_escape", path: "evil/x.txt" })
          const onto = yield* Effect.flip(step({ "link.txt": "pwned" }))
          expect(onto).toMatchObject({ reason: "symlink_escape", path: "link.txt" })
          expect(readdirSync(outside)).toEqual([])
          yield* Sandbox.discard("keeper")
          expect(existsSync(join(workRoot, "kept", "keeper"))).toBe(false)
        } finally {
          rmSync(outside, { recursive: true, force: true })
        }
      }))

    it.effect("a kept workspace reopened with seedOnce is as its commands left it: a deleted seed file stays deleted, a seed path made a symlink is no error", () =>
      Effect.gen(function*() {
        const files = { "seed.txt": "seed\n", "dir/a.txt": "a\n" }
        const step = (options: Sandbox.WorkspaceOptions, command: ReadonlyArray<string>) =>
          Effect.scoped(Effect.gen(function*() {
            const ws = yield* Sandbox.workspace("once", files, options)
            return yield* Sandbox.run(ws, { command })
          }))
        const list = python("import os; print(sorted(os.listdir('.')))")
        yield* step({ keep: true, seedOnce: true }, python("import os, shutil; os.remove('seed.txt'); shutil.rmtree('dir'); os.symlink('/etc', 'dir')"))
        expect((yield* step({ keep: true, seedOnce: true }, list)).stdout).toBe("['dir']\n")
        // Without seedOnce a reopened workspace is seeded again (the missing file comes back; the symlink is refused).
        const refused = yield* Effect.flip(step({ keep: true }, list))
        expect(refused).toMatchObject({ reason: "symlink_escape" })
        yield* Sandbox.discard("once")
      }))

    it.effect("lists binary and large files as changed without diffing them; /dev/null for new and deleted files", () =>
      Effect.gen(function*() {
        const result = yield* Sandbox.runOnce("changes", { "del.txt": "bye\n", "same.txt": "same\n" }, {
          command: python([
            "import os",
            "os.remove('del.txt')",
            "open('bin.dat', 'wb').write(bytes(range(256)))",
            "open('new.txt', 'w').write('hello\\n')",
            "open('big.txt', 'w').write('line\\n' * 100000)"
          ].join("\n"))
        })
        expect(result.exitCode).toBe(0)
        expect(result.changedFiles).toEqual(["big.txt", "bin.dat", "del.txt", "new.txt"])
        expect(result.diff).toBe(
          "--- a/del.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n"
        )
      }))

    it.effect("contains a fork bomb with the process limit", () =>
      Effect.gen(function*() {
        const info = yield* Sandbox.info
        if (!info.processLimitEnforced) {
          console.warn(`fork-bomb test skipped: the process limit cannot be enforced here (${JSON.stringify(info)})`)
          return
        }
        const mark = marker()
        let most = 0
        const watcher = yield* Effect.forkChild(Effect.forever(Effect.andThen(
          Effect.sync(() => {
            most = Math.max(most, processesWith(mark).length)
          }),
          Effect.sleep("10 millis")
        )))
        const result = yield* Sandbox.runOnce("bomb", {}, {
          command: python(
            "import os, time\nend = time.time() + 1.5\nwhile time.time() < end:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)",
            mark
          ),
          timeoutMs: 10_000
        })
        yield* Fiber.interrupt(watcher)
        expect(result.timedOut).toBe(false)
        // It did fork, and never past the limit (bwrap adds its own two processes, which run as root).
        expect(most).toBeGreaterThan(8)
        expect(most).toBeLessThanOrEqual(32 + 2)
        expect(processesWith(mark)).toEqual([])
      }))

    if (mode === "bwrap") {
      it.effect("bwrap: no network, a read-only system, a private /tmp", () =>
        Effect.gen(function*() {
          const server = createServer((socket) => socket.end("hello"))
          yield* Effect.promise(() => new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve)))
          const port = (server.address() as { port: number }).port
          const mark = marker()
          const result = yield* Sandbox.runOnce("jail", {}, {
            command: python([
              "import socket, sys",
              "try:",
              `    socket.create_connection(('127.0.0.1', ${port}), timeout=2); print('connected')`,
              "except OSError as e: print('no network')",
              "try:",
              `    open('/var/${mark}', 'w'); print('wrote /var')`,
              "except OSError as e: print('read-only')",
              `open('/tmp/${mark}', 'w').write('x'); print('tmp ok')`
            ].join("\n"))
          }).pipe(Effect.ensuring(Effect.sync(() => server.close())))
          expect(result.stdout).toBe("no network\nread-only\ntmp ok\n")
          expect(existsSync(`/tmp/${mark}`)).toBe(false)
        }))
    } else {
      it.effect("process: commands run as a pooled unprivileged uid when we are root", () =>
        Effect.gen(function*() {
          const info = yield* Sandbox.info
          const result = yield* Sandbox.runOnce("uid", {}, { command: python("import os; print(os.getuid())") })
          if (process.geteuid?.() === 0 && info.pooledUids) expect(Number(result.stdout)).toBeGreaterThanOrEqual(1_800_000_000)
          else expect(Number(result.stdout)).toBe(process.geteuid?.())
        }))
    }
  })
}

suite("process")
if (bwrapWorks) suite("bwrap")
else describe("Sandbox (bwrap isolation)", () => it.skip(`every case${skippedWithoutBwrap}`, () => {}))

/** Clock ticks a second (what /proc/<pid>/stat counts start times in). */
const clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim())

/** A live process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22), or -1 when it is gone. */
const startTicks = (pid: number): number => {
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[19])
  } catch {
    return -1
  }
}

/** Pids of the live processes whose environment has `HOME=<home>`: a pre-made workspace's launcher, and what it ran. */
const processesAt = (home: string): Array<number> => {
  const needle = Buffer.from(`HOME=${home}\0`)
  return readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).map(Number).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`).includes(needle)
    } catch {
      return false
    }
  })
}

describe("Sandbox pool of pre-made workspaces", () => {
  const modes: Array<"process" | "bwrap"> = bwrapWorks ? ["process", "bwrap"] : ["process"]
  for (const mode of modes) {
    it.live(`${mode}: poolSize launchers wait in pre-made workspaces; a workspace's first run is theirs, under the limits; closing kills and removes them all`, () =>
      Effect.gen(function*() {
        const workRoot = mkdtempSync(join(tmpdir(), `valet-sandbox-pool-${mode}-`))
        roots.push(workRoot)
        const premade = () => readdirSync(workRoot).filter((name) => name.startsWith("ws-")).map((name) => join(realpathSync(workRoot), name))
        let pool: Array<string> = []
        yield* Effect.scoped(Effect.gen(function*() {
          const sandbox = yield* Sandbox.makeScoped({ isolation: mode, workRoot, poolSize: 2, limits: { memoryBytes: 512 * 1024 ** 2 } })
          // Filled in the background after the sandbox is built: two directories, each with its launcher waiting —
          // the start times of their processes read until two reads agree (bwrap starts the launcher inside its
          // namespace a moment after its own process: under load, more than a few ms).
          let waiting = ""
          yield* waitUntil(() => {
            const now = premade().length === 2 && premade().every((path) => processesAt(path).length > 0)
              ? JSON.stringify(premade().map((path) => processesAt(path).map(startTicks)))
              : ""
            const settled = now !== "" && now === waiting
            waiting = now
            return settled
          }, 10_000)
          pool = premade()
          const waitingStarts = new Map(pool.map((path) => [path, processesAt(path).map(startTicks)] as const))
          const result = yield* Effect.scoped(Effect.gen(function*() {
            const ws = yield* sandbox.workspace("pooled", { "data/in.txt": "x\n" })
            expect(pool).toContain(ws.path)
            return yield* sandbox.run(ws, {
              command: python([
                "import os, resource",
                "started = int(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]) / os.sysconf('SC_CLK_TCK')",
                "print(os.getcwd(), open('data/in.txt').read().strip(), resource.getrlimit(resource.RLIMIT_AS)[0], os.getuid() != 0, started)"
              ].join("\n"))
            })
          }))
          const pooledUid = process.geteuid?.() === 0 && sandbox.info.pooledUids
          const [cwd, seeded, memory, unprivileged, started] = result.stdout.trim().split(" ")
          expect({ exitCode: result.exitCode, isolation: result.isolation, seeded, memory, unprivileged }).toEqual({
            exitCode: 0,
            isolation: mode,
            seeded: "x",
            memory: String(512 * 1024 ** 2),
            unprivileged: pooledUid ? "True" : "False"
          })
          expect(pool).toContain(cwd)
          // The command is the launcher that was waiting (exec keeps a process's start time), not a process spawned now.
          expect(waitingStarts.get(cwd!)).toContain(Math.round(Number(started) * clockTicks))
        }))
        // The used workspace and the unused launchers: no directory but `kept`, no process left.
        expect(readdirSync(workRoot)).toEqual(["kept"])
        expect(pool.flatMap(processesAt)).toEqual([])
      }), { timeout: 30_000 })
  }

  it.live("process: what a pre-made workspace's run leaves outside its group is killed, its exit code answered at once", () =>
    Effect.gen(function*() {
      const workRoot = mkdtempSync(join(tmpdir(), "valet-sandbox-pool-left-"))
      roots.push(workRoot)
      const mark = marker()
      yield* Effect.scoped(Effect.gen(function*() {
        const sandbox = yield* Sandbox.makeScoped({ isolation: "process", workRoot, poolSize: 1, graceMs: 300 })
        yield* waitUntil(() => readdirSync(workRoot).some((name) => name.startsWith("ws-")))
        const result = yield* Effect.scoped(Effect.flatMap(sandbox.workspace("left", {}), (ws) =>
          sandbox.run(ws, {
            command: python(`import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '${mark}'], start_new_session=True)\nsys.exit(3)`, mark),
            timeoutMs: 20_000,
            diff: false
          })))
        // The sleeper outlives the 20 s timeout: a run that waited for it would answer 124.
        expect({ exitCode: result.exitCode, timedOut: result.timedOut }).toEqual({ exitCode: 3, timedOut: false })
        // Swept beside the answer: gone soon after, the pool still open.
        yield* waitUntil(() => processesWith(mark).length === 0)
      }))
      expect(processesWith(mark)).toEqual([])
    }), { timeout: 30_000 })

  it.live("poolSize is checked like every option", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Sandbox.make({ isolation: "process", poolSize: -1 }))
      expect(error.reason).toBe("invalid_options")
      expect(error.message).toContain("poolSize")
    }))
})

describe("Sandbox.layerProcess", () => {
  it.live("rejects bad options (and fails to build with isolation: bwrap when bwrap does not work)", () =>
    Effect.gen(function*() {
      const bad = yield* Effect.flip(Sandbox.make({ timeoutMs: -1 }))
      expect(bad).toMatchObject({ reason: "invalid_options" })
      expect(bad.message).toContain("timeoutMs")
      // One line naming the module, the field, the rule and the value.
      expect(bad.message).toBe("Sandbox: timeoutMs must be an integer >= 1, got -1")
      const nested = yield* Effect.flip(Sandbox.make({ limits: { maxProcesses: 0 } }))
      expect(nested.message).toBe("Sandbox: limits.maxProcesses must be an integer >= 1, got 0")
      // A typo is refused, not silently ignored.
      const typo = yield* Effect.flip(Sandbox.make({ timeoutMS: 5_000 } as Sandbox.Options))
      expect(typo).toMatchObject({ reason: "invalid_options" })
      expect(typo.message).toBe("Sandbox: timeoutMS is not a known option")
      if (!bwrapWorks) {
        const error = yield* Effect.flip(Sandbox.make({ isolation: "bwrap" }))
        expect(error).toMatchObject({ reason: "isolation_unavailable" })
      }
    }))

  it.live("without @ast-grep/cli installed, ast-grep is refused like any missing program", () =>
    Effect.gen(function*() {
      const workRoot = mkdtempSync(join(tmpdir(), "valet-sandbox-test-no-astgrep-"))
      roots.push(workRoot)
      // This machine with every ast-grep hidden: none on PATH, no package.
      const path = (process.env.PATH ?? "").split(delimiter).filter((dir) => !existsSync(join(dir, "ast-grep"))).join(delimiter)
      const sandbox = yield* ProcessLayer.make({ isolation: "process", workRoot }, { path, packagedAstGrep: async () => undefined })
      expect(sandbox.info.missing).toEqual(["ast-grep"])
      expect(sandbox.info.allowed.map((entry) => entry.name)).not.toContain("ast-grep")
      const [refused, python] = yield* Effect.scoped(Effect.gen(function*() {
        const ws = yield* sandbox.workspace("no-astgrep", { "a.py": "print(1)\n" })
        return [
          yield* sandbox.run(ws, { command: ["ast-grep", "run", "-p", "print($A)", "a.py"] }),
          yield* sandbox.run(ws, { command: ["python3", "a.py"] })
        ] as const
      }))
      expect(refused).toMatchObject({ exitCode: 126, error: "not_allowed", isolation: "none", stdout: "" })
      expect(refused.stderr).toBe("not_allowed: ast-grep: no such program (allowed: ast-grep, python3, python, pytest, node)\n")
      expect(python).toMatchObject({ exitCode: 0, stdout: "1\n" })
    }))

  it.live("layerProcessConfig reads VALET_SANDBOX_ROOT, VALET_SANDBOX_ISOLATION and VALET_SANDBOX_TIMEOUT_MS", () =>
    Effect.gen(function*() {
      const workRoot = mkdtempSync(join(tmpdir(), "valet-sandbox-test-config-"))
      roots.push(workRoot)
      const env = { VALET_SANDBOX_ROOT: workRoot, VALET_SANDBOX_ISOLATION: "process", VALET_SANDBOX_TIMEOUT_MS: "400" }
      const result = yield* Sandbox.runOnce("configured", {}, { command: python("import time; time.sleep(5)") }).pipe(
        Effect.provide(Sandbox.layerProcessConfig({ graceMs: 100 }).pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))))
      )
      expect(result).toMatchObject({ exitCode: 124, timedOut: true, isolation: "process" })
      const info = yield* Sandbox.info.pipe(
        Effect.provide(Sandbox.layerProcessConfig().pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))))
      )
      expect(info.workRoot).toBe(realpathSync(workRoot))
      const bad = yield* Effect.flip(Effect.provide(
        Sandbox.info,
        Sandbox.layerProcessConfig().pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env: { VALET_SANDBOX_ISOLATION: "docker" } }))))
      ))
      expect(bad._tag).toBe("ConfigError")
    }))
})

describe("Sandbox.SandboxResult", () => {
  it("encodes to snake case (as trajectories store it) and decodes back", () => {
    const result: Sandbox.SandboxResult = {
      command: ["python3", "-c", "1"],
      exitCode: 124,
      stdout: "partial",
      stderr: "",
      durationMs: 1500.5,
      timedOut: true,
      error: "timeout",
      signal: "SIGKILL",
      isolation: "bwrap",
      stdoutTruncated: true,
      diff: "",
      changedFiles: []
    }
    const encoded = Schema.encodeSync(Sandbox.SandboxResult)(result)
    expect(encoded).toEqual({
      command: ["python3", "-c", "1"],
      exit_code: 124,
      stdout: "partial",
      stderr: "",
      duration_ms: 1500.5,
      timed_out: true,
      error: "timeout",
      signal: "SIGKILL",
      isolation: "bwrap",
      stdout_truncated: true,
      diff: "",
      changed_files: []
    })
    expect(Schema.decodeUnknownSync(Sandbox.SandboxResult)(JSON.parse(JSON.stringify(encoded)))).toEqual(result)
  })
})

describe("Sandbox.layerTest", () => {
  it.effect("answers scripted results, and decodes and allow-lists commands like the real layer", () =>
    Effect.gen(function*() {
      const ws = yield* Sandbox.workspace("t1", { "a.py": "print(1)" })
      const ok = yield* Sandbox.run(ws, { command: ["python3", "a.py"] })
      expect(ok).toEqual({ command: ["python3", "a.py"], exitCode: 0, stdout: "1\n", stderr: "", durationMs: 0, timedOut: false, isolation: "test" })
      expect(yield* Sandbox.run(ws, { command: ["rm", "-rf", "/"] })).toMatchObject({ exitCode: 126, error: "not_allowed" })
      expect(yield* Sandbox.run(ws, { command: "python3 a.py" })).toMatchObject({ exitCode: 127, error: "invalid_command" })
      expect(yield* Effect.flip(Sandbox.workspace("t2", { "../x": "" }))).toMatchObject({ reason: "parent_path" })
    }).pipe(Effect.provide(Sandbox.layerTest(({ files }) => ({ stdout: files["a.py"] === "print(1)" ? "1\n" : "?\n" })))))
})

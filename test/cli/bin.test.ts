/**
 * `bin/valet.js`, the installed command, on a Node older than `engines` (>= 22.19): it used to load valet and die
 * later with `Cannot read properties of undefined (reading 'bind')` (Node 20); now it checks the version before
 * importing anything and says what it needs, exit code 2. Run with a real older Node when one is on the PATH (these
 * machines have Node 20 as `node`, outside node_modules/.bin), and always with this Node pretending to be 22.18.
 * And `npm run valet -- serve …` (the command in a clone) stops, all of it, when npm gets SIGTERM or SIGINT.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { copyFileSync, existsSync, readFileSync } from "node:fs"
import { connect } from "node:net"
import { delimiter, join } from "node:path"
import { marker, processesWith } from "../support/processes.js"
import { tempDir } from "../support/tempDir.js"

const root = join(import.meta.dirname, "..", "..")
const bin = join(root, "bin", "valet.js")

const olderThanEngines = (version: string): boolean => {
  const [major = 0, minor = 0] = version.replace(/^v/, "").split(".").map(Number)
  return major < 22 || (major === 22 && minor < 19)
}

/** The first `node` on the PATH, outside this checkout, older than `engines`; or why there is none. */
const oldNode = ((): { readonly path: string; readonly version: string } | { readonly missing: string } => {
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    const path = join(dir, "node")
    if (dir === "" || dir.includes("node_modules") || !existsSync(path)) continue
    try {
      const version = execFileSync(path, ["--version"], { encoding: "utf8" }).trim()
      if (olderThanEngines(version)) return { path, version }
    } catch {
      // Not runnable: look further.
    }
  }
  return { missing: "no node older than 22.19 on the PATH outside node_modules" }
})()

// Makes this Node report another version before bin/valet.js runs (a module preloaded with --import).
const pretend = (version: string) =>
  `data:text/javascript,Object.defineProperty(process,"version",{value:"v${version}"});` +
  `Object.defineProperty(process.versions,"node",{value:"${version}"})`

describe("bin/valet.js checks the Node version before loading valet", () => {
  it.skipIf("missing" in oldNode)(
    `on a real older Node: one line saying what it needs, exit 2${"missing" in oldNode ? ` (skipped: ${oldNode.missing})` : ""}`,
    () => {
      if ("missing" in oldNode) return
      for (const args of [["health"], ["--version"], ["run", "hi"]]) {
        const run = spawnSync(oldNode.path, [bin, ...args], { encoding: "utf8", timeout: 30_000 })
        expect({ args, status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
          args,
          status: 2,
          stdout: "",
          stderr: `valet needs Node >= 22.19 (this is ${oldNode.version})\n`
        })
      }
    }
  )

  it("on Node 22.18 (this Node pretending): the same line, exit 2, before anything is imported", () => {
    const run = spawnSync(process.execPath, ["--import", pretend("22.18.0"), bin, "health"], { encoding: "utf8", timeout: 30_000 })
    expect({ status: run.status, stdout: run.stdout, stderr: run.stderr }).toEqual({
      status: 2,
      stdout: "",
      stderr: "valet needs Node >= 22.19 (this is v22.18.0)\n"
    })
  })

  it("on this Node (>= 22.19; 22.19 itself included) the command runs", () => {
    for (const pretending of [[], ["--import", pretend("22.19.0")]]) {
      const run = spawnSync(process.execPath, [...pretending, bin, "--version"], { encoding: "utf8", timeout: 30_000 })
      expect({ pretending, status: run.status, stdout: run.stdout.trim() }).toEqual({ pretending, status: 0, stdout: "valet v0.1.0" })
    }
  })
})

/** Whether something accepts connections on the loopback `port`. */
const listening = (port: number) =>
  Effect.callback<boolean>((resume) => {
    const socket = connect(port, "127.0.0.1")
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.succeed(true))
    })
    socket.once("error", () => resume(Effect.succeed(false)))
  })

/** A process's command line, for a failure message. */
const commandLine = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim()
  } catch {
    return `${pid} (gone)`
  }
}

// `npm run valet` runs its script through `sh -c`. npm forwards SIGINT and SIGTERM to its child, but a plain
// `node bin/valet.js` under sh never got them: SIGTERM killed sh and left node serving with no parent, SIGINT
// reached only sh (which waits for node). The script execs node, so npm's child is the valet process itself.
// Under npx, npm runs the bin through `sh -c` (not exec'd): the shell dies of a SIGTERM and does not pass it on. The
// bin, started by npm (npm_command in its environment), stops when its parent is gone. The case is npx's process
// tree as it is, without npx's download: `sh -c "node bin/valet.js …"` with npm's variable.
const cases = [
  { name: "SIGTERM to npm", signal: "SIGTERM", command: "npm", args: (config: string) => ["run", "valet", "--", "serve", "--config", config, "--port", "0"], env: {} },
  { name: "SIGINT to npm", signal: "SIGINT", command: "npm", args: (config: string) => ["run", "valet", "--", "serve", "--config", config, "--port", "0"], env: {} },
  {
    name: "SIGTERM to npx's shell",
    signal: "SIGTERM",
    command: "sh",
    args: (config: string) => ["-c", `"${process.execPath}" "${bin}" serve --config "${config}" --port 0`],
    env: { npm_command: "exec" }
  }
] as const

// A command started under an npm script any other way (npm_lifecycle_event set, npm_command=run-script) is not npx's:
// its parent going (a `nohup … &` in a script) does not stop it.
describe("a valet started from an npm script, not by npx, outlives its parent", () => {
  it.live("SIGTERM to the shell of an npm script: the server goes on serving", () =>
    Effect.gen(function*() {
      const mark = marker()
      const { dir } = yield* tempDir(`valet-bin-${mark}-`)
      const config = join(dir, "valet.yaml")
      copyFileSync(join(root, "examples", "serve", "valet.yaml"), config)
      const shell = yield* Effect.acquireRelease(
        Effect.sync(() =>
          spawn("sh", ["-c", `"${process.execPath}" "${bin}" serve --config "${config}" --port 0`], {
            cwd: root,
            stdio: ["ignore", "ignore", "pipe"],
            env: { ...process.env, npm_command: "run-script", npm_lifecycle_event: "start" }
          })
        ),
        () => Effect.sync(() => processesWith(mark).forEach((pid) => process.kill(pid, "SIGKILL")))
      )
      const port = yield* Effect.callback<number, Error>((resume) => {
        let stderr = ""
        shell.stderr.on("data", (data: Buffer) => {
          stderr += data.toString()
          const found = /agents at http:\/\/127\.0\.0\.1:(\d+) /.exec(stderr)
          if (found !== null) resume(Effect.succeed(Number(found[1])))
        })
      })
      shell.kill("SIGTERM")
      yield* Effect.promise(() => new Promise((resolve) => shell.once("exit", resolve)))
      // Ten of the watchdog's periods: a valet that stops when its parent goes would be gone.
      yield* Effect.sleep("2500 millis")
      expect(yield* listening(port)).toBe(true)
    }).pipe(Effect.scoped), 30_000)
})

describe("npm run valet, npx valet: a signal to npm stops the command", () => {
  for (const { name, signal, command, args, env } of cases) {
    it.live(`${name}: the port stops listening and no process of it remains`, () =>
      Effect.gen(function*() {
        // The marker in the config's path is in every command line of the tree (npm, and node), to find them.
        const mark = marker()
        const { dir } = yield* tempDir(`valet-bin-${mark}-`)
        const config = join(dir, "valet.yaml")
        copyFileSync(join(root, "examples", "serve", "valet.yaml"), config)
        const npm = yield* Effect.acquireRelease(
          Effect.sync(() =>
            spawn(command, args(config), {
              cwd: root,
              stdio: ["ignore", "ignore", "pipe"],
              env: { ...process.env, ...env }
            })
          ),
          // Whatever outlived the test (a failure) is killed, not left serving.
          () => Effect.sync(() => processesWith(mark).forEach((pid) => process.kill(pid, "SIGKILL")))
        )
        const port = yield* Effect.callback<number, Error>((resume) => {
          let stderr = ""
          npm.stderr.on("data", (data: Buffer) => {
            stderr += data.toString()
            const found = /agents at http:\/\/127\.0\.0\.1:(\d+) /.exec(stderr)
            if (found !== null) resume(Effect.succeed(Number(found[1])))
          })
          npm.once("exit", (code) => resume(Effect.fail(new Error(`${command} exited (${code}) before serving: ${stderr}`))))
        })
        expect(yield* listening(port)).toBe(true)
        expect(processesWith(mark).length).toBeGreaterThan(0)

        npm.kill(signal)
        // Polled (at most 100 times, 100 ms apart) until the port is closed and no process of the tree is left.
        const left = yield* Effect.gen(function*() {
          const open = yield* listening(port)
          const pids = processesWith(mark)
          if (open || pids.length > 0) {
            return yield* Effect.fail({ listening: open, processes: pids.map(commandLine) })
          }
        }).pipe(
          Effect.retry({ schedule: Schedule.spaced("100 millis"), times: 100 }),
          Effect.match({ onFailure: (left) => left, onSuccess: () => "none" })
        )
        expect(left).toBe("none")
      }).pipe(Effect.scoped), 30_000)
  }
})

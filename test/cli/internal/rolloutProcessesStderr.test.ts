/**
 * `valet rollout --processes` passes its processes' stderr on (rolloutProcesses.ts):
 * - through the command's `Output`: on a terminal the progress status line (`\r\x1b[K…`, no newline) is on that same
 *   stream, so a process's warning written past it would be glued to the end of the status line;
 * - to its end when interrupted (Ctrl-C): what a process writes on stderr while it stops (a workspace it could not
 *   remove, a crash) is passed on, as `stderr: "inherit"` would have.
 * The processes here are small Node scripts that speak the `--progress json` protocol on stdout.
 */
import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { memoryOutput } from "../../../src/cli/internal/output.js"
import { runProcesses } from "../../../src/cli/internal/rolloutProcesses.js"

const root = mkdtempSync(join(tmpdir(), "valet-stderr-"))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const tasksFile = () => {
  const dir = mkdtempSync(join(root, "tasks-"))
  const path = join(dir, "tasks.jsonl")
  writeFileSync(path, JSON.stringify({ task_id: "t", prompt: "Do t." }) + "\n")
  return path
}

const counts = { total: 1, done: 1, failed: 0, steps: 1, outputTokens: 0, rewardSum: 0, rewarded: 0, elapsedMs: 1 }

/** Captures what this process writes on its stderr (into `written`) while `effect` runs, and still passes it on. */
const capturingStderr = <A, E, R>(written: Array<string>, effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const original = process.stderr.write.bind(process.stderr)
      process.stderr.write = ((chunk: string | Uint8Array, ...rest: Array<never>) => {
        written.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString())
        return original(chunk, ...rest)
      }) as typeof process.stderr.write
      return original
    }),
    () => effect,
    (original) => Effect.sync(() => void (process.stderr.write = original))
  )

describe("valet rollout --processes: the processes' stderr", () => {
  it.live("a process's stderr line goes through the command's Output (on a terminal it must not be glued to the status line)", () =>
    Effect.gen(function*() {
      const script = `
        process.stderr.write("[00:00:00.000] WARN (#1): a warning from a process\\n")
        process.stdout.write(JSON.stringify({ type: "summary", ...${JSON.stringify(counts)}, tasks: 1, skippedLines: 0 }) + "\\n")
      `
      const output = memoryOutput(true)
      const written: Array<string> = []
      yield* capturingStderr(written,
        runProcesses(tasksFile(), { concurrency: 1 }, 1, { executable: process.execPath, args: ["-e", script] }, ["rollout", "x"], output)
      )
      expect(written.join("")).not.toContain("a warning from a process")
      expect(output.lines).toContain("[00:00:00.000] WARN (#1): a warning from a process")
    }).pipe(Effect.provide(NodeServices.layer)), 30_000)

  it.live("interrupted: what a process writes on stderr while it stops (after SIGTERM) is passed on, not dropped", () =>
    Effect.gen(function*() {
      // The process leaves a file when it got SIGTERM: it did stop, and wrote its line, before the parent returned.
      const stopped = join(mkdtempSync(join(root, "stopped-")), "stopped")
      const script = `
        process.on("SIGTERM", () => {
          require("node:fs").writeFileSync(${JSON.stringify(stopped)}, "")
          process.stderr.write("process: could not remove workspace /w/kept/x\\n", () => process.exit(130))
        })
        process.stderr.write("process: started\\n")
        setInterval(() => {}, 1000)
      `
      const output = memoryOutput(false)
      const written: Array<string> = []
      const shown = (text: string) => written.join("").includes(text) || output.lines.some((line) => line.includes(text))
      yield* capturingStderr(written, Effect.gen(function*() {
        const fiber = yield* Effect.forkChild(
          runProcesses(tasksFile(), { concurrency: 1 }, 1, { executable: process.execPath, args: ["-e", script] }, ["rollout", "x"], output)
        )
        // The process is up once its first stderr line was passed on (bounded polls, no set time).
        for (let polls = 0; polls < 1000 && !shown("process: started"); polls++) yield* Effect.sleep("10 millis")
        yield* Fiber.interrupt(fiber)
      }))
      expect(existsSync(stopped)).toBe(true)
      const all = written.join("") + output.lines.join("\n")
      expect(all).toContain("process: started")
      expect(all).toContain("process: could not remove workspace /w/kept/x")
    }).pipe(Effect.provide(NodeServices.layer)), 30_000)
})

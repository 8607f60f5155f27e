/**
 * Sandbox overhead: `Sandbox.runOnce` (a workspace seeded with two files, limits, pooled uid when root, the
 * before / after snapshot and diff unless `diff: false`, the workspace removed) against a bare
 * `child_process.spawn` of the same command, with process isolation and (where it works here) bubblewrap, through
 * `layerProcess` (its default pool of pre-made workspaces). Variants run interleaved, one sample each per round,
 * so machine noise spreads evenly; each cell is the median. Every sample, bare spawns too, comes after a pause
 * (`pauseMs`), as commands come between a model's turns: the pool refills in it, as it would there.
 *
 *   npx tsx bench/sandbox.ts [--quick]
 */
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Exit, type Layer, ManagedRuntime } from "effect"
import * as Sandbox from "valet/Sandbox"
import { type Row, summarize, writeReport } from "./support/report.js"

const quick = process.argv.includes("--quick")
const rounds = quick ? 3 : 25
const files = { "main.py": "print('hello')\n", "data/input.txt": "1 2 3\n" }
const pauseMs = 25
const pause = () => new Promise<void>((resolve) => setTimeout(resolve, pauseMs))

const bare = (command: ReadonlyArray<string>, cwd: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const started = performance.now()
    const child = spawn(command[0]!, command.slice(1), { cwd, stdio: ["ignore", "pipe", "pipe"] })
    child.stdout.resume()
    child.stderr.resume()
    child.on("error", reject)
    child.on("close", (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`exit ${code}`))))
  })

interface Variant {
  readonly label: string
  readonly time: (command: ReadonlyArray<string>) => Promise<number>
}

const main = async () => {
  const root = mkdtempSync(join(tmpdir(), "valet-bench-sandbox-"))
  const runtimes: Array<ManagedRuntime.ManagedRuntime<Sandbox.Sandbox, Sandbox.SandboxError>> = []
  const notes: Array<string> = []
  try {
    const sandboxed = async (isolation: "process" | "bwrap", diff: boolean): Promise<Variant | undefined> => {
      const runtime = ManagedRuntime.make(Sandbox.layerProcess({ isolation, workRoot: join(root, isolation) }) as Layer.Layer<Sandbox.Sandbox, Sandbox.SandboxError>)
      const built = await runtime.runPromiseExit(Sandbox.info)
      if (Exit.isFailure(built)) {
        notes.push(`${isolation}: not available here (${String(built.cause).slice(0, 200)})`)
        await runtime.dispose()
        return undefined
      }
      runtimes.push(runtime)
      const info = built.value
      if (diff) {
        notes.push(`${isolation}: pre-made workspaces ${Sandbox.defaultPoolSize} (layerProcess's default), ${pauseMs} ms pause before every sample`)
        notes.push(
          `${isolation}: limits by ${info.limiter}, pooled uids ${info.pooledUids}, process limit enforced ${info.processLimitEnforced}`
        )
      }
      return {
        label: `valet ${isolation}${diff ? "" : " (no diff)"}`,
        time: async (command) => {
          const started = performance.now()
          const result = await runtime.runPromise(Sandbox.runOnce("bench", files, { command, diff }))
          if (result.exitCode !== 0) throw new Error(`${command.join(" ")}: exit ${result.exitCode}: ${result.stderr}`)
          return performance.now() - started
        }
      }
    }
    const cwd = mkdtempSync(join(root, "bare-"))
    const variants: Array<Variant> = [{ label: "bare spawn", time: (command) => bare(command, cwd) }]
    for (
      const variant of [
        await sandboxed("process", true),
        await sandboxed("process", false),
        await sandboxed("bwrap", true),
        await sandboxed("bwrap", false)
      ]
    ) {
      if (variant !== undefined) variants.push(variant)
    }
    const astGrep = runtimes.length > 0
      ? (await runtimes[0]!.runPromise(Sandbox.info)).allowed.find((entry) => entry.name === "ast-grep")?.path
      : undefined
    const commands: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
      ["python3 -c pass", ["python3", "-c", "pass"]],
      ...(astGrep !== undefined ? [["ast-grep --version", [astGrep, "--version"]] as const] : [])
    ]
    const rows: Array<Row> = []
    for (const [name, command] of commands) {
      const samples = new Map<string, Array<number>>(variants.map((variant) => [variant.label, []]))
      // Warm-up: page cache, pyenv's shims, bwrap's first namespace.
      for (const variant of variants) await variant.time(command)
      for (let round = 0; round < rounds; round++) {
        for (const variant of variants) {
          await pause()
          samples.get(variant.label)!.push(await variant.time(command))
        }
      }
      const baseline = summarize("bare spawn", name, "ms", samples.get("bare spawn")!)
      rows.push(baseline)
      for (const variant of variants.slice(1)) {
        const row = summarize(variant.label, name, "ms", samples.get(variant.label)!)
        rows.push(row)
        rows.push({ framework: variant.label, measure: `${name}: ratio to bare spawn`, value: row.value / baseline.value, unit: "×" })
        rows.push({ framework: variant.label, measure: `${name}: added per run`, value: row.value - baseline.value, unit: "ms" })
      }
      process.stderr.write(`  sandbox: ${name} done\n`)
    }
    writeReport({
      name: "sandbox",
      description: `Sandbox.runOnce (pooled workspace + limits + diff) vs a bare child_process.spawn, median of ${rounds} interleaved rounds, ${pauseMs} ms pause before each sample`,
      rows,
      notes
    })
  } finally {
    for (const runtime of runtimes) await runtime.dispose()
    rmSync(root, { recursive: true, force: true })
  }
}

await main()

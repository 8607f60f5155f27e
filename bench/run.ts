/**
 * `npm run bench`: every benchmark, one table. Framework overhead per step and memory per session against the
 * Vercel AI SDK and LangGraph.js; the cost of `import("valet")` beside `import("effect")`; then the client, sandbox, rollout,
 * fan-out, parser, serving, durable, threads, conversation, prompt-prefix and model-layer benchmarks of the other modules, and DeepAgent beside
 * LangChain's `deepagents`, when they exist. Each writes `bench/results/<name>.json`; the combined table goes to `bench/results/summary.json`.
 *
 *   npm run bench              # full: medians of 3 processes per cell (several minutes)
 *   npm run bench -- --quick   # a smoke run: small sizes, one process per cell (what CI runs)
 */
import { execFile, execFileSync } from "node:child_process"
import { existsSync, readFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import * as Imports from "./imports.js"
import * as Memory from "./memory.js"
import * as Overhead from "./overhead.js"
import { type Report, type Row, resultsDir, writeReport } from "./support/report.js"

const quick = process.argv.includes("--quick")
const reports: Array<Report> = []
// A benchmark that fails does not hide the others' tables; the run still exits non-zero (CI checks they run).
const failures: Array<string> = []
const attempt = (name: string, run: () => Report | undefined) => {
  try {
    const report = run()
    if (report !== undefined) reports.push(report)
  } catch (error) {
    failures.push(name)
    console.error(`\nbenchmark ${name} failed: ${error instanceof Error ? error.message : String(error)}`)
  }
}

attempt("overhead", () => Overhead.main(quick))
attempt("memory", () => Memory.main(quick))
attempt("imports", () => Imports.main(quick))

// Benchmarks owned by other modules, run as their own processes when present. A quick run (CI's smoke check, not
// for comparison) runs two at a time, each one's output printed whole when it ends; a full run one at a time, since
// two benchmarks on one machine would skew each other's numbers.
const modules = ["client", "sandbox", "fanout", "rollout", "parsers", "serve", "durable", "threads", "conversation", "recall", "prefix", "modelLayer", "deepAgent"]
  .filter((name) => existsSync(join("bench", `${name}.ts`)))
const runModule = async (name: string): Promise<void> => {
  const file = join(resultsDir, `${name}.json`)
  // A stale file from an earlier run must not stand in for this one.
  rmSync(file, { force: true })
  const args = ["--import", "tsx", join("bench", `${name}.ts`), ...(quick ? ["--quick"] : [])]
  if (!quick) {
    attempt(name, () => {
      execFileSync(process.execPath, args, { stdio: "inherit" })
      return existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) as Report : undefined
    })
    return
  }
  const outcome = await new Promise<{ readonly error: Error | null; readonly output: string }>((resolve) => {
    execFile(process.execPath, args, { maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) =>
      resolve({ error, output: `${stdout}${stderr}` }))
  })
  process.stdout.write(outcome.output)
  attempt(name, () => {
    if (outcome.error !== null) throw outcome.error
    return existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) as Report : undefined
  })
}
const listed = ["overhead", "memory", "imports", ...modules]
const order = (name: string) => listed.includes(name) ? listed.indexOf(name) : listed.length
const queue = [...modules]
const lane = async (): Promise<void> => {
  for (let name = queue.shift(); name !== undefined; name = queue.shift()) await runModule(name)
}
await Promise.all(quick ? [lane(), lane()] : [lane()])
// The table in the order the benchmarks are listed, whichever ended first.
reports.sort((a, b) => order(a.name) - order(b.name))

const rows: Array<Row> = reports.flatMap((report) => report.rows.map((row) => ({ ...row, measure: `${report.name}: ${row.measure}` })))
console.log(`\n=== valet benchmarks${quick ? " (quick)" : ""} ===`)
writeReport({
  name: "summary",
  description: `all benchmarks${quick ? " (quick run: not for comparison)" : ""}`,
  rows,
  notes: [
    ...reports.flatMap((report) => (report.notes ?? []).map((note) => `${report.name}: ${note}`)),
    ...failures.map((name) => `${name}: FAILED (see above)`)
  ]
})
if (failures.length > 0) process.exitCode = 1

/**
 * `npm run bench`: every benchmark, one table. Framework overhead per step and memory per session against the
 * Vercel AI SDK and LangGraph.js; then the client, sandbox and fan-out benchmarks of the other modules when they
 * exist. Each writes `bench/results/<name>.json`; the combined table goes to `bench/results/summary.json`.
 *
 *   npm run bench              # full: medians of 3 processes per cell (several minutes)
 *   npm run bench -- --quick   # a smoke run: small sizes, one process per cell (what CI runs)
 */
import { execFileSync } from "node:child_process"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import * as Memory from "./memory.js"
import * as Overhead from "./overhead.js"
import { type Report, type Row, resultsDir, writeReport } from "./support/report.js"

const quick = process.argv.includes("--quick")
const reports: Array<Report> = [Overhead.main(quick), Memory.main(quick)]

// Benchmarks owned by other modules, run as their own processes when present.
for (const name of ["client", "sandbox", "fanout"]) {
  const script = join("bench", `${name}.ts`)
  if (!existsSync(script)) continue
  execFileSync(process.execPath, ["--import", "tsx", script, ...(quick ? ["--quick"] : [])], { stdio: "inherit" })
  const file = join(resultsDir, `${name}.json`)
  if (existsSync(file)) reports.push(JSON.parse(readFileSync(file, "utf8")) as Report)
}

const rows: Array<Row> = reports.flatMap((report) => report.rows.map((row) => ({ ...row, measure: `${report.name}: ${row.measure}` })))
console.log(`\n=== valet benchmarks${quick ? " (quick)" : ""} ===`)
writeReport({
  name: "summary",
  description: `all benchmarks${quick ? " (quick run: not for comparison)" : ""}`,
  rows,
  notes: reports.flatMap((report) => (report.notes ?? []).map((note) => `${report.name}: ${note}`))
})


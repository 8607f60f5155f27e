/**
 * Shared output of the benchmarks: a table on stdout and `bench/results/<name>.json`. Each benchmark file is
 * runnable alone (`npx tsx bench/<name>.ts`) and `npm run bench` runs them all.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { cpus } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

/** One measured value: `framework` (valet, ai-sdk, langgraph, openai, plain…) × `measure`. */
export interface Row {
  readonly framework: string
  readonly measure: string
  /** The median over repeated process runs or samples. */
  readonly value: number
  readonly unit: string
  /** Smallest and largest of the samples the median was taken from. */
  readonly min?: number
  readonly max?: number
  readonly samples?: number
}

/** A benchmark's results. */
export interface Report {
  readonly name: string
  readonly description: string
  readonly machine: { readonly node: string; readonly cpus: number; readonly platform: string }
  readonly rows: ReadonlyArray<Row>
  readonly notes?: ReadonlyArray<string>
}

export const resultsDir = join(dirname(fileURLToPath(import.meta.url)), "..", "results")

/** The median of a non-empty list. */
export const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** The `p`-th percentile (0–100, nearest rank) of a non-empty list. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!
}

/** A row from samples: the median, with the smallest and largest. */
export const summarize = (framework: string, measure: string, unit: string, samples: ReadonlyArray<number>): Row => ({
  framework,
  measure,
  unit,
  value: median(samples),
  min: Math.min(...samples),
  max: Math.max(...samples),
  samples: samples.length
})

const formatNumber = (n: number): string =>
  Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : n.toFixed(2)

/** The rows as an aligned text table. */
export const table = (rows: ReadonlyArray<Row>): string => {
  const lines = [["framework", "measure", "median", "unit", "spread (min–max)", "n"]]
  for (const row of rows) {
    lines.push([
      row.framework,
      row.measure,
      formatNumber(row.value),
      row.unit,
      row.min !== undefined && row.max !== undefined ? `${formatNumber(row.min)}–${formatNumber(row.max)}` : "",
      row.samples !== undefined ? String(row.samples) : ""
    ])
  }
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((line) => line[i]!.length)))
  return lines.map((line) => line.map((cell, i) => (i === 2 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join("  ").trimEnd())
    .join("\n")
}

/** Prints the table and writes `bench/results/<name>.json`. */
export const writeReport = (report: Omit<Report, "machine">): Report => {
  const full: Report = {
    ...report,
    machine: { node: process.version, cpus: cpus().length, platform: process.platform }
  }
  mkdirSync(resultsDir, { recursive: true })
  writeFileSync(join(resultsDir, `${report.name}.json`), JSON.stringify(full, null, 2) + "\n")
  console.log(`\n${report.name}: ${report.description}\n${table(report.rows)}`)
  for (const note of report.notes ?? []) console.log(`  note: ${note}`)
  return full
}

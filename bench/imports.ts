/**
 * What `import("valet")` costs a user: the time of the dynamic import and the process's RSS after it, each in a
 * fresh Node process (no tsx: the built package, as users load it), beside `import("effect")` alone and a process
 * that imports nothing. Every cell is the median of several processes.
 *
 *   npm run build && npx tsx bench/imports.ts [--quick]
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { type Report, type Row, summarize, writeReport } from "./support/report.js"

const root = fileURLToPath(new URL("..", import.meta.url))

/** The module each cell imports; `null` imports nothing (Node's own baseline). */
const cells: ReadonlyArray<readonly [label: string, specifier: string | null]> = [
  ["node (nothing imported)", null],
  ["effect", "effect"],
  ["valet", "valet"]
]

interface Sample {
  readonly ms: number
  readonly rssMb: number
  readonly heapMb: number
}

/**
 * Imports `specifier` in a new process whose working directory is the repository: `valet` resolves to the built
 * package through its own `exports` (a self-reference), exactly as an installed copy would.
 */
const sample = (specifier: string | null): Sample => {
  const code = `
const started = performance.now()
${specifier === null ? "" : `await import(${JSON.stringify(specifier)})`}
const ms = performance.now() - started
const memory = process.memoryUsage()
console.log(JSON.stringify({ ms, rssMb: memory.rss / 1048576, heapMb: memory.heapUsed / 1048576 }))`
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", code], { cwd: root, encoding: "utf8" })
  return JSON.parse(out.trim().split("\n").at(-1)!) as Sample
}

/** Runs every cell and writes `bench/results/imports.json`. */
export const main = (quick: boolean): Report => {
  const processes = quick ? 3 : 7
  const rows: Array<Row> = []
  const medians: Record<string, { ms: number; rssMb: number }> = {}
  for (const [label, specifier] of cells) {
    const samples = Array.from({ length: processes }, () => sample(specifier))
    const time = summarize(label, "import time", "ms", samples.map((s) => s.ms))
    const rss = summarize(label, "RSS after import", "MB", samples.map((s) => s.rssMb))
    rows.push(time, rss, summarize(label, "heap used after import", "MB", samples.map((s) => s.heapMb)))
    medians[label] = { ms: time.value, rssMb: rss.value }
    process.stderr.write(
      `  imports: ${label}: ${samples.map((s) => `${s.ms.toFixed(0)} ms / ${s.rssMb.toFixed(0)} MB`).join(", ")}\n`
    )
  }
  const node = medians["node (nothing imported)"]!
  const effect = medians["effect"]!
  const valet = medians["valet"]!
  return writeReport({
    name: "imports",
    description: `import("valet") beside import("effect"), each in a fresh process (median of ${processes})`,
    rows,
    notes: [
      `RSS added over a bare node process: effect ${(effect.rssMb - node.rssMb).toFixed(1)} MB, valet (effect included) ` +
      `${(valet.rssMb - node.rssMb).toFixed(1)} MB; valet's own share ${(valet.rssMb - effect.rssMb).toFixed(1)} MB`,
      `import time: valet ${valet.ms.toFixed(0)} ms = effect ${effect.ms.toFixed(0)} ms + ${(valet.ms - effect.ms).toFixed(0)} ms`
    ]
  })
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.includes("--quick"))
}

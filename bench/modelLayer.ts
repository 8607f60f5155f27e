/**
 * What the model layer's features cost a tool-loop step: the overhead benchmark's valet run (N streamed steps
 * against a zero-latency scripted model) plain, with an image part in the history, with the model behind a one-model
 * `Model.fallback` chain (which always answers; its layer provided to each run, or built once for all), and with a
 * pass-through guardrail of each kind (input, output, tool).
 * One variant per process (a process that runs two makes the runtime's call sites see two shapes, which slows both),
 * processes alternating between variants; each reports the median CPU µs per step (`process.cpuUsage`: on a shared
 * machine, wall time measures the other processes as much as this one) after warm-up runs.
 *
 *   npx tsx bench/modelLayer.ts [--quick]          # needs `npm run build` first (npm run bench does it)
 *   npx tsx bench/modelLayer.ts --worker valet-parts 1000 40
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { frameworks } from "./frameworks/index.js"
import { type Row, summarize, writeReport } from "./support/report.js"

const variants = [
  ["valet", "plain text"],
  ["valet-parts", "an image part in the history"],
  ["valet-fallback", "a one-model fallback chain provided per run"],
  ["valet-fallback-once", "a one-model fallback chain built once"],
  ["valet-guardrails", "a pass-through guardrail of each kind"]
] as const

const worker = async (name: string, steps: number, runs: number) => {
  const framework = await frameworks[name]!()
  const options = { stream: true, yieldPerCall: false }
  const time = async () => {
    const started = process.cpuUsage()
    await framework.run(steps, options)
    const used = process.cpuUsage(started)
    return (used.user + used.system) / steps
  }
  for (let i = 0; i < runs; i++) await time()
  const measured: Array<number> = []
  for (let i = 0; i < runs; i++) measured.push(await time())
  measured.sort((a, b) => a - b)
  console.log(JSON.stringify({ cpuUsPerStep: measured[Math.floor(runs / 2)] }))
}

export const main = (quick: boolean) => {
  const steps = quick ? 50 : 1000
  const runs = quick ? 3 : 40
  const rounds = quick ? 1 : 5
  const samples = new Map<string, Array<number>>(variants.map(([name]) => [name, []]))
  for (let round = 0; round < rounds; round++) {
    for (const [name] of variants) {
      const output = execFileSync(process.execPath, ["--import", "tsx", fileURLToPath(import.meta.url), "--worker", name, String(steps), String(runs)], {
        encoding: "utf8"
      })
      samples.get(name)!.push((JSON.parse(output.trim().split("\n").at(-1)!) as { cpuUsPerStep: number }).cpuUsPerStep)
    }
  }
  const rows: Array<Row> = variants.map(([name, label]) => summarize("valet", `Agent.stream CPU per step, ${label}`, "µs/step", samples.get(name)!))
  return writeReport({
    name: "modelLayer",
    description: `tool-loop CPU time per step with the model layer's features (N=${steps} streamed steps, medians of ${runs} runs after ${runs} warm-ups, ${rounds} processes per variant, alternating)`,
    rows,
    notes: quick ? ["quick run: not for comparison"] : []
  })
}

const args = process.argv.slice(2)
if (args[0] === "--worker") {
  await worker(args[1]!, Number(args[2]), Number(args[3]))
} else if (import.meta.url === `file://${process.argv[1]}`) {
  main(args.includes("--quick"))
}

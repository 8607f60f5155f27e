/**
 * The cost of `Model.fallback` per tool-loop step: the overhead benchmark's valet run (N streamed steps against a
 * zero-latency scripted model), with the bare model or with the same model behind a one-model fallback chain (which
 * always answers). One variant per process (a process that runs both makes the runtime's call sites see two model
 * shapes, which slows both), so alternate processes; each prints the median CPU µs per step (`process.cpuUsage`: on
 * a shared machine, wall time measures the other processes as much as this one) after warm-up runs.
 *
 *   npx tsc -p tsconfig.build.json
 *   for i in 1 2 3 4; do npx tsx bench/fallback.ts bare; npx tsx bench/fallback.ts fallback; done
 */
import { valet, valetFallback } from "./frameworks/valet.js"

const variant = process.argv[2] === "fallback" ? "fallback" : "bare"
const steps = Number(process.argv[3] ?? 1000)
const runs = Number(process.argv[4] ?? 40)
const framework = variant === "fallback" ? valetFallback : valet
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
console.log(JSON.stringify({ variant, steps, runs, cpuUsPerStep: measured[Math.floor(runs / 2)] }))

/**
 * The cost of `Model.fallback` per tool-loop step: the overhead benchmark's valet run (N steps against a zero-latency
 * scripted model, streamed) with the bare model and with the same model behind a one-model fallback chain (which
 * always answers), alternated in one process so both see the same machine load; medians of CPU µs per step
 * (`process.cpuUsage`: on a shared machine, wall time measures the other processes as much as this one).
 *
 *   npx tsc -p tsconfig.build.json && npx tsx bench/fallback.ts [steps] [rounds]
 */
import { valet, valetFallback } from "./frameworks/valet.js"

const steps = Number(process.argv[2] ?? 1000)
const rounds = Number(process.argv[3] ?? 20)
const options = { stream: true, yieldPerCall: false }

const time = async (framework: typeof valet) => {
  const started = process.cpuUsage()
  await framework.run(steps, options)
  const used = process.cpuUsage(started)
  return (used.user + used.system) / steps
}
const median = (values: Array<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

for (let i = 0; i < 5; i++) {
  await time(valet)
  await time(valetFallback)
}
const bare: Array<number> = []
const chained: Array<number> = []
for (let i = 0; i < rounds; i++) {
  bare.push(await time(valet))
  chained.push(await time(valetFallback))
}
console.log(JSON.stringify({ steps, rounds, bareUsPerStep: median(bare), fallbackUsPerStep: median(chained) }))

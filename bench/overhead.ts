/**
 * Framework overhead per tool-loop step: a ReAct run of N steps against a zero-latency scripted model (a call to
 * `add` at steps 1..N-1, a 20-word answer at step N), for valet (`Agent.run`, `Agent.stream`), the Vercel AI SDK
 * (`generateText`, `streamText`), LangGraph.js (`createReactAgent` invoke / stream) and a plain loop. Each cell is
 * the median over several fresh processes, each doing warm-up runs then timed runs.
 *
 *   npx tsx bench/overhead.ts [--quick]
 */
import { frameworks } from "./frameworks/index.js"
import { finalText } from "./frameworks/work.js"
import { runWorker } from "./support/processes.js"
import { type Report, type Row, summarize, writeReport } from "./support/report.js"

const script = "bench/overhead.ts"

const worker = async (name: string, mode: string, steps: number, warmups: number, runs: number) => {
  const framework = frameworks[name]!
  const options = { stream: mode === "stream", yieldPerCall: false }
  for (let i = 0; i < warmups; i++) await framework.run(steps, options)
  const started = performance.now()
  for (let i = 0; i < runs; i++) {
    const output = await framework.run(steps, options)
    if (output !== finalText) throw new Error(`${name} ${mode}: unexpected output ${JSON.stringify(output)}`)
  }
  const usPerStep = ((performance.now() - started) * 1000) / runs / steps
  console.log(JSON.stringify({ usPerStep }))
}

const cells: ReadonlyArray<readonly [framework: string, mode: "run" | "stream", label: string]> = [
  ["valet", "run", "valet Agent.run"],
  ["valet", "stream", "valet Agent.stream"],
  ["ai-sdk", "run", "ai-sdk generateText"],
  ["ai-sdk", "stream", "ai-sdk streamText"],
  ["langgraph", "run", "langgraph invoke"],
  ["langgraph", "stream", "langgraph stream"],
  ["plain", "run", "plain loop"]
]

/** Runs every cell and writes `bench/results/overhead.json`. */
export const main = (quick: boolean): Report => {
  const sizes = quick ? [20] : [200, 10]
  const processes = quick ? 1 : 3
  const rows: Array<Row> = []
  for (const steps of sizes) {
    for (const [framework, mode, label] of cells) {
      const samples: Array<number> = []
      for (let p = 0; p < processes; p++) {
        const runs = quick ? 2 : steps >= 100 ? 20 : 200
        const warmups = quick ? 1 : steps >= 100 ? 3 : 30
        samples.push(runWorker<{ usPerStep: number }>(script, [framework, mode, String(steps), String(warmups), String(runs)]).usPerStep)
      }
      rows.push(summarize(label, `tool loop, N=${steps}`, "µs/step", samples))
      process.stderr.write(`  overhead: ${label} N=${steps}: ${samples.map((s) => s.toFixed(1)).join(", ")} µs/step\n`)
    }
  }
  const at = (label: string, steps: number) =>
    rows.find((row) => row.framework === label && row.measure === `tool loop, N=${steps}`)!.value
  const n = sizes[0]!
  return writeReport({
    name: "overhead",
    description: `framework overhead per ReAct step (median of ${processes} process${processes > 1 ? "es" : ""})`,
    rows,
    notes: [
      `N=${n}: ai-sdk generateText / valet Agent.run = ${(at("ai-sdk generateText", n) / at("valet Agent.run", n)).toFixed(1)}×, ` +
      `langgraph invoke / valet Agent.run = ${(at("langgraph invoke", n) / at("valet Agent.run", n)).toFixed(1)}×, ` +
      `valet Agent.run / plain loop = ${(at("valet Agent.run", n) / at("plain loop", n)).toFixed(1)}×`,
      `N=${n}: ai-sdk streamText / valet Agent.stream = ${(at("ai-sdk streamText", n) / at("valet Agent.stream", n)).toFixed(1)}×, ` +
      `langgraph stream / valet Agent.stream = ${(at("langgraph stream", n) / at("valet Agent.stream", n)).toFixed(1)}×`
    ]
  })
}

const args = process.argv.slice(2)
if (args[0] === "--worker") {
  await worker(args[1]!, args[2]!, Number(args[3]), Number(args[4]), Number(args[5]))
} else if (import.meta.url === `file://${process.argv[1]}`) {
  main(args.includes("--quick"))
}

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

/**
 * Times `runs` runs after `warmups` runs (the protocol: 3 then 20 at N = 200); then, in the same process,
 * `steadyWarmups` more runs and `runs` timed again: the steady state, once V8 has optimized the hot code. The two
 * differ most for the cheapest frameworks, whose first few thousand steps run mostly unoptimized.
 */
const worker = async (name: string, mode: string, steps: number, warmups: number, runs: number, steadyWarmups: number) => {
  const framework = frameworks[name]!
  const options = { stream: mode === "stream", yieldPerCall: false }
  const timed = async () => {
    const started = performance.now()
    for (let i = 0; i < runs; i++) {
      const output = await framework.run(steps, options)
      if (output !== finalText) throw new Error(`${name} ${mode}: unexpected output ${JSON.stringify(output)}`)
    }
    return ((performance.now() - started) * 1000) / runs / steps
  }
  for (let i = 0; i < warmups; i++) await framework.run(steps, options)
  const usPerStep = await timed()
  for (let i = 0; i < steadyWarmups; i++) await framework.run(steps, options)
  const steadyUsPerStep = steadyWarmups > 0 ? await timed() : usPerStep
  console.log(JSON.stringify({ usPerStep, steadyUsPerStep }))
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
  const steadyRows: Array<Row> = []
  for (const steps of sizes) {
    for (const [framework, mode, label] of cells) {
      const samples: Array<number> = []
      const steady: Array<number> = []
      for (let p = 0; p < processes; p++) {
        const runs = quick ? 2 : steps >= 100 ? 20 : 200
        const warmups = quick ? 1 : steps >= 100 ? 3 : 30
        // The steady state is measured at N = 200 only: at N = 10, 30 warm-up runs are already most of the way.
        const steadyWarmups = quick || steps < 100 ? 0 : 30
        const result = runWorker<{ usPerStep: number; steadyUsPerStep: number }>(
          script,
          [framework, mode, String(steps), String(warmups), String(runs), String(steadyWarmups)]
        )
        samples.push(result.usPerStep)
        if (steadyWarmups > 0) steady.push(result.steadyUsPerStep)
      }
      rows.push(summarize(label, `tool loop, N=${steps}`, "µs/step", samples))
      if (steady.length > 0) steadyRows.push(summarize(label, `tool loop, N=${steps}, steady state`, "µs/step", steady))
      process.stderr.write(
        `  overhead: ${label} N=${steps}: ${samples.map((s) => s.toFixed(1)).join(", ")} µs/step` +
          (steady.length > 0 ? `; steady ${steady.map((s) => s.toFixed(1)).join(", ")}` : "") + "\n"
      )
    }
  }
  rows.push(...steadyRows)
  const n = sizes[0]!
  const ratios = (suffix: string) => {
    const at = (label: string) => rows.find((row) => row.framework === label && row.measure === `tool loop, N=${n}${suffix}`)!.value
    const x = (a: string, b: string) => `${(at(a) / at(b)).toFixed(1)}×`
    return [
      `N=${n}${suffix}: ai-sdk generateText / valet Agent.run = ${x("ai-sdk generateText", "valet Agent.run")}, ` +
      `langgraph invoke / valet Agent.run = ${x("langgraph invoke", "valet Agent.run")}, ` +
      `valet Agent.run / plain loop = ${x("valet Agent.run", "plain loop")}`,
      `N=${n}${suffix}: ai-sdk streamText / valet Agent.stream = ${x("ai-sdk streamText", "valet Agent.stream")}, ` +
      `langgraph stream / valet Agent.stream = ${x("langgraph stream", "valet Agent.stream")}, ` +
      `valet Agent.stream / valet Agent.run = ${x("valet Agent.stream", "valet Agent.run")}`
    ]
  }
  return writeReport({
    name: "overhead",
    description: `framework overhead per ReAct step (median of ${processes} process${processes > 1 ? "es" : ""})`,
    rows,
    notes: [
      ...ratios(""),
      ...(quick ? [] : ratios(", steady state")),
      ...(quick ? [] : [`N=${n}: 3 warm-up runs then 20 timed runs; steady state: 30 more runs then 20 timed, in the same process`])
    ]
  })
}

const args = process.argv.slice(2)
if (args[0] === "--worker") {
  await worker(args[1]!, args[2]!, Number(args[3]), Number(args[4]), Number(args[5]), Number(args[6] ?? 0))
} else if (import.meta.url === `file://${process.argv[1]}`) {
  main(args.includes("--quick"))
}

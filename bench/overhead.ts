/**
 * Framework overhead per tool-loop step: a ReAct run of N steps against a zero-latency scripted model (a call to
 * `add` at steps 1..N-1, a 20-word answer at step N), generate and stream, for valet (`Agent.run`, `Agent.stream`),
 * the Vercel AI SDK 7 (`ToolLoopAgent`) and 6 (`generateText` / `streamText`), OpenAI Agents JS, Mastra, a loop written
 * by hand on Effect 4's `effect/ai`, LangGraph.js (`createReactAgent`) and a plain loop (the floor). Each cell is the
 * median over several fresh processes, each doing warm-up runs then timed runs.
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
 * `steadyWarmups` more runs and at least `runs` timed again, for at least `steadyMs` (the steady state, once V8 has
 * optimized the hot code). The two differ most for the cheapest frameworks, whose first few thousand steps run mostly
 * unoptimized. The steady window has a minimum length because 20 runs of N = 200 last 12 ms for the fastest
 * framework here and 60 s for the slowest: in 12 ms one garbage collection decides the number (valet's steady
 * N = 200 ranged 3.2–11.7 µs/step across processes), where a longer window pays its share of them like the others.
 */
const worker = async (name: string, mode: string, steps: number, warmups: number, runs: number, steadyWarmups: number) => {
  const framework = await frameworks[name]!()
  const options = { stream: mode === "stream", yieldPerCall: false }
  const timed = async (minimumMs: number) => {
    const started = performance.now()
    let done = 0
    while (done < runs || performance.now() - started < minimumMs) {
      const output = await framework.run(steps, options)
      if (output !== finalText) throw new Error(`${name} ${mode}: unexpected output ${JSON.stringify(output)}`)
      done++
    }
    return ((performance.now() - started) * 1000) / done / steps
  }
  for (let i = 0; i < warmups; i++) await framework.run(steps, options)
  const usPerStep = await timed(0)
  for (let i = 0; i < steadyWarmups; i++) await framework.run(steps, options)
  const steadyUsPerStep = steadyWarmups > 0 ? await timed(steadyMs) : usPerStep
  console.log(JSON.stringify({ usPerStep, steadyUsPerStep }))
}

/** The shortest steady-state window, in ms. */
const steadyMs = 1_000

/** Every framework, generate and stream, with the label of its row. */
const cells: ReadonlyArray<readonly [framework: string, mode: "run" | "stream", label: string]> = [
  ["valet", "run", "valet Agent.run"],
  ["valet", "stream", "valet Agent.stream"],
  ["ai-sdk-7", "run", "ai@7 ToolLoopAgent.generate"],
  ["ai-sdk-7", "stream", "ai@7 ToolLoopAgent.stream"],
  ["ai-sdk", "run", "ai@6 generateText"],
  ["ai-sdk", "stream", "ai@6 streamText"],
  ["openai-agents", "run", "@openai/agents run"],
  ["openai-agents", "stream", "@openai/agents run (stream)"],
  ["mastra", "run", "mastra Agent.generate"],
  ["mastra", "stream", "mastra Agent.stream"],
  ["effect-ai", "run", "effect/ai loop (generateText)"],
  ["effect-ai", "stream", "effect/ai loop (streamText)"],
  ["langgraph", "run", "langgraph invoke"],
  ["langgraph", "stream", "langgraph stream"],
  ["plain", "run", "plain loop"]
]

const formatUs = (n: number): string => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2))

/**
 * The table of the issue: one line per framework and mode, µs/step at N = 10 and N = 200, cold (the first timed
 * runs) and steady, and the ratio to valet in the same mode (at the largest N, steady when measured).
 */
const pivot = (rows: ReadonlyArray<Row>, sizes: ReadonlyArray<number>): string => {
  const value = (label: string, measure: string) => rows.find((row) => row.framework === label && row.measure === measure)?.value
  const columns = sizes.flatMap((n) => [`tool loop, N=${n}`, `tool loop, N=${n}, steady state`])
  const header = ["framework", ...sizes.flatMap((n) => [`N=${n} cold`, `N=${n} steady`]), "× valet"]
  const lines = [header]
  // The ratio at the largest N: steady when measured, else cold.
  const last = columns.at(-1)!
  const ratioColumn = rows.some((row) => row.measure === last) ? last : columns.at(-2)!
  for (const [, mode, label] of cells) {
    const valetLabel = mode === "run" ? "valet Agent.run" : "valet Agent.stream"
    const mine = value(label, ratioColumn)
    const valet = value(valetLabel, ratioColumn)
    lines.push([
      label,
      ...columns.map((column) => {
        const v = value(label, column)
        return v === undefined ? "—" : formatUs(v)
      }),
      mine === undefined || valet === undefined ? "—" : `${(mine / valet).toFixed(1)}×`
    ])
  }
  const widths = header.map((_, i) => Math.max(...lines.map((line) => line[i]!.length)))
  return lines.map((line) => line.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ")).join("\n")
}

/** Runs every cell and writes `bench/results/overhead.json`. */
export const main = (quick: boolean): Report => {
  const sizes = quick ? [20] : [10, 200]
  const processes = quick ? 1 : 3
  const rows: Array<Row> = []
  for (const steps of sizes) {
    for (const [framework, mode, label] of cells) {
      const samples: Array<number> = []
      const steady: Array<number> = []
      for (let p = 0; p < processes; p++) {
        // Cold: the first runs of a fresh process (3 warm-up runs at N = 200, 30 at N = 10, as the protocol);
        // steady: after as many steps again as 30 runs of N = 200 (6,000), once V8 has optimized the hot code.
        const runs = quick ? 2 : steps >= 100 ? 20 : 100
        const warmups = quick ? 1 : steps >= 100 ? 3 : 30
        const steadyWarmups = quick ? 0 : Math.round(6000 / steps)
        const result = runWorker<{ usPerStep: number; steadyUsPerStep: number }>(
          script,
          [framework, mode, String(steps), String(warmups), String(runs), String(steadyWarmups)]
        )
        samples.push(result.usPerStep)
        if (steadyWarmups > 0) steady.push(result.steadyUsPerStep)
      }
      rows.push(summarize(label, `tool loop, N=${steps}`, "µs/step", samples))
      if (steady.length > 0) rows.push(summarize(label, `tool loop, N=${steps}, steady state`, "µs/step", steady))
      process.stderr.write(
        `  overhead: ${label} N=${steps}: ${samples.map((s) => s.toFixed(1)).join(", ")} µs/step` +
          (steady.length > 0 ? `; steady ${steady.map((s) => s.toFixed(1)).join(", ")}` : "") + "\n"
      )
    }
  }
  const table = pivot(rows, sizes)
  console.log(`\nframework overhead per ReAct step, µs (median of ${processes} process${processes > 1 ? "es" : ""}):\n${table}`)
  return writeReport({
    name: "overhead",
    description: `framework overhead per ReAct step (median of ${processes} process${processes > 1 ? "es" : ""})`,
    rows,
    notes: [
      ...table.split("\n"),
      ...(quick ? [] : ["cold: 30 warm-up runs then 100 timed at N=10, 3 then 20 at N=200; steady: 6,000 more steps, then timed again (as many runs, and for at least 1 s), in the same process"])
    ]
  })
}

const args = process.argv.slice(2)
if (args[0] === "--worker") {
  await worker(args[1]!, args[2]!, Number(args[3]), Number(args[4]), Number(args[5]), Number(args[6] ?? 0))
} else if (import.meta.url === `file://${process.argv[1]}`) {
  main(args.includes("--quick"))
}

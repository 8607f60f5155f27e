/**
 * Memory per concurrent session: 1,000 sessions of 5 steps in flight at once, the mock model yielding to the
 * event loop once per call. Peak heap per session is (peak heap − heap at start after a forced GC) / sessions;
 * live heap per session is measured after a forced GC half-way through the run, when every session is in flight.
 *
 *   npx tsx bench/memory.ts [--quick]
 */
import { frameworks } from "./frameworks/index.js"
import { finalText, type Framework, hooks } from "./frameworks/work.js"
import { runWorker } from "./support/processes.js"
import { type Report, type Row, summarize, writeReport } from "./support/report.js"

const script = "bench/memory.ts"

declare const gc: () => void

/**
 * Runs `sessions` sessions of `steps` at once on `framework` (after 20 to warm up) and answers the peak and live heap
 * per session, in KB. The process must run with `--expose-gc`.
 */
export const measure = async (framework: Framework, sessions: number, steps: number): Promise<{ peakKb: number; liveKb: number }> => {
  // Warm up the code paths (and the JIT) outside the measurement.
  await Promise.all(Array.from({ length: 20 }, () => framework.run(steps, { stream: false, yieldPerCall: true })))
  gc()
  const start = process.memoryUsage().heapUsed
  let peak = start
  let calls = 0
  let live = 0
  const half = Math.floor((sessions * steps) / 2)
  hooks.onYield = () => {
    calls++
    const heap = process.memoryUsage().heapUsed
    if (heap > peak) peak = heap
    if (calls === half) {
      gc()
      live = process.memoryUsage().heapUsed - start
    }
  }
  const outputs = await Promise.all(
    Array.from({ length: sessions }, () => framework.run(steps, { stream: false, yieldPerCall: true }))
  )
  hooks.onYield = undefined
  if (outputs.some((output) => output !== finalText)) throw new Error(`${framework.name}: a session did not finish`)
  return { peakKb: (peak - start) / 1024 / sessions, liveKb: live / 1024 / sessions }
}

const worker = async (name: string, sessions: number, steps: number) => {
  console.log(JSON.stringify(await measure(await frameworks[name]!(), sessions, steps)))
}

const cells: ReadonlyArray<readonly [framework: string, label: string]> = [
  ["valet", "valet Agent.run"],
  ["ai-sdk-7", "ai@7 ToolLoopAgent.generate"],
  ["ai-sdk", "ai@6 generateText"],
  ["openai-agents", "@openai/agents run"],
  ["mastra", "mastra Agent.generate"],
  ["effect-ai", "effect/ai loop (generateText)"],
  ["langgraph", "langgraph invoke"],
  ["plain", "plain loop"]
]

/** Runs every cell and writes `bench/results/memory.json`. */
export const main = (quick: boolean): Report => {
  const sessions = quick ? 100 : 1000
  const steps = 5
  const processes = quick ? 1 : 3
  const rows: Array<Row> = []
  for (const [framework, label] of cells) {
    const peak: Array<number> = []
    const live: Array<number> = []
    for (let p = 0; p < processes; p++) {
      const result = runWorker<{ peakKb: number; liveKb: number }>(script, [framework, String(sessions), String(steps)], ["--expose-gc"])
      peak.push(result.peakKb)
      live.push(result.liveKb)
    }
    rows.push(summarize(label, `peak heap / session (${sessions}×${steps} steps)`, "KB", peak))
    rows.push(summarize(label, `live heap / session mid-run`, "KB", live))
    process.stderr.write(`  memory: ${label}: peak ${peak.map((v) => v.toFixed(1)).join(", ")} KB, live ${live.map((v) => v.toFixed(1)).join(", ")} KB\n`)
  }
  return writeReport({
    name: "memory",
    description: `heap per concurrent session (median of ${processes} process${processes > 1 ? "es" : ""})`,
    rows
  })
}

// Only as the process's script: `bench/deepAgent.ts` imports `measure` in workers of its own.
const args = process.argv.slice(2)
if (import.meta.url === `file://${process.argv[1]}`) {
  if (args[0] === "--worker") await worker(args[1]!, Number(args[2]), Number(args[3]))
  else main(args.includes("--quick"))
}

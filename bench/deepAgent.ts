/**
 * valet's `DeepAgent` beside LangChain's `deepagents` (`createDeepAgent`, its default in-memory state backend, on a
 * scripted model of its own), on the same scripted task (`frameworks/deepWork.ts`): a plan of 4 steps
 * (`write_todos`), then `write_file`, `read_file`, `edit_file`, `ls` and `write_todos` in turn on an in-memory
 * workspace, one tool call per step, and a 20-word answer at step N (N = 6: plan, write, read, edit, list, answer).
 *
 * - Overhead per step: CPU time (`process.cpuUsage`: on a shared machine, wall time measures the other processes as
 *   much as this one) and wall time per model call, at N = 6 (one session of the task) and N = 60 (a longer one),
 *   generate and stream; each process checks one session's work first (every tool result a success, the file
 *   edited, the answer), warms up (1,200 steps and 2 s), then times runs for at least 2 s; the cell is the median
 *   over processes, run in alternating rounds.
 * - Memory per session: the memory benchmark's protocol (`measure` of `bench/memory.ts`): sessions of the task
 *   (N = 6) all in flight at once, the mock model yielding to the event loop on every call; peak and live heap.
 *
 *   npx tsx bench/deepAgent.ts [--quick]    # needs `npm run build` first (npm run bench does it)
 *   npx tsx bench/deepAgent.ts --worker deepagents run 6 1200 10 2000 0   # one cell: framework mode N warm-up-steps runs ms sessions
 */
import type { Check } from "./frameworks/deepWork.js"
import { finalText } from "./frameworks/deepWork.js"
import { frameworks } from "./frameworks/index.js"
import * as Memory from "./memory.js"
import { runWorker } from "./support/processes.js"
import { median, type Report, type Row, summarize, writeReport } from "./support/report.js"

const script = "bench/deepAgent.ts"

/** Each side's session check, by framework name (loaded with the framework: one framework per process). */
const checks: Record<string, () => Promise<(steps: number) => Promise<Check>>> = {
  "valet-deep": () => import("./frameworks/valetDeep.js").then((m) => m.check),
  deepagents: () => import("./frameworks/deepagents.js").then((m) => m.check)
}

/** Fails unless a session did the whole task: one successful tool result per step but the last, the edit, the answer. */
const verify = (name: string, steps: number, done: Check): void => {
  const problems = [
    ...(done.output === finalText ? [] : [`answered ${JSON.stringify(done.output.slice(0, 80))}`]),
    ...(done.results.length === steps - 1 ? [] : [`${done.results.length} tool results, not ${steps - 1}`]),
    ...done.results.filter((result) => result.isError).map((result) => `${result.tool} failed: ${result.content.slice(0, 200)}`),
    ...(done.file.includes("status: final") ? [] : [`notes.md was not edited: ${JSON.stringify(done.file.slice(0, 80))}`])
  ]
  if (problems.length > 0) throw new Error(`${name}, N=${steps}: the session did not do the task: ${problems.join("; ")}`)
}

/**
 * The overhead of `steps`-step sessions in `mode`, timed after `warmupSteps` and at least `minMs` of warm-up (V8 has
 * optimized the hot code by then: valet's cheap steps need the time, deepagents' dear ones the steps — its cost per
 * step is the same after 6,000 as after 1,200).
 */
const overhead = async (name: string, mode: string, steps: number, warmupSteps: number, minRuns: number, minMs: number) => {
  verify(name, steps, await (await checks[name]!())(steps))
  const framework = await frameworks[name]!()
  const options = { stream: mode === "stream", yieldPerCall: false }
  const warmups = Math.ceil(warmupSteps / steps)
  const warming = performance.now()
  for (let i = 0; i < warmups || performance.now() - warming < minMs; i++) await framework.run(steps, options)
  const cpu: Array<number> = []
  const wall: Array<number> = []
  const started = performance.now()
  while (cpu.length < minRuns || performance.now() - started < minMs) {
    const cpuStart = process.cpuUsage()
    const wallStart = performance.now()
    const output = await framework.run(steps, options)
    const used = process.cpuUsage(cpuStart)
    wall.push(((performance.now() - wallStart) * 1000) / steps)
    cpu.push((used.user + used.system) / steps)
    if (output !== finalText) throw new Error(`${name} ${mode}: unexpected output ${JSON.stringify(output)}`)
  }
  return { cpuUsPerStep: median(cpu), wallUsPerStep: median(wall), runs: cpu.length }
}

/** Steps of a session in the memory measure: the task. */
const taskSteps = 6

/**
 * A worker process: the overhead of one cell (when `steps` > 0), then the heap of `sessions` concurrent sessions of
 * the task (when `sessions` > 0; the process runs with `--expose-gc`). A quick run does both in one process per
 * framework (each process spends seconds importing its framework); a full run measures each in fresh processes.
 */
const worker = async (name: string, mode: string, steps: number, warmupSteps: number, minRuns: number, minMs: number, sessions: number) => {
  const timed = steps > 0 ? await overhead(name, mode, steps, warmupSteps, minRuns, minMs) : {}
  if (sessions === 0) return console.log(JSON.stringify(timed))
  if (steps === 0) verify(name, taskSteps, await (await checks[name]!())(taskSteps))
  console.log(JSON.stringify({ ...timed, ...(await Memory.measure(await frameworks[name]!(), sessions, taskSteps)) }))
}

/** The overhead cells: framework, mode, label. */
const cells: ReadonlyArray<readonly [framework: string, mode: "run" | "stream", label: string]> = [
  ["valet-deep", "run", "valet DeepAgent Agent.run"],
  ["valet-deep", "stream", "valet DeepAgent Agent.stream"],
  ["deepagents", "run", "deepagents invoke"],
  ["deepagents", "stream", "deepagents stream"]
]

const format = (n: number): string => (n >= 1000 ? n.toLocaleString("en-US", { maximumFractionDigits: 0 }) : n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2))

/** One line per framework and mode: CPU and wall µs/step and the CPU ratio to valet in the same mode at each N; the heap. */
const pivot = (rows: ReadonlyArray<Row>, sizes: ReadonlyArray<number>, measured: typeof cells): string => {
  const value = (label: string, measure: string) => rows.find((row) => row.framework === label && row.measure === measure)?.value
  const cell = (v: number | undefined) => (v === undefined ? "—" : format(v))
  const header = ["framework", ...sizes.flatMap((n) => [`N=${n} CPU`, `N=${n} wall`, `N=${n} × valet`]), "peak KB", "live KB"]
  const lines = [header]
  for (const [, mode, label] of measured) {
    const valetLabel = mode === "run" ? "valet DeepAgent Agent.run" : "valet DeepAgent Agent.stream"
    lines.push([
      label,
      ...sizes.flatMap((n) => {
        const mine = value(label, `CPU per step, N=${n}`)
        const valet = value(valetLabel, `CPU per step, N=${n}`)
        return [cell(mine), cell(value(label, `wall per step, N=${n}`)), mine === undefined || valet === undefined ? "—" : `${(mine / valet).toFixed(1)}×`]
      }),
      cell(rows.find((row) => row.framework === label && row.measure.startsWith("peak heap"))?.value),
      cell(value(label, "live heap / session mid-run"))
    ])
  }
  const widths = header.map((_, i) => Math.max(...lines.map((line) => line[i]!.length)))
  return lines.map((line) => line.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ")).join("\n")
}

interface Sample {
  readonly cpuUsPerStep?: number
  readonly wallUsPerStep?: number
  readonly peakKb?: number
  readonly liveKb?: number
}

/** Runs every cell and writes `bench/results/deepAgent.json`. */
export const main = (quick: boolean): Report => {
  const sizes = quick ? [6] : [6, 60]
  const rounds = quick ? 1 : 5
  // quick: generate only (CI checks that it runs; both sides' stream paths are measured in full runs)
  const measured = quick ? cells.filter(([, mode]) => mode === "run") : cells
  const warmupSteps = quick ? 30 : 1_200
  const minRuns = quick ? 3 : 10
  const minMs = quick ? 0 : 2_000
  const sessions = quick ? 50 : 1_000
  const memoryProcesses = quick ? 1 : 3
  const samples = new Map<string, Array<number>>()
  const add = (label: string, measure: string, value: number | undefined) => {
    if (value === undefined) return
    samples.set(`${label}|${measure}`, [...(samples.get(`${label}|${measure}`) ?? []), value])
  }
  const run = (framework: string, mode: string, label: string, steps: number, memorySessions: number) => {
    const result = runWorker<Sample>(
      script,
      [framework, mode, String(steps), String(warmupSteps), String(minRuns), String(minMs), String(memorySessions)],
      memorySessions > 0 ? ["--expose-gc"] : []
    )
    add(label, `CPU per step, N=${steps}`, result.cpuUsPerStep)
    add(label, `wall per step, N=${steps}`, result.wallUsPerStep)
    add(label, `peak heap / session (${sessions}×${taskSteps} steps)`, result.peakKb)
    add(label, "live heap / session mid-run", result.liveKb)
    process.stderr.write(`  deepAgent: ${label}${steps > 0 ? ` N=${steps}` : ""}: ${JSON.stringify(result)}\n`)
  }
  for (let round = 0; round < rounds; round++) {
    for (const steps of sizes) {
      // Alternating frameworks within a round: a burst of load on the machine falls on both sides.
      for (const [framework, mode, label] of measured) run(framework, mode, label, steps, quick && mode === "run" ? sessions : 0)
    }
  }
  // Memory per session on the task, in fresh processes (a quick run measured it above).
  if (!quick) {
    for (let p = 0; p < memoryProcesses; p++) {
      for (const [framework, mode, label] of cells) if (mode === "run") run(framework, mode, label, 0, sessions)
    }
  }
  const rows: Array<Row> = []
  for (const [, , label] of measured) {
    for (const [key, values] of samples) {
      const [of, measure] = key.split("|") as [string, string]
      if (of === label) rows.push(summarize(label, measure, measure.startsWith("CPU") || measure.startsWith("wall") ? "µs/step" : "KB", values))
    }
  }
  const table = pivot(rows, sizes, measured)
  console.log(`\nDeepAgent beside deepagents, µs per step (median of ${rounds} process${rounds > 1 ? "es" : ""}) and KB per session:\n${table}`)
  return writeReport({
    name: "deepAgent",
    description: `valet DeepAgent beside deepagents on the same scripted task: overhead per step (median of ${rounds} process${rounds > 1 ? "es" : ""}) and heap per concurrent session`,
    rows,
    notes: [
      ...table.split("\n"),
      `overhead: ${warmupSteps} warm-up steps${minMs > 0 ? ` and ${minMs} ms` : ""}, then at least ${minRuns} timed runs${minMs > 0 ? ` and ${minMs} ms` : ""}, the median run per process (CPU: process.cpuUsage); memory: ${sessions} sessions of N=${taskSteps} at once, ${memoryProcesses} process${memoryProcesses > 1 ? "es" : ""}`,
      ...(quick ? ["quick run: not for comparison"] : [])
    ]
  })
}

const args = process.argv.slice(2)
if (args[0] === "--worker") {
  await worker(args[1]!, args[2]!, Number(args[3]), Number(args[4]), Number(args[5]), Number(args[6]), Number(args[7]))
} else if (import.meta.url === `file://${process.argv[1]}`) {
  main(args.includes("--quick"))
}

/**
 * Durable evaluations (issue 16): throughput of a Self-Refine evaluation against a loopback model server that
 * answers each call after 50 ms (test/support/scriptedModelServer.ts), run by the `valet` CLI as real processes:
 *
 * - `valet eval` in one process, not durable (the floor);
 * - `valet eval --durable <file>` on SQLite (one process);
 * - `valet eval --durable postgres://…` with 1 and with 3 `valet runner` processes on a throwaway PostgreSQL server
 *   (started here with initdb / pg_ctl; the rows are left out, with a note, when there is none).
 *
 * Problems per minute are counted from the client's "evaluating" line to its exit (process start-up excluded; the
 * runners are given 3 s after they start to know each other). For the runners, their CPU time over the evaluation
 * (user + system, from /proc) divided by the activities and workflows they served (model calls + problems), after
 * three evaluations of the same size have warmed them up (not counted); the median of three measured evaluations.
 * (Before valet's own engine ran on PostgreSQL, effect/cluster's runners measured 5.8–6.7 ms here.)
 * Measured 2026-11-27 (load 0.8–1.9), one runner: 1.98 ms an activity with the method before (one warm-up evaluation,
 * one measured, the model server answering chunked) -> 1.42, 1.02, 1.42 in three runs (each the median of three
 * evaluations; spreads 1.42–1.44, 0.94–1.10, 1.40–1.56). Then two pairs run in turn with the method before (at
 * 0e46fa8): 2.19 -> 1.60 (1.27–1.67) and 1.98 -> 1.44 (1.38–1.50); three runners in all 4.21 -> 2.48, 2.98 -> 2.79.
 * Two changes of method, no change of valet:
 * - the model server answers with `Content-Length`, as vLLM's OpenAI server (FastAPI's `JSONResponse`) does. A chunked
 *   body sends valet's client down its capped streaming read (effect/http aborts the request's AbortController when
 *   that read ends: a DOMException each, and a stream's stages): 100–250 µs more CPU a model call, measured by
 *   the slope of a plain `valet eval`'s CPU over its calls (940–960 against 1,040–1,200 µs a call);
 * - the runners warm up on three evaluations, not one: after one, a runner's CPU an activity still fell by a
 *   quarter over the next two (1.48 -> 1.04–1.09 ms, evaluations of 240 problems), V8 still optimizing.
 * Where a runner's CPU goes, steady: a plain (not durable) `valet eval` costs 0.7 ms an activity of this evaluation
 * by itself (the model's HTTP call is about half of it: 450–500 µs a request at 12 in flight through valet's client,
 * 190–320 µs through undici alone); the durable engine on PostgreSQL adds 0.3–0.9 ms (its statements, effect/
 * workflow's activity machinery: each result encoded and decoded by its schema). A runner's statements, counted in
 * PostgreSQL's log over 120 problems: 704 for 480 activities (an activity's row 360, the result 120, the read of a new
 * execution's deferreds 120, the takes 104), about 1.5 an activity. Three runners in all, the same three bench runs:
 * 2.56, 2.54, 2.71 ms an activity (3.96 with the method before).
 * Then the overhead per activity, in process: the same evaluation on a scripted model that answers at once, plain
 * (`Evaluate.run`) and durable (`Durable.evaluate` on `WorkflowEngine.layerMemory`, on SQLite as `layerSqlite` makes
 * it, and on SQLite with `synchronous: "full"`, a disk sync per commit), divided by the model calls.
 *
 *   npx tsx bench/durable.ts [--quick]      # needs `npm run build` first (npm run bench does it)
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { Reactivity } from "effect/reactivity"
import { WorkflowEngine } from "effect/workflow"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, ScriptedModel, SelfRefine } from "valet"
import * as Durable from "valet/Durable"
import * as Evaluate from "valet/Evaluate"
import { findBinaries, startCluster } from "../test/support/postgresSetup.js"
import * as ScriptedServer from "../test/support/scriptedModelServer.js"
import { startValet, type ValetProcess } from "../test/support/valetProcess.js"
import { type Row, summarize, writeReport } from "./support/report.js"

const quick = process.argv.includes("--quick")
const problems = quick ? 24 : 120
const concurrency = Number(process.env["VALET_BENCH_CONCURRENCY"] ?? 12)
const latencyMs = 50
// The runners' warm-up evaluations before they are measured, and the measured evaluations (their median is the row).
const warmUps = quick ? 1 : 3
const measuredRuns = quick ? 1 : 3
const evalArgs = ["--architecture", "self_refine", "--max-rounds", "2", "--concurrency", String(concurrency)]

const rows: Array<Row> = []
const notes: Array<string> = []
const dir = mkdtempSync(join(tmpdir(), "valet-bench-durable-"))
// Removed however the benchmark ends (a failed row throws).
process.on("exit", () => rmSync(dir, { recursive: true, force: true }))
const dataset = join(dir, "problems.jsonl")
writeFileSync(dataset, ScriptedServer.dataset(problems))

/** Problems per minute of one `valet eval`, from its "evaluating" line to its exit. */
const timedEval = async (name: string, args: ReadonlyArray<string>): Promise<number> => {
  const client = startValet(["eval", dataset, ...evalArgs, "--out", join(dir, `${name}.jsonl`), ...args])
  await client.waitFor(/^evaluating /)
  const started = performance.now()
  const code = await client.exited
  if (code !== 0) throw new Error(`${name}: valet eval exited ${code}: ${client.lines.slice(-5).join("\n")}`)
  return problems / ((performance.now() - started) / 60_000)
}

/** The CPU time of a process so far (user + system, ms), from /proc: Linux only, `undefined` elsewhere. */
const cpuMsOf = (pid: number | undefined): number | undefined => {
  try {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th, in clock ticks (100 Hz).
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) * 10
  } catch {
    return undefined
  }
}

const server = await ScriptedServer.start({ latencyMs })
const model = ["--base-url", server.url, "--model", "scripted"]
try {
  const plain = await timedEval("plain", model)
  // The calls of one evaluation (the runners' warm-ups add more to the server's count).
  const callsPerEvaluation = server.total()
  rows.push({ framework: "valet", measure: `eval, one process, not durable (${problems} problems)`, value: plain, unit: "problems/min" })
  const sqlite = await timedEval("sqlite", [...model, "--durable", join(dir, "durable.db")])
  rows.push({ framework: "valet", measure: "eval --durable sqlite, one process", value: sqlite, unit: "problems/min" })

  const bin = findBinaries()
  if (bin === undefined) {
    notes.push("no PostgreSQL binaries (initdb, pg_ctl): the runner rows are left out")
  } else {
    const cluster = await startCluster(bin)
    const runners: Array<ValetProcess> = []
    try {
      for (const count of [1, 3]) {
        const database = `bench_${count}`
        const admin = startValet(["eval", "--help"]) // warms tsx's cache before the timed processes
        await admin.exited
        const url = new URL(cluster.url)
        // A database of its own per row: the runners of one row never see the other's work.
        await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
          const sql = yield* PgClient.make({ url: Redacted.make(cluster.url), maxConnections: 1 })
          yield* sql`CREATE DATABASE ${sql(database)}`
        })).pipe(Effect.provide(Reactivity.layer)))
        url.pathname = `/${database}`
        for (let i = 0; i < count; i++) {
          const runner = startValet(["runner", "--store", url.toString(), ...model])
          runners.push(runner)
          await runner.waitFor(/valet runner: serving/)
        }
        // Runners learn of each other at their heartbeats (1 s): measured once each knows all the others.
        await new Promise((resolve) => setTimeout(resolve, 3000))
        // And once warm: a runner serves for hours, and its first evaluations are mostly V8 compiling and optimizing
        // valet (the first 120 problems cost about 1.3 s of CPU a process here, and an evaluation of 240 after them
        // still 35–40 % more an activity than later ones). The warm-ups are evaluations of their own (other results files, other
        // keys), not counted.
        for (let warm = 0; warm < warmUps; warm++) await timedEval(`postgres-${count}-warm-up-${warm}`, ["--durable", url.toString()])
        const rates: Array<number> = []
        const cpuPerActivity: Array<number> = []
        for (let measured = 0; measured < measuredRuns; measured++) {
          const cpuBefore = runners.map((runner) => cpuMsOf(runner.child.pid))
          const callsBefore = server.total()
          rates.push(await timedEval(`postgres-${count}-${measured}`, ["--durable", url.toString()]))
          const cpuAfter = runners.map((runner) => cpuMsOf(runner.child.pid))
          if (![...cpuBefore, ...cpuAfter].includes(undefined)) {
            const cpu = cpuAfter.reduce((sum: number, after, i) => sum + after! - cpuBefore[i]!, 0)
            cpuPerActivity.push(Number((cpu / (server.total() - callsBefore + problems)).toFixed(2)))
          }
        }
        const runnersText = `${count} runner${count === 1 ? "" : "s"}`
        rows.push(summarize("valet", `eval --durable postgres, ${runnersText}`, "problems/min", rates))
        if (cpuPerActivity.length > 0) {
          rows.push(summarize("valet", `runner CPU per activity, ${runnersText} (all runners' CPU ÷ model calls + problems)`, "ms", cpuPerActivity))
        }
        for (const runner of runners.splice(0)) {
          runner.kill("SIGKILL")
          await runner.exited
        }
      }
    } finally {
      for (const runner of runners) runner.kill("SIGKILL")
      cluster.stop()
    }
  }
  notes.push(
    `${problems} problems, ${concurrency} at once, Self-Refine (2 to 4 calls a problem), each call answered after ${latencyMs} ms; ` +
      `the ideal is ${Math.round((60_000 / ((callsPerEvaluation / problems) * latencyMs)) * concurrency)} problems/min`
  )
} finally {
  await server.close()
}

// ---------------------------------------------------------------------------------------------------------
// Overhead per activity, in process
// ---------------------------------------------------------------------------------------------------------

const solver = Agent.make({ name: "solver", instructions: "", architecture: Effect.runSync(SelfRefine.make({ maxRounds: 2 })) })
const scripted = () =>
  ScriptedModel.layer((request) => {
    const messages = (request.messages ?? []).map((message) => ({ role: message.role, content: typeof message.content === "string" ? message.content : "" }))
    return ScriptedServer.answerOf(messages)
  })
const inProcess = quick ? 60 : 300
writeFileSync(join(dir, "inprocess.jsonl"), ScriptedServer.dataset(inProcess))
const timed = async (run: () => Promise<Evaluate.Report>): Promise<{ ms: number; calls: number }> => {
  const started = performance.now()
  const report = await run()
  return { ms: performance.now() - started, calls: report.summary.totalCalls }
}
const options = { concurrency, agent: solver }
const samples = { plain: [] as Array<number>, memory: [] as Array<number>, sqlite: [] as Array<number>, full: [] as Array<number> }
for (let round = 0; round < (quick ? 1 : 3); round++) {
  const plain = await timed(() =>
    Effect.runPromise(Evaluate.run(join(dir, "inprocess.jsonl"), options).pipe(Effect.provide(Layer.merge(scripted(), NodeFileSystem.layer))))
  )
  const memory = await timed(() =>
    Effect.runPromise(
      Durable.evaluate(join(dir, "inprocess.jsonl"), { ...options, evaluation: `memory-${round}` }).pipe(
        Effect.provide(Layer.merge(Durable.layer([solver]).pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provide(scripted())), NodeFileSystem.layer))
      )
    )
  )
  const sqlite = await timed(() =>
    Effect.runPromise(
      Durable.evaluate(join(dir, "inprocess.jsonl"), { ...options, evaluation: `sqlite-${round}` }).pipe(
        Effect.provide(Layer.merge(Durable.layer([solver]).pipe(Layer.provideMerge(Durable.layerSqlite(join(dir, `overhead-${round}.db`))), Layer.provide(scripted())), NodeFileSystem.layer))
      )
    )
  )
  const full = await timed(() =>
    Effect.runPromise(
      Durable.evaluate(join(dir, "inprocess.jsonl"), { ...options, evaluation: `full-${round}` }).pipe(
        Effect.provide(Layer.merge(Durable.layer([solver]).pipe(Layer.provideMerge(Durable.layerSqlite(join(dir, `overhead-full-${round}.db`), { synchronous: "full" })), Layer.provide(scripted())), NodeFileSystem.layer))
      )
    )
  )
  samples.full.push(((full.ms - plain.ms) * 1000) / full.calls)
  samples.plain.push((plain.ms * 1000) / plain.calls)
  samples.memory.push(((memory.ms - plain.ms) * 1000) / memory.calls)
  samples.sqlite.push(((sqlite.ms - plain.ms) * 1000) / sqlite.calls)
}
rows.push(summarize("valet", `eval in process, not durable, per model call (${inProcess} problems, instant model)`, "µs", samples.plain))
rows.push(summarize("valet", "added per activity: Durable on WorkflowEngine.layerMemory", "µs", samples.memory))
rows.push(summarize("valet", "added per activity: Durable on SQLite (Durable.layerSqlite)", "µs", samples.sqlite))
rows.push(summarize("valet", "added per activity: Durable on SQLite, synchronous: \"full\" (a disk sync per commit)", "µs", samples.full))

console.log("\n=== durable evaluations ===")
writeReport({ name: "durable", description: "durable evaluations: throughput and overhead per activity", rows, notes })

/**
 * Heap per durable run waiting for a person (issue 28 part 3; goal under 2 KB): N agent runs on
 * `Durable.layerSqlite`, each of whose first model call asks for a tool that needs approval, started at once; when
 * every one waits (its call in `Durable.pending`, its workflow suspended and dropped from the engine's memory), the
 * heap is read after a forced GC, at once and then 15 and 30 s later (with effect/cluster's engine, which valet's
 * SQLite layer used before, idle workflow entities were released after 10 s), against the heap of the same engine
 * before the runs (after one run, for the JIT and the tables). Then every call is approved
 * (`Durable.decide`) and every run must finish with its tool run once.
 *
 *   node_modules/.bin/node --expose-gc --import tsx bench/approvals.ts [--quick]     # runs=1000 quick, 2000 full
 */
import { Effect, Layer, Schema } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { getHeapSpaceStatistics } from "node:v8"
import { Agent, ScriptedModel, Tool } from "valet"
import * as Durable from "valet/Durable"
import { type Row, writeReport } from "./support/report.js"

declare const gc: () => void

export const main = async (quick: boolean) => {
  const runs = quick ? 1000 : 2000
  const dir = mkdtempSync(join(tmpdir(), "valet-bench-approvals-"))
  let ran = 0
  const act = Tool.make({
    name: "act",
    description: "",
    parameters: Schema.Struct({ n: Schema.Number }),
    handler: ({ n }) => Effect.sync(() => (ran++, `did ${n}`)),
    needsApproval: true
  })
  const agent = Agent.make({ name: "worker", instructions: "", tools: [act] })
  const model = ScriptedModel.layer((request) =>
    (request.messages ?? []).some((message) => message.role === "tool") ? "done" : { toolCalls: [{ id: "c1", name: "act", arguments: { n: 1 } }] })
  const engine = Durable.layer([agent]).pipe(Layer.provideMerge(Durable.layerSqlite(join(dir, "runs.db"))), Layer.provide(model))
  // The heap without V8's code spaces: the code compiled while the runs start (a few MB, whatever their number) is
  // not held by the runs. Both are reported.
  const heap = () => {
    gc()
    const spaces = getHeapSpaceStatistics()
    const code = spaces.filter((space) => /code|trusted/.test(space.space_name)).reduce((sum, space) => sum + space.space_used_size, 0)
    const used = process.memoryUsage().heapUsed
    return { used, data: used - code }
  }
  const waitingAll = (ids: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      while (true) {
        const counts = yield* Effect.forEach(ids, (id) => Effect.map(Durable.pending(id), (rows) => rows.length), { concurrency: 50 })
        if (counts.every((n) => n === 1)) return
        yield* Effect.sleep("500 millis")
      }
    })
  const rows: Array<Row> = []
  const notes: Array<string> = []
  try {
    await Effect.runPromise(Effect.gen(function*() {
      // Warm-up: one run through wait, decision and end.
      yield* Durable.AgentRun.execute({ agent: "worker", prompt: "go", runId: "warm" }, { discard: true })
      yield* waitingAll(["warm"])
      yield* Durable.decide("warm", "c1", { approved: true })
      yield* Durable.AgentRun.execute({ agent: "worker", prompt: "go", runId: "warm" })
      yield* Effect.sleep("12 seconds")
      const before = heap()
      const ids = Array.from({ length: runs }, (_, i) => `run-${i}`)
      const started = performance.now()
      yield* Effect.forEach(ids, (runId) => Durable.AgentRun.execute({ agent: "worker", prompt: "go", runId }, { discard: true }), { concurrency: 50 })
      yield* waitingAll(ids)
      const allWaiting = (performance.now() - started) / 1000
      const atOnce = heap()
      yield* Effect.sleep("15 seconds")
      const after15 = heap()
      yield* Effect.sleep("15 seconds")
      const after30 = heap()
      const per = (at: { used: number; data: number }, key: "used" | "data") => (at[key] - before[key]) / runs / 1024
      rows.push({ framework: "valet", measure: `heap / waiting durable run, when all ${runs} wait`, value: per(atOnce, "used"), unit: "KB" })
      rows.push({ framework: "valet", measure: `heap / waiting durable run, 15 s later`, value: per(after15, "used"), unit: "KB" })
      rows.push({ framework: "valet", measure: `heap / waiting durable run, 30 s later`, value: per(after30, "used"), unit: "KB" })
      rows.push({ framework: "valet", measure: `heap / waiting durable run, 30 s later, without V8 code spaces`, value: per(after30, "data"), unit: "KB" })
      rows.push({ framework: "valet", measure: `time until all ${runs} runs wait (SQLite)`, value: allWaiting, unit: "s" })
      yield* Effect.forEach(ids, (runId) => Durable.decide(runId, "c1", { approved: true }), { concurrency: 50 })
      const results = yield* Effect.forEach(ids, (runId) => Durable.AgentRun.execute({ agent: "worker", prompt: "go", runId }), { concurrency: 50 })
      if (results.some((result) => result.output !== "done") || ran !== runs + 1) {
        throw new Error(`after the decisions: ${results.filter((r) => r.output === "done").length} runs done, the tool ran ${ran} times`)
      }
      notes.push(`every run finished after its decision, the tool ran once per run (${runs})`)
    }).pipe(Effect.provide(engine)))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  return writeReport({ name: "approvals", description: `heap per durable run waiting for a decision (${runs} runs, Durable.layerSqlite)`, rows, notes })
}

if (import.meta.url === `file://${process.argv[1]}`) await main(process.argv.includes("--quick"))

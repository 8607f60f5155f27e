/**
 * Threads (conversations that persist): what a turn on a thread adds to a run, on each store, as the thread grows.
 * A turn (`Agent.run(agent, task, { thread })`) takes the thread's lease, loads its last 100 messages (a page: a key
 * range, never the whole thread), runs, appends its messages in one write and gives the lease back; none of that
 * should grow with the thread.
 *
 * For each store (memory; SQLite, a file; PostgreSQL, a throwaway server started here with initdb / pg_ctl, left
 * out with a note when there is none) and each thread size N (10, 1,000, 10,000; quick: 10, 1,000), a thread is
 * filled with N messages (500 per append). Then rounds, in one fiber, each visiting every size in turn (so that the
 * sizes share V8's warm-up and a shared machine's slow moments), the first ones thrown away as warm-up:
 *
 * - load: `Threads.messages(id, { limit: 100 })`, µs;
 * - turn overhead: the same one-reply run on a `ScriptedModel` with and without the thread, one after the other
 *   (the order alternates); each sample is the pair's difference, µs;
 * - append: 2 messages with the lease held (`append(id, messages, { lease })`), µs; and the lease alone (acquire +
 *   release), µs.
 *
 * A round appends 4 messages, so a thread of fewer messages than the page gets a fork at N each round (untimed) to
 * stay at N; a larger thread grows by under a thousand messages over the run, which the page does not see.
 * The summary says whether the overhead grows with N (full runs): its ratio at N = 10,000 to N = 1,000 (a full page
 * both), and to N = 10 (which loads 10 messages, not a full page).
 *
 *   npx tsx bench/threads.ts [--quick]      # needs `npm run build` first (npm run bench does it)
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Agent, ScriptedModel, Threads } from "valet"
import * as SqliteClient from "valet/SqliteClient"
import { throwawayDatabase } from "./support/postgres.js"
import { median, percentile, type Row, writeReport } from "./support/report.js"

const quick = process.argv.includes("--quick")
const sizes = quick ? [10, 1000] : [10, 1000, 10_000]
const warmups = quick ? 5 : 30
const samples = quick ? 20 : 200
const historyLimit = 100
const fillBatch = 500

const rows: Array<Row> = []
const notes: Array<string> = []
const dir = mkdtempSync(join(tmpdir(), "valet-bench-threads-"))
// Removed however the benchmark ends (a failed store throws).
process.on("exit", () => rmSync(dir, { recursive: true, force: true }))

const agent = Agent.make({ name: "assistant", instructions: "Be brief." })
const task = "What did we decide about the schedule?"
const reply = "We moved the review to Thursday at 10:00, after the release notes are done."
// A fresh scripted model per run: its record of requests does not pile up over the measurement.
const withModel = <A, E, R>(run: Effect.Effect<A, E, R>) => Effect.suspend(() => Effect.provide(run, ScriptedModel.context(() => reply)))

/** Messages `from`..`from + count` of a conversation: a user question, an assistant answer of a few sentences. */
const filler = (from: number, count: number) =>
  Array.from({ length: count }, (_, k) => {
    const i = from + k
    return i % 2 === 0
      ? { role: "user" as const, content: `Question ${i}: what should we change in section ${i % 17} of the plan, and why?` }
      : {
        role: "assistant" as const,
        content: `Answer ${i}: keep the outline, move the budget table after the timeline, and cut the second example; ` +
          `the reviewers asked for the numbers first and the examples repeat what the table already shows.`
      }
  })

const turnMessages = [{ role: "user" as const, content: task }, { role: "assistant" as const, content: reply }]

/** µs the effect took (performance.now around it, in the running fiber). */
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<number, E, R> =>
  Effect.suspend(() => {
    const started = performance.now()
    return Effect.map(effect, () => (performance.now() - started) * 1000)
  })

/** The samples of one store × one thread size, µs. */
interface Cell {
  readonly overhead: Array<number>
  readonly plain: Array<number>
  readonly load: Array<number>
  readonly append: Array<number>
  readonly lease: Array<number>
}

/** One round on a thread of N messages: the load, the turn beside the run without it, the lease and an append. */
const round = (n: number, base: string, i: number, cell: Cell | undefined): Effect.Effect<void, unknown, Threads.Threads> =>
  Effect.gen(function*() {
    const threads = yield* Threads.Threads
    // Below a page, each round gets its own copy at N (else N = 10 would be N = 800 by the end).
    const id = n < historyLimit ? (yield* Threads.fork(base, { at: n })).id : base

    let count = 0
    const loadUs = yield* timed(Effect.map(Threads.messages(id, { limit: historyLimit }), (page) => void (count = page.messages.length)))
    if (count !== Math.min(historyLimit, n)) return yield* Effect.die(new Error(`N=${n}: a page held ${count} messages`))

    const before = (yield* Threads.get(id)).messageCount
    const plainRun = withModel(Agent.run(agent, task))
    const turn = withModel(Agent.run(agent, task, { thread: id }))
    let plainUs: number
    let turnUs: number
    if (i % 2 === 0) {
      plainUs = yield* timed(plainRun)
      turnUs = yield* timed(turn)
    } else {
      turnUs = yield* timed(turn)
      plainUs = yield* timed(plainRun)
    }
    // The turn did what a turn does: its two messages are in the thread.
    const after = (yield* Threads.get(id)).messageCount
    if (after !== before + 2) return yield* Effect.die(new Error(`N=${n}: a turn took the thread from ${before} to ${after} messages, not +2`))

    const started = performance.now()
    const held = yield* threads.acquire(id, { durationMs: 60_000 })
    const acquired = performance.now()
    const appendUs = yield* timed(threads.append(id, turnMessages, { lease: held }))
    const releaseUs = yield* timed(threads.release(held))

    if (cell !== undefined) {
      cell.load.push(loadUs)
      cell.overhead.push(turnUs - plainUs)
      cell.plain.push(plainUs)
      cell.append.push(appendUs)
      cell.lease.push((acquired - started) * 1000 + releaseUs)
    }
  })

/** Every size on one store (its layer built once); rows and the pivot's cells. */
const measureStore = async (store: string, layer: Layer.Layer<Threads.Threads, unknown>): Promise<Map<number, Cell>> => {
  const cells = new Map<number, Cell>(sizes.map((n) => [n, { overhead: [], plain: [], load: [], append: [], lease: [] }]))
  await Effect.runPromise(
    Effect.gen(function*() {
      const bases = new Map<number, string>()
      for (const n of sizes) {
        const base = yield* Threads.create({ owner: "bench" })
        for (let i = 0; i < n; i += fillBatch) yield* Threads.append(base.id, filler(i, Math.min(fillBatch, n - i)))
        bases.set(n, base.id)
      }
      // Each round visits every size, starting at a different one: the sizes share the warm-up (V8 optimizing the
      // code) and the slow moments of a shared machine alike, so that they compare.
      for (let i = 0; i < warmups + samples; i++) {
        for (let k = 0; k < sizes.length; k++) {
          const n = sizes[(i + k) % sizes.length]!
          yield* round(n, bases.get(n)!, i, i >= warmups ? cells.get(n) : undefined)
        }
      }
      for (const [n, cell] of cells) {
        process.stderr.write(`  threads: ${store} N=${n}: turn overhead ${median(cell.overhead).toFixed(0)} µs, load ${median(cell.load).toFixed(0)} µs\n`)
      }
    }).pipe(Effect.provide(layer))
  )
  for (const [n, cell] of cells) {
    const row = (measure: string, values: ReadonlyArray<number>): Row => ({
      framework: "valet",
      measure: `${store}, N=${n}: ${measure}`,
      unit: "µs",
      value: median(values),
      min: Math.min(...values),
      max: Math.max(...values),
      samples: values.length
    })
    rows.push(
      row("turn overhead (with thread − without)", cell.overhead),
      { framework: "valet", measure: `${store}, N=${n}: turn overhead p90`, unit: "µs", value: percentile(cell.overhead, 90), samples: cell.overhead.length },
      row("load (messages, limit 100)", cell.load),
      row("append (2 messages, with the lease)", cell.append),
      row("lease (acquire + release)", cell.lease),
      row("the run without a thread", cell.plain)
    )
  }
  return cells
}

const stores = new Map<string, Map<number, Cell>>()
const cluster = { stop: () => {} }
try {
  stores.set("memory", await measureStore("memory", Threads.layerMemory()))
  stores.set(
    "sqlite",
    await measureStore("sqlite", Threads.layerSql.pipe(Layer.provide(SqliteClient.layer({ filename: join(dir, "threads.db") }))))
  )
  const database = await throwawayDatabase("bench_threads", (reason) => {
    console.log(`threads: ${reason}`)
    notes.push(reason)
  })
  if (database !== undefined) {
    cluster.stop = database.stop
    stores.set(
      "postgres",
      await measureStore("postgres", Threads.layerSql.pipe(Layer.provide(PgClient.layer({ url: Redacted.make(database.url), maxConnections: 4 }))))
    )
  }
} finally {
  cluster.stop()
}

// ---------------------------------------------------------------------------------------------------------
// The table: store × N, and whether the overhead grows with N
// ---------------------------------------------------------------------------------------------------------

const us = (n: number): string => (Math.abs(n) >= 100 ? n.toFixed(0) : n.toFixed(1))
const header = ["store", "N", "turn overhead", "p90", "load", "append", "lease", "run without thread"]
const lines = [header]
for (const [store, cells] of stores) {
  for (const [n, cell] of cells) {
    lines.push([
      store,
      n.toLocaleString("en"),
      us(median(cell.overhead)),
      us(percentile(cell.overhead, 90)),
      us(median(cell.load)),
      us(median(cell.append)),
      us(median(cell.lease)),
      us(median(cell.plain))
    ])
  }
}
const widths = header.map((_, i) => Math.max(...lines.map((line) => line[i]!.length)))
const table = lines.map((line) => line.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ")).join("\n")

const largest = sizes.at(-1)!
const growth: Array<string> = []
for (const [store, cells] of stores) {
  const at = (n: number) => median(cells.get(n)!.overhead)
  const loadAt = (n: number) => median(cells.get(n)!.load)
  const ratio = at(largest) / at(10)
  const fullPages = largest > 1000 ? ` ${(at(largest) / at(1000)).toFixed(2)}× N=1,000 (load ${(loadAt(largest) / loadAt(1000)).toFixed(2)}×);` : ""
  // A page of 100 messages costs more than one of 10: the ratio to N=1,000 (a full page both) is the test. A quick
  // run (20 samples, N up to 1,000 only) is too short to tell.
  const verdict = quick
    ? "(quick run: too few samples to tell)"
    : at(largest) / at(1000) > 1.5
    ? "it GROWS with the thread (over 1.5× N=1,000)"
    : "it does not grow with the thread (under 1.5× N=1,000)"
  growth.push(
    `${store}: turn overhead at N=${largest.toLocaleString("en")} is ${ratio.toFixed(2)}× N=10 (load ${(loadAt(largest) / loadAt(10)).toFixed(2)}×);${fullPages} ${verdict}`
  )
}

console.log(`\nthreads: a turn's added latency, µs (medians of ${samples} after ${warmups} warm-up; turn overhead = the run with the thread − the same run without, interleaved):\n${table}`)
for (const line of growth) console.log(`  ${line}`)
notes.push(
  ...table.split("\n"),
  ...growth,
  `${samples} samples after ${warmups} warm-up per cell, the sizes taken in turn within each round; a one-reply run on ScriptedModel (default ReAct); history limit ${historyLimit}; ` +
    `threads filled ${fillBatch} messages per append; N < ${historyLimit}: each round on a fork at N`,
  // What the SQL numbers are made of: a turn commits three times (the lease taken, the append, the lease given back).
  "sqlite: a file in the temp dir, WAL, synchronous FULL (SQLite's default: each commit waits for the disk, three commits a turn); " +
    "postgres: a local server over loopback, fsync off"
)
writeReport({ name: "threads", description: "a turn's added latency on a thread (load + run + append, lease), by store and thread size", rows, notes })

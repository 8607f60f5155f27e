/**
 * Semantic recall: the top 10 of 100,000 stored vectors of one owner, by store and search path.
 *
 * Vectors of 384 dimensions (the size of the small sentence-embedding models people run beside a chat model:
 * all-MiniLM-L6-v2, bge-small-en-v1.5), random unit vectors from a seeded generator, in 1,000 threads of 100
 * messages. Each store is filled once (untimed but reported), then `Threads.recall({ owner, model, vector, topK: 10 })`
 * is timed for queries near stored vectors (a stored vector plus noise), warm-up calls thrown away:
 *
 * - memory: the memory store (a scan in JavaScript over Float32Arrays already in memory);
 * - sqlite (sqlite-vec): `vec_distance_cosine` in SQL (`SqliteClient.layer({ sqliteVec: true })`);
 * - sqlite (scan): the same file, read 2,000 rows a page and compared in JavaScript (`vectorSearch: "scan"`);
 * - postgres (scan) and postgres (pgvector, when the server has the extension): a throwaway server started here
 *   (left out with a note when there is none).
 *
 * Every path must answer the same 10 messages for the same query (checked: the top 10 of the memory store is the
 * reference; a path that differs is reported).
 *
 *   npx tsx bench/recall.ts [--quick]      # quick: 10,000 vectors; needs `npm run build` first (npm run bench does it)
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Threads } from "valet"
import * as SqliteClient from "valet/SqliteClient"
import { throwawayDatabase } from "./support/postgres.js"
import { median, percentile, type Row, summarize, writeReport } from "./support/report.js"

const quick = process.argv.includes("--quick")
const dimensions = 384
const perThread = 100
const total = quick ? 10_000 : 100_000
const threadCount = total / perThread
const topK = 10
const warmups = quick ? 2 : 3
const samples = quick ? 5 : 20
const model = "bench-384"

const rows: Array<Row> = []
const notes: Array<string> = []
const dir = mkdtempSync(join(tmpdir(), "valet-bench-recall-"))
process.on("exit", () => rmSync(dir, { recursive: true, force: true }))

/** A seeded generator (mulberry32): the same vectors on every run. */
const random = (seed: number) => () => {
  seed |= 0
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const next = random(7)
const unit = (values: Array<number>): Array<number> => {
  const n = Math.sqrt(values.reduce((sum, x) => sum + x * x, 0))
  return values.map((x) => x / n)
}
const randomVector = () => unit(Array.from({ length: dimensions }, () => next() * 2 - 1))
const vectors = Array.from({ length: total }, randomVector)
// Queries near stored vectors: the stored one plus as much noise again.
const queries = Array.from({ length: warmups + samples }, (_, i) => {
  const base = vectors[(i * 7919) % total]!
  const noise = randomVector()
  return unit(base.map((x, d) => x + noise[d]!))
})

const threadId = (t: number) => `thr-${String(t).padStart(5, "0")}`

/** Fills a store: the threads, their messages, their vectors (one `storeVectors` per thread). */
const fill = Effect.gen(function*() {
  const threads = yield* Threads.Threads
  for (let t = 0; t < threadCount; t++) {
    const id = threadId(t)
    yield* threads.create({ id, owner: "ada" })
    yield* threads.append(id, Array.from({ length: perThread }, (_, i) => ({ role: i % 2 === 0 ? "user" as const : "assistant" as const, content: `message ${t * perThread + i}` })))
    yield* threads.storeVectors(id, model, Array.from({ length: perThread }, (_, i) => ({ index: i, vector: vectors[t * perThread + i]! })))
  }
})

const ms = (started: number) => performance.now() - started

interface Measured {
  readonly search: string
  readonly latencies: Array<number>
  readonly answers: Array<ReadonlyArray<string>>
}

/** Times recall on a store (filled already). */
const measure = Effect.gen(function*() {
  const threads = yield* Threads.Threads
  const latencies: Array<number> = []
  const answers: Array<ReadonlyArray<string>> = []
  for (let i = 0; i < queries.length; i++) {
    const started = performance.now()
    const found = yield* threads.recall({ owner: "ada", model, vector: queries[i]!, topK })
    const took = ms(started)
    if (i >= warmups) {
      latencies.push(took)
      answers.push(found.map((hit) => `${hit.threadId}#${hit.index}`))
    }
  }
  return { search: threads.vectorSearch, latencies, answers } satisfies Measured
})

const results = new Map<string, Measured & { readonly fillMs?: number }>()

const run = async <E>(label: string, store: Layer.Layer<Threads.Threads, E>, options: { readonly filled?: boolean } = {}) => {
  const outcome = await Effect.runPromise(Effect.gen(function*() {
    let fillMs: number | undefined
    if (options.filled !== true) {
      const started = performance.now()
      yield* fill
      fillMs = ms(started)
    }
    const measured = yield* measure
    return { ...measured, ...(fillMs !== undefined ? { fillMs } : {}) }
  }).pipe(Effect.provide(store), Effect.exit))
  if (outcome._tag === "Failure") {
    const reason = `${label}: failed (${String(outcome.cause).split("\n")[0]}): left out`
    console.log(`recall: ${reason}`)
    notes.push(reason)
    return
  }
  results.set(label, outcome.value)
  console.log(`recall: ${label} (${outcome.value.search}) median ${median(outcome.value.latencies).toFixed(1)} ms${outcome.value.fillMs !== undefined ? `, filled in ${(outcome.value.fillMs / 1000).toFixed(1)} s` : ""}`)
}

const cluster = { stop: () => {} }
try {
  await run("memory", Threads.layerMemory())
  const file = join(dir, "recall.db")
  await run("sqlite (sqlite-vec)", Threads.layerSql.pipe(Layer.provide(SqliteClient.layer({ filename: file, sqliteVec: true }))))
  await run("sqlite (scan)", Threads.layerSqlWith({ vectorSearch: "scan" }).pipe(Layer.provide(SqliteClient.layer({ filename: file }))), { filled: true })
  const database = await throwawayDatabase("bench_recall", (reason) => notes.push(reason))
  if (database !== undefined) {
    cluster.stop = database.stop
    const url = database.url
    const client = () => PgClient.layer({ url: Redacted.make(url), maxConnections: 4 })
    // Filled through the auto store: with pgvector its column is written too, so both paths read the same rows.
    await run("postgres (auto)", Threads.layerSql.pipe(Layer.provide(client())))
    const auto = results.get("postgres (auto)")
    if (auto !== undefined) {
      results.delete("postgres (auto)")
      results.set(`postgres (${auto.search})`, auto)
      if (auto.search === "pgvector") await run("postgres (scan)", Threads.layerSqlWith({ vectorSearch: "scan" }).pipe(Layer.provide(client())), { filled: true })
      else notes.push("postgres: the server has no pgvector extension: only the scan is measured")
    }
  }
} finally {
  cluster.stop()
}

// ---------------------------------------------------------------------------------------------------------
// The table, and whether every path found the same messages
// ---------------------------------------------------------------------------------------------------------

const reference = results.get("memory")!.answers
const header = ["store (search)", "top-10 median ms", "p90 ms", "queries / s", "same top 10 as memory", "fill s"]
const lines = [header]
for (const [label, measured] of results) {
  const same = measured.answers.filter((answer, i) => answer.join() === reference[i]!.join()).length
  const med = median(measured.latencies)
  lines.push([
    label,
    med.toFixed(med >= 100 ? 0 : 1),
    percentile(measured.latencies, 90).toFixed(1),
    (1000 / med).toFixed(med >= 100 ? 1 : 0),
    `${same}/${measured.answers.length}`,
    measured.fillMs !== undefined ? (measured.fillMs / 1000).toFixed(1) : "(same rows)"
  ])
  rows.push(summarize(label, `recall top-${topK} of ${total.toLocaleString("en")} × ${dimensions}`, "ms", measured.latencies))
}
const widths = header.map((_, i) => Math.max(...lines.map((line) => line[i]!.length)))
const table = lines.map((line) => line.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join("  ")).join("\n")
console.log(`\nrecall: top ${topK} of ${total.toLocaleString("en")} vectors of ${dimensions} dimensions, one owner (${samples} queries after ${warmups} warm-up):\n${table}`)
notes.push(
  ...table.split("\n"),
  `${total.toLocaleString("en")} random unit vectors of ${dimensions} dimensions (seeded), ${threadCount} threads × ${perThread} messages of one owner; ` +
    `queries: a stored vector plus noise; ${samples} timed after ${warmups} warm-up; the sqlite rows share one file (WAL), the postgres rows one database (fsync off)`
)
writeReport({ name: "recall", description: `semantic recall: top ${topK} of ${total.toLocaleString("en")} stored vectors by store and search path`, rows, notes })

/**
 * The vectors of the SQL thread store: a row of `valet_thread_vectors` per embedded message, keyed like the message
 * (thread, index), with the owner (recall is by owner), the embedding model's name and dimensions, and the vector as
 * float32 little-endian bytes (BLOB / BYTEA) — the one layout every search path reads:
 *
 * - SQLite with `sqlite-vec` loaded (`SqliteClient.layer({ …, sqliteVec: "auto" })`): `vec_distance_cosine` over the
 *   blobs in SQL, top k by `ORDER BY … LIMIT`; only the k rows found leave the database.
 * - PostgreSQL with pgvector (installed, or available and created here): an `embedding vector` column beside the bytes,
 *   written with them (rows written without it — before the extension came, or by a store that scans on the same
 *   database — are filled in when the store opens, and when a search meets one), ordered by `<=>`.
 * - Otherwise a scan: the owner's rows of the model read a page at a time (keyset on the key, so memory stays flat)
 *   and compared in JavaScript, keeping the best k.
 *
 * Every path checks each row it ranks: a vector whose bytes are not `dimensions × 4` long, or not finite, is a
 * `ThreadStoreError` naming its thread and index (in SQL the distance of such a row is NULL, which sorts first, so a
 * damaged row among the candidates is seen rather than skipped).
 */
import { Effect, Result, Schema } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import type { Message } from "../modelSchema.js"
import { describeSqlError, IntegerColumn } from "../sql.js"
import { cosineWith, fromBytes, norm, toBytes, TopK } from "../vectors.js"
import * as Check from "./check.js"
import { type RecallQuery, type Recalled, type Service, type Thread, type ThreadError, ThreadStoreError, type VectorSearch } from "./model.js"

export const table = "valet_thread_vectors"

/** Which search to use: `"auto"` (the fastest the database has) or `"scan"` (always the scan, e.g. to compare). */
export type Wanted = "auto" | "scan"

const failure = (operation: string, threadId?: string) => (error: SqlError.SqlError) =>
  new ThreadStoreError({
    operation,
    ...(threadId !== undefined ? { threadId } : {}),
    message: `Threads.${operation}: ${describeSqlError(error)}`
  })

/** The statements that create the table (run with the store's other `CREATE`s). */
export const createStatements = (sql: SqlClient.SqlClient) => {
  const t = sql(table)
  return Effect.all([
    sql.onDialectOrElse({
      pg: () =>
        sql`CREATE TABLE IF NOT EXISTS ${t} (thread_id TEXT NOT NULL, idx BIGINT NOT NULL, owner TEXT NOT NULL, model TEXT NOT NULL,
          dimensions BIGINT NOT NULL, vector BYTEA NOT NULL, PRIMARY KEY (thread_id, idx))`,
      orElse: () =>
        sql`CREATE TABLE IF NOT EXISTS ${t} (thread_id TEXT NOT NULL, idx BIGINT NOT NULL, owner TEXT NOT NULL, model TEXT NOT NULL,
          dimensions BIGINT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (thread_id, idx))`
    }),
    sql`CREATE INDEX IF NOT EXISTS valet_thread_vectors_owner ON ${t} (owner, model, thread_id, idx)`
  ], { discard: true })
}

/** How the store searches, found when it opens. */
interface Search {
  readonly kind: VectorSearch
  /** pgvector's schema, to name its type and operator whatever the search path. */
  readonly pgSchema?: string | undefined
}

const SchemaRow = Schema.Struct({ schema: Schema.String })

/** The pgvector extension's schema, installing it when the server has it and this role may; `undefined` when not. */
const pgvector = (sql: SqlClient.SqlClient): Effect.Effect<string | undefined> => {
  const installed = Effect.map(
    sql`SELECT n.nspname AS schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'`,
    (rows) => {
      const row = Schema.decodeUnknownOption(SchemaRow)(rows[0])
      return row._tag === "Some" ? row.value.schema : undefined
    }
  )
  return installed.pipe(
    Effect.flatMap((schema) => {
      if (schema !== undefined) return Effect.succeed(schema)
      return Effect.flatMap(sql`SELECT 1 AS one FROM pg_available_extensions WHERE name = 'vector'`, (available) =>
        available.length === 0
          ? Effect.succeed(undefined)
          // In public when it can (a schema dropped with its tables must not take the extension with it), else where
          // the server puts it; a role that may not create extensions scans.
          : sql`CREATE EXTENSION IF NOT EXISTS vector SCHEMA public`.pipe(
            Effect.catch(() => sql`CREATE EXTENSION IF NOT EXISTS vector`),
            Effect.andThen(installed)
          ))
    }),
    Effect.catch(() => Effect.succeed(undefined))
  )
}

const BackfillRow = Schema.Struct({ thread_id: Schema.String, idx: IntegerColumn, dimensions: IntegerColumn, vector: Schema.Unknown })
const decodeBackfillRow = Schema.decodeUnknownResult(BackfillRow)

const vectorText = (vector: Float32Array): string => `[${Array.from(vector).join(",")}]`

/**
 * pgvector's column filled in from the bytes, a page at a time, for the rows written without it: before the extension
 * came, or since by a store that scans (opened before it came, or with `vectorSearch: "scan"`) on the same database.
 */
const fillEmbeddings = (sql: SqlClient.SqlClient, schema: string): Effect.Effect<void, SqlError.SqlError> =>
  Effect.gen(function*() {
    const t = sql(table)
    let after: { readonly threadId: string; readonly index: number } | undefined
    for (;;) {
      const rows = yield* (after === undefined
        ? sql`SELECT thread_id, idx, dimensions, vector FROM ${t} WHERE embedding IS NULL ORDER BY thread_id, idx LIMIT 500`
        : sql`SELECT thread_id, idx, dimensions, vector FROM ${t} WHERE embedding IS NULL
            AND (thread_id > ${after.threadId} OR (thread_id = ${after.threadId} AND idx > ${after.index})) ORDER BY thread_id, idx LIMIT 500`)
      for (const raw of rows) {
        const row = decodeBackfillRow(raw)
        if (Result.isFailure(row)) continue
        after = { threadId: row.success.thread_id, index: row.success.idx }
        const vector = fromBytes(row.success.vector, row.success.dimensions)
        // A damaged row keeps no embedding: recall finds it and names it.
        if (typeof vector === "string") continue
        yield* sql`UPDATE ${t} SET embedding = ${vectorText(vector)}::${sql(schema)}.vector
          WHERE thread_id = ${row.success.thread_id} AND idx = ${row.success.idx} AND embedding IS NULL`
      }
      if (rows.length < 500) break
    }
  })

/** Decides the search and prepares for it (pgvector's column, filled in for rows written without it). */
export const detect = (sql: SqlClient.SqlClient, wanted: Wanted): Effect.Effect<Search, ThreadStoreError> =>
  wanted === "scan"
    ? Effect.succeed({ kind: "scan" })
    : sql.onDialectOrElse({
      sqlite: () =>
        sql`SELECT vec_version() AS version`.pipe(
          Effect.as<Search>({ kind: "sqlite-vec" }),
          Effect.catch(() => Effect.succeed<Search>({ kind: "scan" }))
        ),
      pg: () =>
        Effect.flatMap(pgvector(sql), (schema): Effect.Effect<Search, ThreadStoreError> => {
          if (schema === undefined) return Effect.succeed({ kind: "scan" })
          const t = sql(table)
          return sql.withTransaction(Effect.gen(function*() {
            // One process at a time adds the column (see `createTables`).
            yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`valet create table ${table} pgvector`}))`
            yield* sql`ALTER TABLE ${t} ADD COLUMN IF NOT EXISTS embedding ${sql(schema)}.vector`
            // A row holds the vector twice (bytes and embedding): over PostgreSQL's 2 kB row threshold from 256
            // dimensions on, one of them goes to the TOAST table, and if it is the embedding every distance costs a
            // TOAST read: top 10 of 100,000 × 384 took 1,316 ms that way, 215 ms with the embedding kept in the row
            // (bench/recall.ts, medians of 20). The bytes move out instead: only the k rows found read them.
            yield* sql`ALTER TABLE ${t} ALTER COLUMN embedding SET STORAGE MAIN`
            // Rows written before the extension came: their column is filled in from their bytes.
            yield* fillEmbeddings(sql, schema)
            return { kind: "pgvector" as const, pgSchema: schema }
          })).pipe(Effect.mapError(failure("open")))
        }),
      orElse: () => Effect.succeed<Search>({ kind: "scan" })
    })

/** A thread row found (its owner checked), for `storeVectors`. */
type Find = (operation: string, threadId: string, owner: string | undefined) => Effect.Effect<Thread, ThreadError>

const CandidateRow = Schema.Struct({
  thread_id: Schema.String,
  idx: IntegerColumn,
  dimensions: IntegerColumn,
  vector: Schema.Unknown,
  distance: Schema.optional(Schema.NullOr(Schema.Union([Schema.Number, Schema.String]))),
  /** pgvector's search: the row has no embedding (written by a store that scans). */
  missing: Schema.optional(Schema.NullOr(Schema.Boolean))
})
const decodeCandidate = Schema.decodeUnknownResult(CandidateRow)
const KeyRow = Schema.Struct({ thread_id: Schema.String, idx: IntegerColumn })
const decodeKeyRow = Schema.decodeUnknownResult(KeyRow)

/** The rows of a page of the scan (and of the SQL searches' candidates). */
const pageSize = 2_000

export const make = (
  sql: SqlClient.SqlClient,
  search: Search,
  find: Find,
  /** A row `{ idx, message }` of `valet_thread_messages` as its message, checked (the store's own reader). */
  messageOf: (operation: string, threadId: string, row: unknown) => Result.Result<Message, ThreadStoreError>
) => {
  const t = sql(table)
  const messages = sql("valet_thread_messages")

  const damaged = (threadId: string, index: number, why: string) =>
    Check.refuse("recall", `the vector of message ${index} of thread ${JSON.stringify(threadId)} in ${table} is damaged: ${why}`, threadId, index)

  const storeVectors: Service["storeVectors"] = (threadId, model, vectors, options) =>
    sql.withTransaction(Effect.gen(function*() {
      const thread = yield* find("storeVectors", threadId, options?.owner)
      const checked = yield* Check.checkVectors(threadId, model, vectors, thread.messageCount)
      if (checked.vectors.length === 0) return
      const rows = checked.vectors.map(({ index, vector }): Record<string, unknown> => ({
        thread_id: threadId,
        idx: index,
        owner: thread.owner,
        model: checked.model,
        dimensions: checked.dimensions,
        vector: toBytes(vector),
        // Sent as text of unknown type: the server reads it as the column's `vector`.
        ...(search.kind === "pgvector" ? { embedding: vectorText(vector) } : {})
      }))
      for (let i = 0; i < rows.length; i += 500) {
        const slice = rows.slice(i, i + 500) as [Record<string, unknown>, ...Array<Record<string, unknown>>]
        yield* (search.kind === "pgvector"
          ? sql`INSERT INTO ${t} ${sql.insert(slice)} ON CONFLICT (thread_id, idx) DO UPDATE SET owner = excluded.owner,
              model = excluded.model, dimensions = excluded.dimensions, vector = excluded.vector, embedding = excluded.embedding`
          : sql`INSERT INTO ${t} ${sql.insert(slice)} ON CONFLICT (thread_id, idx) DO UPDATE SET owner = excluded.owner,
              model = excluded.model, dimensions = excluded.dimensions, vector = excluded.vector`).pipe(Effect.mapError(failure("storeVectors", threadId)))
      }
    })).pipe(Effect.mapError((error) => "_tag" in error && error._tag === "SqlError" ? failure("storeVectors", threadId)(error) : error))

  /** The filter every search shares: the owner, the model, the dimensions, one thread, the page left out. */
  const where = (query: RecallQuery, dimensions: number) =>
    sql.and([
      sql`owner = ${query.owner}`,
      sql`model = ${query.model}`,
      sql`dimensions = ${dimensions}`,
      ...(query.threadId !== undefined ? [sql`thread_id = ${query.threadId}`] : []),
      ...(query.exclude !== undefined
        ? [
          query.exclude.end === undefined
            ? sql`NOT (thread_id = ${query.exclude.threadId} AND idx >= ${query.exclude.start})`
            : sql`NOT (thread_id = ${query.exclude.threadId} AND idx >= ${query.exclude.start} AND idx < ${query.exclude.end})`
        ]
        : [])
    ])

  type Hit = { readonly threadId: string; readonly index: number; readonly score: number }

  /** Rows ranked in SQL (distance = 1 − cosine, NULL for a row that cannot be compared): checked, as hits. */
  const hitsOf = (rows: ReadonlyArray<unknown>, query: RecallQuery): Result.Result<Array<Hit>, ThreadStoreError> => {
    const hits: Array<Hit> = []
    for (const raw of rows) {
      const row = decodeCandidate(raw)
      if (Result.isFailure(row)) return Result.fail(Check.refuse("recall", `a row of ${table} is not a vector row`))
      const r = row.success
      const vector = fromBytes(r.vector, r.dimensions)
      if (typeof vector === "string") return Result.fail(damaged(r.thread_id, r.idx, vector))
      const distance = r.distance === null || r.distance === undefined ? NaN : Number(r.distance)
      if (!Number.isFinite(distance)) return Result.fail(damaged(r.thread_id, r.idx, "its distance to the query is not a number"))
      const score = 1 - distance
      if (query.minScore === undefined || score >= query.minScore) hits.push({ threadId: r.thread_id, index: r.idx, score })
    }
    return Result.succeed(hits)
  }

  const scan = (query: RecallQuery, vector: Float32Array): Effect.Effect<Array<Hit>, ThreadStoreError> =>
    Effect.gen(function*() {
      const best = new TopK<{ readonly threadId: string; readonly index: number }>(query.topK)
      const queryNorm = norm(vector)
      let after: { readonly threadId: string; readonly index: number } | undefined
      for (;;) {
        const rows = yield* sql`SELECT thread_id, idx, dimensions, vector FROM ${t} WHERE ${where(query, vector.length)}
          ${after === undefined ? sql`` : sql`AND (thread_id > ${after.threadId} OR (thread_id = ${after.threadId} AND idx > ${after.index}))`}
          ORDER BY thread_id, idx LIMIT ${pageSize}`.pipe(Effect.mapError(failure("recall")))
        for (const raw of rows) {
          const row = decodeCandidate(raw)
          if (Result.isFailure(row)) return yield* Check.refuse("recall", `a row of ${table} is not a vector row`)
          const r = row.success
          after = { threadId: r.thread_id, index: r.idx }
          const stored = fromBytes(r.vector, r.dimensions)
          if (typeof stored === "string") return yield* damaged(r.thread_id, r.idx, stored)
          const score = cosineWith(vector, queryNorm, stored)
          if (query.minScore === undefined || score >= query.minScore) best.offer(score, after)
        }
        if (rows.length < pageSize) break
      }
      return best.result().map(({ item, score }) => ({ ...item, score }))
    })

  const ranked = (query: RecallQuery, vector: Float32Array): Effect.Effect<Array<Hit>, ThreadStoreError> => {
    const bytes = toBytes(vector)
    switch (search.kind) {
      case "sqlite-vec":
        // NULL (a blob of the wrong length) sorts first in SQLite: a damaged candidate is seen, not skipped.
        return sql`SELECT thread_id, idx, dimensions, vector,
            CASE WHEN length(vector) = dimensions * 4 THEN vec_distance_cosine(vector, ${bytes}) END AS distance
          FROM ${t} WHERE ${where(query, vector.length)} ORDER BY distance LIMIT ${query.topK}`.pipe(
          Effect.mapError(failure("recall")),
          Effect.flatMap((rows) => Effect.fromResult(hitsOf(rows, query)))
        )
      case "pgvector": {
        const s = sql(search.pgSchema!)
        const rank = sql`SELECT thread_id, idx, dimensions, vector, embedding IS NULL AS missing,
            CASE WHEN length(vector) = dimensions * 4 AND ${s}.vector_dims(embedding) = dimensions
              THEN embedding OPERATOR(${s}.<=>) ${vectorText(vector)}::${s}.vector END AS distance
          FROM ${t} WHERE ${where(query, vector.length)} ORDER BY distance ASC NULLS FIRST LIMIT ${query.topK}`
        // A row without its embedding whose bytes are whole was written by a store that scans (on this database
        // since this one opened): the column is filled in and the search run again, rather than the row refused.
        const unfilled = (rows: ReadonlyArray<unknown>) =>
          rows.some((raw) => {
            const row = decodeCandidate(raw)
            return Result.isSuccess(row) && row.success.missing === true && typeof fromBytes(row.success.vector, row.success.dimensions) !== "string"
          })
        return rank.pipe(
          Effect.flatMap((rows) => unfilled(rows) ? Effect.andThen(fillEmbeddings(sql, search.pgSchema!), rank) : Effect.succeed(rows)),
          Effect.mapError(failure("recall")),
          Effect.flatMap((rows) => Effect.fromResult(hitsOf(rows, query)))
        )
      }
      default:
        return scan(query, vector)
    }
  }

  const recall: Service["recall"] = (query) =>
    Effect.gen(function*() {
      const { vector } = yield* Check.checkRecall(query)
      const hits = yield* ranked(query, vector)
      if (hits.length === 0) return []
      // The messages of the k hits, in one read.
      const found = yield* sql`SELECT thread_id, idx, message FROM ${messages}
        WHERE ${sql.or(hits.map((hit) => sql`(thread_id = ${hit.threadId} AND idx = ${hit.index})`))}`.pipe(Effect.mapError(failure("recall")))
      const byKey = new Map<string, Message>()
      for (const raw of found) {
        const row = decodeKeyRow(raw)
        if (Result.isFailure(row)) return yield* Check.refuse("recall", "a row of valet_thread_messages is not a message row")
        const message = messageOf("recall", row.success.thread_id, raw)
        if (Result.isFailure(message)) return yield* message.failure
        byKey.set(`${row.success.idx}:${row.success.thread_id}`, message.success)
      }
      const out: Array<Recalled> = []
      for (const hit of hits) {
        const message = byKey.get(`${hit.index}:${hit.threadId}`)
        if (message === undefined) {
          return yield* Check.refuse("recall", `${table} holds a vector of message ${hit.index} of thread ${JSON.stringify(hit.threadId)}, which does not exist`, hit.threadId, hit.index)
        }
        out.push({ ...hit, message })
      }
      return out
    })

  return {
    vectorSearch: search.kind,
    storeVectors,
    recall,
    /** In `delete`'s transaction. */
    deleteOf: (threadId: string) => sql`DELETE FROM ${t} WHERE thread_id = ${threadId}`,
    /** In `fork`'s transaction: the vectors of the messages copied. */
    forkOf: (from: string, to: string, at: number) =>
      search.kind === "pgvector"
        ? sql`INSERT INTO ${t} (thread_id, idx, owner, model, dimensions, vector, embedding)
            SELECT ${to}, idx, owner, model, dimensions, vector, embedding FROM ${t} WHERE thread_id = ${from} AND idx < ${at}`
        : sql`INSERT INTO ${t} (thread_id, idx, owner, model, dimensions, vector)
            SELECT ${to}, idx, owner, model, dimensions, vector FROM ${t} WHERE thread_id = ${from} AND idx < ${at}`
  }
}

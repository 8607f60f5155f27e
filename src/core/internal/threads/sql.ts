/**
 * The thread store on `effect/sql` (SQLite and PostgreSQL). A thread is a row of `valet_threads` (its owner,
 * metadata, message count and lease); its messages are rows of `valet_thread_messages` keyed by (thread, index), so a
 * page is a range read on the key and an append inserts rows — neither grows with the thread. Writes that touch
 * both tables run in one transaction, conditioned on the count read (or the lease held), so two writers never
 * interleave. An append with a turn key also writes a row of `valet_thread_turns` (thread, key, where its messages
 * landed) in that transaction, so the key is stored exactly when the messages are; a database made before that
 * table existed gets it when a store opens it (`CREATE TABLE IF NOT EXISTS`, as every table here).
 */
import { Clock, Effect, Result, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { formatIssue } from "../decode.js"
import { Message } from "../modelSchema.js"
import { createTables, describeSqlError, IntegerColumn } from "../sql.js"
import * as Check from "./check.js"
import { type KeyedTurn, type Service, type Thread, ThreadBusy, type ThreadError, ThreadNotFound, ThreadStoreError } from "./model.js"
import * as SqlVectors from "./sqlVectors.js"

export const tableNames = {
  threads: "valet_threads",
  messages: "valet_thread_messages",
  memory: "valet_working_memory",
  summaries: "valet_thread_summaries",
  turns: "valet_thread_turns",
  vectors: SqlVectors.table
} as const

/** How the SQL store is made. */
export interface Options {
  /**
   * How recall searches vectors: `"auto"` (the default: `sqlite-vec` when the SQLite connection has it loaded,
   * pgvector when the PostgreSQL server has it, else a scan) or `"scan"` (always the scan).
   */
  readonly vectorSearch?: SqlVectors.Wanted | undefined
}

const ThreadRow = Schema.Struct({
  id: Schema.String,
  owner: Schema.String,
  metadata: Schema.String,
  created_at: IntegerColumn,
  updated_at: IntegerColumn,
  message_count: IntegerColumn
})
const decodeThreadRow = Schema.decodeUnknownResult(ThreadRow)
const MessageRow = Schema.Struct({ idx: IntegerColumn, message: Schema.String })
const decodeMessageRow = Schema.decodeUnknownResult(MessageRow)
const decodeMessage = Schema.decodeUnknownResult(Message)
const SummaryRow = Schema.Struct({ through: IntegerColumn, content: Schema.String })
const decodeSummaryRow = Schema.decodeUnknownResult(SummaryRow)

const failure = (operation: string, threadId?: string) => (error: SqlError.SqlError) =>
  new ThreadStoreError({
    operation,
    ...(threadId !== undefined ? { threadId } : {}),
    message: `Threads.${operation}: ${describeSqlError(error)}`
  })

const threadOf = (operation: string, row: unknown): Result.Result<Thread, ThreadStoreError> => {
  const decoded = decodeThreadRow(row)
  const id = typeof row === "object" && row !== null && "id" in row ? String(row.id) : undefined
  if (Result.isFailure(decoded)) {
    return Result.fail(Check.refuse(operation, formatIssue(`a row of ${tableNames.threads} is not a thread`, decoded.failure.issue, row), id))
  }
  let metadata: unknown
  try {
    metadata = JSON.parse(decoded.success.metadata)
  } catch {
    metadata = undefined
  }
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) {
    return Result.fail(Check.refuse(operation, `thread ${JSON.stringify(id)} in ${tableNames.threads}: metadata is not a JSON object`, id))
  }
  const r = decoded.success
  return Result.succeed({
    id: r.id,
    owner: r.owner,
    metadata: metadata as Record<string, unknown>,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
    messageCount: r.message_count
  })
}

const messageOf = (operation: string, threadId: string, row: unknown): Result.Result<Message, ThreadStoreError> => {
  const decoded = decodeMessageRow(row)
  if (Result.isFailure(decoded)) {
    return Result.fail(Check.refuse(operation, formatIssue(`a row of ${tableNames.messages} of thread ${JSON.stringify(threadId)} is not a message row`, decoded.failure.issue, row), threadId))
  }
  const index = decoded.success.idx
  let json: unknown
  try {
    json = JSON.parse(decoded.success.message)
  } catch (error) {
    return Result.fail(Check.refuse(operation, `message ${index} of thread ${JSON.stringify(threadId)} is not JSON (${error instanceof Error ? error.message : String(error)})`, threadId, index))
  }
  const message = decodeMessage(json)
  return Result.isFailure(message)
    ? Result.fail(Check.refuse(operation, formatIssue(`message ${index} of thread ${JSON.stringify(threadId)} is not a message`, message.failure.issue, json), threadId, index))
    : Result.succeed(message.success)
}

export const makeWith = (options: Options = {}): Effect.Effect<Service, ThreadStoreError, SqlClient.SqlClient> => Effect.gen(function*() {
  // Column names are ours whatever name transforms the client was configured with.
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  const threads = sql(tableNames.threads)
  const rows = sql(tableNames.messages)
  const summaries = sql(tableNames.summaries)
  const turns = sql(tableNames.turns)
  yield* createTables(
    sql,
    tableNames.threads,
    Effect.all([
      sql`CREATE TABLE IF NOT EXISTS ${threads} (
        id TEXT PRIMARY KEY, owner TEXT NOT NULL, metadata TEXT NOT NULL, created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL, message_count BIGINT NOT NULL, lease_token TEXT, lease_until BIGINT)`,
      sql`CREATE INDEX IF NOT EXISTS valet_threads_owner ON ${threads} (owner, updated_at, id)`,
      sql`CREATE TABLE IF NOT EXISTS ${rows} (
        thread_id TEXT NOT NULL, idx BIGINT NOT NULL, message TEXT NOT NULL, PRIMARY KEY (thread_id, idx))`,
      sql`CREATE TABLE IF NOT EXISTS ${sql(tableNames.memory)} (
        memory_key TEXT PRIMARY KEY, document TEXT NOT NULL, updated_at BIGINT NOT NULL)`,
      // A table of its own (not a column of valet_threads): a database made before summaries gets it here, with
      // nothing to alter.
      sql`CREATE TABLE IF NOT EXISTS ${sql(tableNames.summaries)} (
        thread_id TEXT PRIMARY KEY, through BIGINT NOT NULL, content TEXT NOT NULL, updated_at BIGINT NOT NULL)`,
      sql`CREATE TABLE IF NOT EXISTS ${turns} (
        thread_id TEXT NOT NULL, turn_key TEXT NOT NULL, start_idx BIGINT NOT NULL, message_count BIGINT NOT NULL,
        created_at BIGINT NOT NULL, PRIMARY KEY (thread_id, turn_key))`,
      SqlVectors.createStatements(sql)
    ], { discard: true })
  ).pipe(Effect.mapError(failure("create tables")))
  const search = yield* SqlVectors.detect(sql, options.vectorSearch ?? "auto")

  const columns = sql`id, owner, metadata, created_at, updated_at, message_count`

  /** The thread row, checked, and its owner checked; `ThreadNotFound` when there is none. */
  const find = (operation: string, threadId: string, owner: string | undefined) =>
    Effect.gen(function*() {
      yield* Check.checkId(operation, threadId)
      const found = yield* sql`SELECT ${columns} FROM ${threads} WHERE id = ${threadId}`.pipe(Effect.mapError(failure(operation, threadId)))
      if (found.length === 0) {
        return yield* new ThreadNotFound({ threadId, message: `Threads.${operation}: no thread ${JSON.stringify(threadId)}` })
      }
      const thread = threadOf(operation, found[0])
      if (Result.isFailure(thread)) return yield* thread.failure
      return yield* Check.owned(operation, thread.success, owner)
    })

  const busy = (operation: string, threadId: string, why: string) =>
    new ThreadBusy({ threadId, message: `Threads.${operation}: thread ${JSON.stringify(threadId)} ${why}` })

  const vectors = SqlVectors.make(sql, search, find, messageOf)

  const insertThread = (operation: string, thread: Thread) =>
    sql`INSERT INTO ${threads} (id, owner, metadata, created_at, updated_at, message_count)
      VALUES (${thread.id}, ${thread.owner}, ${JSON.stringify(thread.metadata)}, ${thread.createdAt}, ${thread.updatedAt}, ${thread.messageCount})
      ON CONFLICT (id) DO NOTHING RETURNING id`.pipe(
      Effect.mapError(failure(operation, thread.id)),
      Effect.flatMap((inserted) =>
        inserted.length === 1 ? Effect.void : Effect.fail(Check.refuse(operation, `a thread ${JSON.stringify(thread.id)} exists`, thread.id))
      )
    )

  const create: Service["create"] = (options) =>
    Effect.gen(function*() {
      const id = options.id ?? Check.newThreadId()
      yield* Check.checkId("create", id)
      yield* Check.checkOwner("create", options.owner, id)
      const metadata = yield* Check.metadataOf("create", options.metadata, id)
      const now = yield* Clock.currentTimeMillis
      const thread: Thread = { id, owner: options.owner, metadata, createdAt: now, updatedAt: now, messageCount: 0 }
      yield* insertThread("create", thread)
      return thread
    })

  const messages: Service["messages"] = (threadId, options) =>
    Effect.gen(function*() {
      const thread = yield* find("messages", threadId, options?.owner)
      const total = thread.messageCount
      const before = yield* Check.checkInteger("messages", "before", options?.before, total, 0, total, threadId)
      const limit = yield* Check.checkInteger("messages", "limit", options?.limit, 100, 1, 1000, threadId)
      const start = Math.max(0, before - limit)
      const found = yield* sql`SELECT idx, message FROM ${rows}
        WHERE thread_id = ${threadId} AND idx >= ${start} AND idx < ${before} ORDER BY idx`.pipe(Effect.mapError(failure("messages", threadId)))
      const page: Array<Message> = []
      for (const row of found) {
        const message = messageOf("messages", threadId, row)
        if (Result.isFailure(message)) return yield* message.failure
        page.push(message.success)
      }
      if (page.length !== before - start) {
        return yield* Check.refuse("messages", `thread ${JSON.stringify(threadId)} counts ${total} messages but ${tableNames.messages} holds ${page.length} of [${start}, ${before})`, threadId)
      }
      return { threadId, start, messages: page, total }
    })

  const list: Service["list"] = (owner, options) =>
    Effect.gen(function*() {
      yield* Check.checkOwner("list", owner)
      const limit = yield* Check.checkInteger("list", "limit", options?.limit, 50, 1, 500)
      const cursor = Check.parseCursor(options?.cursor)
      if (Result.isFailure(cursor)) return yield* Check.refuse("list", cursor.failure)
      const after = cursor.success
      const found = yield* (after === undefined
        ? sql`SELECT ${columns} FROM ${threads} WHERE owner = ${owner} ORDER BY updated_at DESC, id DESC LIMIT ${limit + 1}`
        : sql`SELECT ${columns} FROM ${threads} WHERE owner = ${owner}
            AND (updated_at < ${after.updatedAt} OR (updated_at = ${after.updatedAt} AND id < ${after.id}))
            ORDER BY updated_at DESC, id DESC LIMIT ${limit + 1}`).pipe(Effect.mapError(failure("list")))
      const page: Array<Thread> = []
      for (const row of found.slice(0, limit)) {
        const thread = threadOf("list", row)
        if (Result.isFailure(thread)) return yield* thread.failure
        page.push(thread.success)
      }
      return found.length > limit ? { threads: page, nextCursor: Check.cursorOf(page.at(-1)!) } : { threads: page }
    })

  const append: Service["append"] = (threadId, added, options) => {
    const once = appendOnce(threadId, added, options)
    // A plain append (no count expected, no lease) that another writer got ahead of reads the new count and goes
    // again: appends of several writers all land, one after the other.
    const tried = options?.expectedCount === undefined && options?.lease === undefined
      ? Effect.retry(once, { while: (error) => error._tag === "ThreadBusy", times: 100 })
      : once
    const turnKey = options?.turnKey
    // Beaten by an append of the same key (two executions of one turn at once): the winner's messages are the turn's.
    return turnKey === undefined ? tried : Effect.catchTag(tried, "ThreadBusy", (busy) =>
      Effect.flatMap(hasTurn("append", threadId, turnKey), (stored): Effect.Effect<Thread, ThreadError> =>
        stored ? find("append", threadId, options?.owner) : Effect.fail(busy)))
  }

  const hasTurn = (operation: string, threadId: string, turnKey: string) =>
    sql`SELECT turn_key FROM ${turns} WHERE thread_id = ${threadId} AND turn_key = ${turnKey}`.pipe(
      Effect.map((found) => found.length > 0),
      Effect.mapError(failure(operation, threadId))
    )

  const appendOnce: Service["append"] = (threadId, added, options) =>
    sql.withTransaction(Effect.gen(function*() {
      const thread = yield* find("append", threadId, options?.owner)
      const turnKey = options?.turnKey
      yield* Check.checkTurnKey("append", turnKey, threadId)
      const checked = yield* Check.checkMessages("append", threadId, added, thread.messageCount)
      // A turn already appended: answered as it is, before the count and the lease (which may have moved on since).
      if (turnKey !== undefined && (yield* hasTurn("append", threadId, turnKey))) return thread
      const now = yield* Clock.currentTimeMillis
      const count = thread.messageCount
      if (options?.expectedCount !== undefined && options.expectedCount !== count) {
        return yield* busy("append", threadId, `holds ${count} messages, not the ${options.expectedCount} expected: another writer appended`)
      }
      const lease = options?.lease
      // Conditioned on the count read (and the lease): a writer that got in between makes this write nothing.
      const updated = yield* (lease === undefined
        ? sql`UPDATE ${threads} SET message_count = ${count + checked.length}, updated_at = ${now}
            WHERE id = ${threadId} AND message_count = ${count} RETURNING id`
        : sql`UPDATE ${threads} SET message_count = ${count + checked.length}, updated_at = ${now}
            WHERE id = ${threadId} AND message_count = ${count} AND lease_token = ${lease.token} AND lease_until >= ${now}
            RETURNING id`).pipe(Effect.mapError(failure("append", threadId)))
      if (updated.length === 0) {
        return yield* busy("append", threadId, lease === undefined ? "changed while appending: another writer appended" : "is no longer held by this turn's lease")
      }
      if (checked.length > 0) {
        yield* sql`INSERT INTO ${rows} ${
          sql.insert(checked.map((message, i): Record<string, unknown> => ({ thread_id: threadId, idx: count + i, message: JSON.stringify(message) })) as [
            Record<string, unknown>,
            ...Array<Record<string, unknown>>
          ])
        }`.pipe(Effect.mapError(failure("append", threadId)))
      }
      if (turnKey !== undefined) {
        yield* sql`INSERT INTO ${turns} (thread_id, turn_key, start_idx, message_count, created_at)
          VALUES (${threadId}, ${turnKey}, ${count}, ${checked.length}, ${now})`.pipe(Effect.mapError(failure("append", threadId)))
      }
      return { ...thread, updatedAt: now, messageCount: count + checked.length }
    })).pipe(Effect.mapError((error) => "_tag" in error && error._tag === "SqlError" ? failure("append", threadId)(error) : error))

  const TurnRow = Schema.Struct({ start_idx: IntegerColumn, message_count: IntegerColumn })
  const decodeTurnRow = Schema.decodeUnknownResult(TurnRow)

  const turnOf: Service["turnOf"] = (threadId, turnKey, options) =>
    Effect.gen(function*() {
      yield* find("turnOf", threadId, options?.owner)
      yield* Check.checkTurnKey("turnOf", turnKey, threadId)
      const found = yield* sql`SELECT start_idx, message_count FROM ${turns} WHERE thread_id = ${threadId} AND turn_key = ${turnKey}`.pipe(
        Effect.mapError(failure("turnOf", threadId))
      )
      if (found.length > 0) {
        const row = decodeTurnRow(found[0])
        if (Result.isFailure(row)) {
          return yield* Check.refuse("turnOf", formatIssue(`a row of ${tableNames.turns} is not a turn`, row.failure.issue, found[0]), threadId)
        }
        return { status: "appended", start: row.success.start_idx, count: row.success.message_count } satisfies KeyedTurn
      }
      const now = yield* Clock.currentTimeMillis
      const prefix = Check.turnLeasePrefix(turnKey)
      // As `acquire` compares a turn key's lease: by its prefix, as a substring (a key may hold LIKE's `%` and `_`).
      const held = yield* sql`SELECT id FROM ${threads} WHERE id = ${threadId} AND lease_until >= ${now}
        AND substr(lease_token, 1, ${prefix.length}) = ${prefix}`.pipe(Effect.mapError(failure("turnOf", threadId)))
      return held.length > 0 ? { status: "running" } satisfies KeyedTurn : undefined
    })

  const fork: Service["fork"] = (threadId, options) =>
    sql.withTransaction(Effect.gen(function*() {
      const source = yield* find("fork", threadId, options.owner)
      const at = yield* Check.checkInteger("fork", "at", options.at, 0, 0, source.messageCount, threadId)
      const id = options.id ?? Check.newThreadId()
      yield* Check.checkId("fork", id)
      const metadata = yield* Check.metadataOf("fork", options.metadata ?? source.metadata, id)
      const now = yield* Clock.currentTimeMillis
      const thread: Thread = { id, owner: source.owner, metadata, createdAt: now, updatedAt: now, messageCount: at }
      yield* insertThread("fork", thread)
      yield* sql`INSERT INTO ${rows} (thread_id, idx, message)
        SELECT ${id}, idx, message FROM ${rows} WHERE thread_id = ${threadId} AND idx < ${at}`.pipe(Effect.mapError(failure("fork", threadId)))
      // A summary of messages the fork holds, and of no later one, still stands for them.
      yield* sql`INSERT INTO ${summaries} (thread_id, through, content, updated_at)
        SELECT ${id}, through, content, ${now} FROM ${summaries} WHERE thread_id = ${threadId} AND through <= ${at}`.pipe(
        Effect.mapError(failure("fork", threadId))
      )
      yield* vectors.forkOf(threadId, id, at).pipe(Effect.mapError(failure("fork", threadId)))
      return thread
    })).pipe(Effect.mapError((error) => "_tag" in error && error._tag === "SqlError" ? failure("fork", threadId)(error) : error))

  const delete_: Service["delete"] = (threadId, options) =>
    sql.withTransaction(Effect.gen(function*() {
      yield* find("delete", threadId, options?.owner)
      yield* sql`DELETE FROM ${rows} WHERE thread_id = ${threadId}`.pipe(Effect.mapError(failure("delete", threadId)))
      yield* sql`DELETE FROM ${summaries} WHERE thread_id = ${threadId}`.pipe(Effect.mapError(failure("delete", threadId)))
      yield* sql`DELETE FROM ${turns} WHERE thread_id = ${threadId}`.pipe(Effect.mapError(failure("delete", threadId)))
      yield* vectors.deleteOf(threadId).pipe(Effect.mapError(failure("delete", threadId)))
      yield* sql`DELETE FROM ${threads} WHERE id = ${threadId}`.pipe(Effect.mapError(failure("delete", threadId)))
    })).pipe(Effect.mapError((error) => "_tag" in error && error._tag === "SqlError" ? failure("delete", threadId)(error) : error))

  const acquire: Service["acquire"] = (threadId, options) =>
    Effect.gen(function*() {
      yield* find("acquire", threadId, options.owner)
      yield* Check.checkTurnKey("acquire", options.turnKey, threadId)
      const now = yield* Clock.currentTimeMillis
      const token = options.turnKey !== undefined ? Check.turnLeaseToken(options.turnKey) : Check.newLeaseToken()
      // A turn key's own lease is taken again (by its prefix: compared as a substring, not with LIKE, whose `%` and
      // `_` a key may hold); a random token's prefix is no turn's.
      const prefix = options.turnKey !== undefined ? Check.turnLeasePrefix(options.turnKey) : token
      const taken = yield* sql`UPDATE ${threads} SET lease_token = ${token}, lease_until = ${now + options.durationMs}
        WHERE id = ${threadId} AND (lease_token IS NULL OR lease_until < ${now}
          OR substr(lease_token, 1, ${prefix.length}) = ${prefix}) RETURNING id`.pipe(
        Effect.mapError(failure("acquire", threadId))
      )
      if (taken.length === 0) return yield* busy("acquire", threadId, "is in another turn")
      return { threadId, token }
    })

  const renew: Service["renew"] = (lease, durationMs) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const renewed = yield* sql`UPDATE ${threads} SET lease_until = ${now + durationMs}
        WHERE id = ${lease.threadId} AND lease_token = ${lease.token} RETURNING id`.pipe(Effect.mapError(failure("renew", lease.threadId)))
      if (renewed.length === 0) return yield* busy("renew", lease.threadId, "was taken by another turn")
    })

  const release: Service["release"] = (lease) =>
    sql`UPDATE ${threads} SET lease_token = NULL, lease_until = NULL WHERE id = ${lease.threadId} AND lease_token = ${lease.token}`.pipe(
      Effect.mapError(failure("release", lease.threadId)),
      Effect.asVoid
    )

  const readMemory: Service["readMemory"] = (key) =>
    sql`SELECT document FROM ${sql(tableNames.memory)} WHERE memory_key = ${key}`.pipe(
      Effect.mapError(failure("readMemory")),
      Effect.flatMap((found) => {
        if (found.length === 0) return Effect.succeed(undefined)
        const text = (found[0] as { document?: unknown }).document
        try {
          if (typeof text !== "string") throw new Error("the document column is not text")
          return Effect.succeed(JSON.parse(text) as unknown)
        } catch (error) {
          return Effect.fail(Check.refuse("readMemory", `the working memory ${JSON.stringify(key)} in ${tableNames.memory} is not JSON (${error instanceof Error ? error.message : String(error)})`))
        }
      })
    )

  const writeMemory: Service["writeMemory"] = (key, document) =>
    Effect.gen(function*() {
      const text = yield* Check.memoryText(key, document)
      const now = yield* Clock.currentTimeMillis
      yield* sql`INSERT INTO ${sql(tableNames.memory)} (memory_key, document, updated_at) VALUES (${key}, ${text}, ${now})
        ON CONFLICT (memory_key) DO UPDATE SET document = excluded.document, updated_at = excluded.updated_at`.pipe(
        Effect.mapError(failure("writeMemory"))
      )
    })

  const summary: Service["summary"] = (threadId, options) =>
    Effect.gen(function*() {
      yield* find("summary", threadId, options?.owner)
      const found = yield* sql`SELECT through, content FROM ${summaries} WHERE thread_id = ${threadId}`.pipe(Effect.mapError(failure("summary", threadId)))
      if (found.length === 0) return undefined
      const decoded = decodeSummaryRow(found[0])
      if (Result.isFailure(decoded)) {
        return yield* Check.refuse("summary", formatIssue(`the summary of thread ${JSON.stringify(threadId)} in ${tableNames.summaries} is not a summary row`, decoded.failure.issue, found[0]), threadId)
      }
      if (decoded.success.through < 1) {
        return yield* Check.refuse("summary", `the summary of thread ${JSON.stringify(threadId)} in ${tableNames.summaries} stands for ${decoded.success.through} messages (at least 1)`, threadId)
      }
      return decoded.success
    })

  const writeSummary: Service["writeSummary"] = (threadId, written, options) =>
    sql.withTransaction(Effect.gen(function*() {
      const thread = yield* find("writeSummary", threadId, options?.owner)
      const checked = yield* Check.checkSummary(threadId, written, thread.messageCount)
      const now = yield* Clock.currentTimeMillis
      const lease = options?.lease
      // With a lease: written only while it holds the thread (one statement, so that it cannot be lost in between).
      const kept = yield* sql`INSERT INTO ${summaries} (thread_id, through, content, updated_at)
        SELECT ${threadId}, ${checked.through}, ${checked.content}, ${now} FROM ${threads}
        WHERE id = ${threadId} ${lease === undefined ? sql`` : sql`AND lease_token = ${lease.token} AND lease_until >= ${now}`}
        ON CONFLICT (thread_id) DO UPDATE SET through = excluded.through, content = excluded.content, updated_at = excluded.updated_at
        RETURNING thread_id`.pipe(Effect.mapError(failure("writeSummary", threadId)))
      if (kept.length === 0) return yield* busy("writeSummary", threadId, "is no longer held by this turn's lease")
    })).pipe(Effect.mapError((error) => "_tag" in error && error._tag === "SqlError" ? failure("writeSummary", threadId)(error) : error))

  return {
    readMemory,
    writeMemory,
    summary,
    writeSummary,
    vectorSearch: vectors.vectorSearch,
    storeVectors: vectors.storeVectors,
    recall: vectors.recall,
    create,
    get: (threadId, options) => find("get", threadId, options?.owner),
    messages,
    list,
    append,
    turnOf,
    fork,
    delete: delete_,
    acquire,
    renew,
    release
  } satisfies Service
})

export const make: Effect.Effect<Service, ThreadStoreError, SqlClient.SqlClient> = makeWith()

/**
 * How valet's durable engine (`engine.ts`) writes: its tables, made when it starts, and its writes — a failed
 * statement as the store's defect, and the writes of one moment together (one transaction on SQLite, at once on
 * PostgreSQL).
 */
import { Cause, Deferred, Effect, Exit, type Scope } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import { createTables } from "../../../core/internal/sql.js"
import type { Result } from "./engineCodecs.js"
import { activitiesTable, clocksTable, deferredsTable, executionsTable, type OnStoreFailure, resumesTable, runnerTable } from "./engineModel.js"

/** The engine's writes on `sql`. */
export const make = (sql: SqlClient.SqlClient, options: {
  readonly onStoreFailure: OnStoreFailure
  /** A database shared by processes (PostgreSQL): writes are not grouped in a transaction. */
  readonly shared: boolean
  /** Where a group's commit runs. */
  readonly scope: Scope.Scope
}) => {
  const { onStoreFailure, scope } = options
  // What failed statements died with: a run that ends with one of them ended because the file did, not by itself.
  const storeFailures = new WeakSet<object>()
  const stored = <A>(effect: Effect.Effect<A, SqlError.SqlError>): Effect.Effect<A> =>
    Effect.catch(effect, (error) => {
      const defect = onStoreFailure(error)
      if (typeof defect === "object" && defect !== null) storeFailures.add(defect)
      return Effect.die(defect)
    })
  /** The store failure a run's result carries (an activity's result could not be stored), if any. */
  const storeFailureIn = (result: Result): object | undefined => {
    const cause = result._tag === "Suspended" ? result.cause : Exit.isFailure(result.exit) ? result.exit.cause : undefined
    for (const reason of cause?.reasons ?? []) {
      if (Cause.isDieReason(reason) && typeof reason.defect === "object" && reason.defect !== null && storeFailures.has(reason.defect)) return reason.defect
    }
    return undefined
  }

  // Group commit: the writes asked for while the engine's fibers run (the activities of many workflows ending at
  // once) are committed together in one transaction, each caller resuming once it is committed. A commit writes
  // its pages to the log once, however many rows (an evaluation of 600 problems, 12 at once, on an instant model:
  // 1.2–1.6 s → 0.75 s a round). What a caller wrote is committed before it goes on, as with one statement each.
  const queue: Array<{ readonly statement: Effect.Effect<unknown, SqlError.SqlError>; readonly done: Deferred.Deferred<void> }> = []
  const flush: Effect.Effect<void> = Effect.gen(function*() {
    // One turn of the scheduler first, so the writes of the fibers ready now join this commit.
    yield* Effect.yieldNow
    const batch = queue.splice(0)
    if (options.shared) {
      // PostgreSQL: each its own statement, at once (on the pool's connections). A transaction around them would
      // add a BEGIN and a COMMIT, two round trips, for a saving the server makes itself: concurrent commits share
      // a log flush there.
      return yield* Effect.forEach(batch, (write) => Effect.exit(stored(write.statement)).pipe(Effect.map((exit) => Deferred.doneUnsafe(write.done, Exit.asVoid(exit)))), {
        concurrency: "unbounded",
        discard: true
      })
    }
    const statements = Effect.forEach(batch, (write) => write.statement, { discard: true })
    const exit = yield* Effect.exit(stored(batch.length === 1 ? statements : sql.withTransaction(statements)))
    for (const write of batch) Deferred.doneUnsafe(write.done, exit)
  })
  const written = (statement: Effect.Effect<unknown, SqlError.SqlError>): Effect.Effect<void> =>
    Effect.suspend(() => {
      const done = Deferred.makeUnsafe<void>()
      queue.push({ statement, done })
      return queue.length === 1 ? Effect.andThen(Effect.forkIn(flush, scope), Deferred.await(done)) : Deferred.await(done)
    })
  return { stored, storeFailureIn, written }
}

/**
 * The engine's tables. Sharing a database (PostgreSQL), an execution names its owner, when it was stored and how
 * often it was taken (a runner takes one started for another only once it has waited: see `engineRunners.ts`).
 */
export const createEngineTables = (sql: SqlClient.SqlClient, shared: boolean): Effect.Effect<void, SqlError.SqlError> => {
  const [executionsT, activitiesT, deferredsT, clocksT, resumesT, runnerT] = [executionsTable, activitiesTable, deferredsTable, clocksTable, resumesTable, runnerTable].map((name) => sql(name))
  const sharedColumns = sql.literal(shared ? ", owner TEXT, created_at BIGINT NOT NULL DEFAULT 0, takes INTEGER NOT NULL DEFAULT 0" : "")
  return createTables(
    sql,
    executionsTable,
    Effect.all([
      sql`CREATE TABLE IF NOT EXISTS ${executionsT} (
        execution_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, payload TEXT NOT NULL, parent TEXT,
        interrupted INTEGER NOT NULL DEFAULT 0, suspended TEXT, result TEXT${sharedColumns})`,
      sql`CREATE INDEX IF NOT EXISTS valet_workflow_executions_open ON ${executionsT} (workflow) WHERE result IS NULL`,
      // What the running process looks for when another connection commits: interrupts a client marked.
      sql`CREATE INDEX IF NOT EXISTS valet_workflow_executions_interrupted ON ${executionsT} (execution_id) WHERE result IS NULL AND interrupted >= 1`,
      sql`CREATE TABLE IF NOT EXISTS ${activitiesT} (
        execution_id TEXT NOT NULL, activity TEXT NOT NULL, exit TEXT NOT NULL, PRIMARY KEY (execution_id, activity))`,
      sql`CREATE TABLE IF NOT EXISTS ${deferredsT} (
        seq ${sql.literal(shared ? "BIGSERIAL PRIMARY KEY" : "INTEGER PRIMARY KEY AUTOINCREMENT")}, execution_id TEXT NOT NULL, name TEXT NOT NULL, exit TEXT NOT NULL,
        UNIQUE (execution_id, name))`,
      sql`CREATE TABLE IF NOT EXISTS ${clocksT} (
        execution_id TEXT NOT NULL, name TEXT NOT NULL, workflow TEXT NOT NULL, deferred TEXT NOT NULL,
        wake_at BIGINT NOT NULL, PRIMARY KEY (execution_id, name))`,
      // Resumes a client asked for (`valet runs` beside the running process): the running process takes them.
      sql`CREATE TABLE IF NOT EXISTS ${resumesT} (execution_id TEXT PRIMARY KEY)`,
      shared
        ? sql`CREATE INDEX IF NOT EXISTS valet_workflow_executions_owner ON ${executionsT} (owner) WHERE result IS NULL`
        // The process that runs a file's workflows: one row, its claim on the file.
        : sql`CREATE TABLE IF NOT EXISTS ${runnerT} (
        id INTEGER PRIMARY KEY CHECK (id = 1), pid INTEGER NOT NULL, host TEXT NOT NULL, claim TEXT NOT NULL,
        heartbeat_at BIGINT NOT NULL)`
    ], { discard: true })
  )
}

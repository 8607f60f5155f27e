/**
 * Where durable runs live.
 *
 * - SQLite: one process, its state in a file (valet's `node:sqlite` client), on valet's own engine (`engine.ts`:
 *   effect/workflow's memory engine written through to SQL, one statement an activity). The file is checked when
 *   opened (`PRAGMA quick_check`), and a storage failure during the run (the file damaged, full, unreadable) ends the
 *   workflows awaited on it with a `DurableStoreError` naming the file, as one line, not a stack trace per retry.
 * - PostgreSQL: any number of runner processes and clients (the process that starts an evaluation, `valet runs`) on
 *   one database, on the same engine (`engineRunners.ts`: each execution has an owning runner; runners find a dead
 *   one by its ended database session and take its executions). Runners listen on no port.
 *
 * `@effect/sql-pg` is an optional peer: it is loaded when a PostgreSQL engine is built, so a user on SQLite does not
 * need it.
 */
import { Context, Duration, Effect, Fiber, Layer, Redacted, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { WorkflowEngine } from "effect/workflow"
import * as SqliteClient from "../../../environment/SqliteClient.js"
import * as HumanLoopStore from "./humanLoopStore.js"
import * as Engine from "./engine.js"
import * as EngineRunners from "./engineRunners.js"

/** The store of a durable engine could not be opened. */
export class DurableStoreError extends Schema.TaggedError<DurableStoreError>()("DurableStoreError", {
  store: Schema.String,
  message: Schema.String
}) {}

/** The text SQLite gives for an error (the `node:sqlite` error's own message, not the wrapping of effect/sql). */
const sqliteText = (error: SqlError.SqlError): string => {
  const cause = error.reason.cause
  return cause instanceof Error ? cause.message : error.message
}

/** A failed or damaged SQLite store, as the one line that names the file. */
const sqliteFailure = (filename: string, error: SqlError.SqlError, when: "open" | "run"): DurableStoreError =>
  new DurableStoreError({
    store: "sqlite",
    message: `sqlite ${filename}: ${
      !SqliteClient.isDamaged(error)
        ? `${when === "open" ? "cannot open" : "storage failed"}: ${sqliteText(error)}`
        : /not a database/.test(sqliteText(error))
        ? `is not a SQLite database (${sqliteText(error)}): name a new file, or one a durable run wrote`
        : `the database file is damaged (${sqliteText(error)}): restore it from a backup, or start again on a new file`
    }`
  })

/**
 * How a one-process engine's SQLite file commits: `"normal"` (the default) writes each commit to the write-ahead log
 * and syncs it to the disk at checkpoints; `"full"` also waits for the disk at every commit.
 */
export type SqliteSynchronous = "normal" | "full"

/**
 * The SQLite file of a one-process engine, opened and checked with `PRAGMA quick_check`: it reads every page (150 ms
 * for a 121 MB file here, from the OS cache), so a damaged page is found now, not in the middle of a run.
 *
 * Commits are `synchronous = NORMAL` unless `"full"` is asked. Why: the engine commits once per activity and
 * `node:sqlite` is synchronous, so under FULL every commit blocks the event loop for a disk sync (0.2–0.8 ms each
 * here, more on a busy disk): the model calls, tools and every other workflow wait behind it. In WAL mode NORMAL keeps what a killed process committed (the log is written before
 * the commit returns) and the file consistent; only an operating-system crash or power loss can lose the last
 * commits, whose activities then run again on resume, as calls in flight do.
 */
export const sqliteStore = (
  filename: string,
  synchronous: SqliteSynchronous = "normal"
): Layer.Layer<SqliteClient.SqliteClient | SqlClient.SqlClient, DurableStoreError> =>
  Layer.effectContext(Effect.gen(function*() {
    const context = yield* Layer.build(SqliteClient.layer({ filename })).pipe(
      Effect.mapError((error) => sqliteFailure(filename, error, "open"))
    )
    const client = Context.get(context, SqliteClient.SqliteClient)
    const rows = yield* client.unsafe<{ readonly quick_check: unknown }>("PRAGMA quick_check").pipe(
      Effect.mapError((error) => sqliteFailure(filename, error, "open"))
    )
    const problems = rows
      .flatMap((row) => String(row.quick_check).split("\n"))
      .filter((line) => line.trim() !== "" && line !== "ok" && !line.startsWith("***"))
    if (problems.length > 0) {
      return yield* new DurableStoreError({
        store: "sqlite",
        message: `sqlite ${filename}: the database file is damaged (PRAGMA quick_check: ${problems[0]}` +
          `${problems.length > 1 ? `, and ${problems.length - 1} more` : ""}): restore it from a backup, or start again on a new file`
      })
    }
    yield* client.unsafe(`PRAGMA synchronous = ${synchronous === "full" ? "FULL" : "NORMAL"}`).pipe(
      Effect.mapError((error) => sqliteFailure(filename, error, "open"))
    )
    // A file an earlier valet wrote with effect/cluster's engine: its runs are in tables this engine does not read,
    // so they would neither resume nor be found (a rerun would start every one of them again). Said, not ignored.
    const tables = new Set((yield* client.unsafe<{ readonly name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'").pipe(
      Effect.mapError((error) => sqliteFailure(filename, error, "open"))
    )).map((row) => row.name))
    if (tables.has("cluster_messages") && !tables.has(Engine.executionsTable)) {
      return yield* new DurableStoreError({
        store: "sqlite",
        message: `sqlite ${filename}: written by an earlier valet (effect/cluster's engine), whose runs this version cannot resume: ` +
          `finish them with that version, or name a new file`
      })
    }
    return context
  }))

/**
 * The engine in context, its workflows ended at once when the SQLite store fails for good (`SqliteClient.fatal`):
 * `execute` and `poll` die with a `DurableStoreError` naming the file, also those whose runs wait on something else
 * (a model call, a decision) and would only meet the failure at their next write. A defect, because the engine's error channel is each workflow's own; the CLI reports it as one line.
 */
export const endOnStoreFailure = (filename: string): Layer.Layer<WorkflowEngine.WorkflowEngine, never, WorkflowEngine.WorkflowEngine | SqliteClient.SqliteClient> =>
  Layer.effect(WorkflowEngine.WorkflowEngine, Effect.gen(function*() {
    const engine = yield* WorkflowEngine.WorkflowEngine
    const client = yield* SqliteClient.SqliteClient
    let failure: DurableStoreError | undefined
    const watcher = yield* client.fatal.pipe(
      Effect.catch((error) => Effect.sync(() => void (failure = sqliteFailure(filename, error, "run")))),
      Effect.forkScoped
    )
    // The watcher also ends when the scope closes (interrupted): that is no store failure, and the race goes on.
    const failed = Effect.flatMap(Fiber.await(watcher), () => failure !== undefined ? Effect.die(failure) : Effect.never)
    const guard = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.suspend(() => failure !== undefined ? Effect.die(failure) : Effect.raceFirst(effect, failed)).pipe(
        // The storage error may reach the workflow (the engine's defect) a moment before the watcher
        // runs: one turn later, the store's own failure is the one reported.
        Effect.catchCause((cause) => Effect.flatMap(Effect.yieldNow, () => failure !== undefined ? Effect.die(failure) : Effect.failCause(cause)))
      )
    return WorkflowEngine.WorkflowEngine.of({
      ...engine,
      execute: (workflow, options) => guard(engine.execute(workflow, options)),
      poll: (workflow, executionId) => guard(engine.poll(workflow, executionId))
    })
  }))

/**
 * A one-process engine on a SQLite file (`engine.ts`: one statement an activity): checked when opened (see
 * `sqliteStore`), its commits `synchronous = NORMAL` unless `synchronous: "full"` (see `sqliteStore`), its workflows
 * ended when the file fails during the run (see `endOnStoreFailure`). Fails with `DurableStoreError` naming the file.
 * A client (`clientOnly`: a process that decides or answers beside the one running the workflows) runs no workflow:
 * what it completes, interrupts or resumes is stored, and the process that runs them finds it within a quarter of a
 * second.
 */
export const layerSqlite = (
  filename: string,
  options: { readonly clientOnly?: boolean | undefined; readonly synchronous?: SqliteSynchronous | undefined } = {}
) =>
  // The guarded engine is the outer layer: where both provide a WorkflowEngine, the outer one is the one seen.
  endOnStoreFailure(filename).pipe(
    Layer.provideMerge(Layer.effect(
      WorkflowEngine.WorkflowEngine,
      Engine.make({ clientOnly: options.clientOnly, onStoreFailure: (error) => sqliteFailure(filename, error, "run") }).pipe(
        Effect.mapError((claimed) => new DurableStoreError({ store: "sqlite", message: `sqlite ${filename}: ${claimed.message}` }))
      )
    )),
    // valet's table of waiting calls and questions, in the same file.
    Layer.provideMerge(HumanLoopStore.layerSql),
    // Built once, for the engine and the guard; kept private, so it never stands in for a SqlClient of the caller.
    Layer.provide(sqliteStore(filename, options.synchronous))
  )

/** How a PostgreSQL runner or client is set up. */
export interface PostgresOptions {
  /** `postgres://user:password@host:port/database`. */
  readonly url: string
  /** Connections in the pool (default 8). */
  readonly maxConnections?: number | undefined
}

/** How a runner is set up. */
export interface RunnerOptions extends PostgresOptions {
  /** How often a runner beats, looks for dead runners and takes what falls to it (default 1 s). */
  readonly heartbeat?: Duration.Input | undefined
  /**
   * A runner whose heartbeat is this old is dead and its work is taken over (default 10 s): a frozen process, a lost
   * network. A killed runner's work is taken over within a heartbeat, without waiting for this: its database
   * session ends with it.
   */
  readonly expiration?: Duration.Input | undefined
}

/** A PostgreSQL store's failure during a run, as the one line that names the server. */
const pgFailure = (url: string) => (error: SqlError.SqlError) =>
  new DurableStoreError({ store: "postgres", message: `${serverOf(url)}: storage failed: ${error.message}` })

// Connected and asked once here, so a server that is not there is one line naming it, not a defect at the first
// statement.
const pgClient = (options: PostgresOptions): Layer.Layer<SqlClient.SqlClient | EngineRunners.Listener, DurableStoreError> =>
  Layer.effectContext(Effect.gen(function*() {
    const where = serverOf(options.url)
    const failed = (message: string) => new DurableStoreError({ store: "postgres", message: `${where}: ${message}` })
    const { PgClient } = yield* Effect.tryPromise({
      try: () => import("@effect/sql-pg"),
      catch: () => failed("a PostgreSQL store needs the optional package @effect/sql-pg: npm install @effect/sql-pg")
    })
    const context = yield* Layer.build(
      PgClient.layer({ url: Redacted.make(options.url), maxConnections: options.maxConnections ?? 8 })
    ).pipe(Effect.mapError((error) => failed(`cannot connect: ${error.message}`)))
    yield* Context.get(context, SqlClient.SqlClient)`SELECT 1`.pipe(
      Effect.mapError((error) => failed(`cannot connect: ${error.message}`))
    )
    // A database an earlier valet's runners used (effect/cluster's tables): its runs are in tables this engine does
    // not read, so they would neither resume nor be found. Said, not ignored, as for a SQLite file.
    const tables = yield* Context.get(context, SqlClient.SqlClient)<{ readonly cluster: string | null; readonly valet: string | null }>`SELECT
      to_regclass('cluster_messages')::text AS cluster, to_regclass(${Engine.executionsTable})::text AS valet`.pipe(
      Effect.mapError((error) => failed(`cannot connect: ${error.message}`))
    )
    if (tables[0]?.cluster != null && tables[0]?.valet == null) {
      return yield* failed(
        "written by an earlier valet's runners (effect/cluster's tables), whose runs this version cannot resume: " +
          "finish them with that version, or drop its cluster_* tables, or name a new database"
      )
    }
    const pg = Context.get(context, PgClient.PgClient)
    return Context.add(context, EngineRunners.Listener, { listen: (channel) => pg.listen(channel) })
  }))

/** The layer without the engine's private `Listener` (built once, for the engine only). */
const withoutListener = <A, E>(layer: Layer.Layer<A, E>): Layer.Layer<Exclude<A, EngineRunners.Listener>, E> =>
  Layer.effectContext(Effect.map(Layer.build(layer), (context) => Context.omit(EngineRunners.Listener)(context)))

/** The server of a PostgreSQL URL, without its credentials: `postgres host:port/database`. */
export const serverOf = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `postgres ${parsed.hostname}:${parsed.port || "5432"}${parsed.pathname}`
  } catch {
    return "postgres (an unreadable URL)"
  }
}

/**
 * A runner: runs its share of the workflows (those registered by the handler layers it is given), its state in
 * PostgreSQL, and takes over the share of a runner that dies (`engineRunners.ts`). Its `SqlClient` is provided too,
 * for stores that live beside it (the actor loop's task states).
 */
export const layerPostgresRunner = (options: RunnerOptions) =>
  withoutListener(
    Layer.effect(
      WorkflowEngine.WorkflowEngine,
      EngineRunners.runner({ heartbeat: options.heartbeat, expiration: options.expiration, onStoreFailure: pgFailure(options.url) })
    ).pipe(
      Layer.provideMerge(HumanLoopStore.layerSql),
      Layer.provideMerge(pgClient(options))
    )
  )

/** A client: starts workflows and awaits their results; the runners do the work. */
export const layerPostgresClient = (options: PostgresOptions) =>
  Layer.effect(WorkflowEngine.WorkflowEngine, EngineRunners.client({ onStoreFailure: pgFailure(options.url) })).pipe(
    Layer.provideMerge(HumanLoopStore.layerSql),
    Layer.provide(pgClient(options))
  )

/**
 * An `effect/sql` `SqlClient` over Node's built-in `node:sqlite` (`DatabaseSync`): SQLite with no native build.
 *
 * Why it is here: no `@effect/sql-sqlite-node` release imports on effect 4.1 (its 4.0 betas import the removed
 * `effect/unstable/*` paths). This module follows the structure of that official driver (Effect-TS/effect,
 * `packages/sql/sqlite-node/src/SqliteClient.ts`, which is itself written over `node:sqlite`): one connection
 * shared through a semaphore (`SqlClient.makeSqliteAcquirers`), prepared statements cached by SQL text, WAL and
 * a busy timeout by default, `BEGIN IMMEDIATE` for transactions on a writable database, nested transactions as
 * savepoints (`SqlClient.make` does that for every driver). When an official driver imports on effect 4.1, replace
 * `SqliteClient.layer(...)` with `@effect/sql-sqlite-node`'s `SqliteClient.layer(...)` (same config fields) and
 * delete this file: everything in valet talks to the generic `SqlClient`.
 *
 * Differences from the official driver: opening the database is a typed `SqlError` (not a defect), a statement
 * run after the layer closed is a `SqlError` naming that, `executeStream` answers the rows (read at once) instead
 * of dying, booleans are bound as 0 / 1, and a syntax error is a `SqlSyntaxError` reason. And `fatal`: callers that
 * retry every failed statement (effect/cluster's storage loops retry forever) can end their work when the file
 * itself has failed (damaged, not a database, disk full, I/O error), which no retry cures.
 *
 * `node:sqlite` is loaded when a client is made, not when this module is imported, so importing valet neither
 * loads it nor prints its experimental warning on Node versions that still do. `node:sqlite` is synchronous: a
 * statement (and a busy wait) blocks the event loop while it runs.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { SqlClient } from "effect/sql"
 * import * as LessonStore from "valet/LessonStore"
 * import * as SqliteClient from "valet/SqliteClient"
 *
 * // Plain SQL on the generic `SqlClient`: the code does not know it is SQLite.
 * const program = Effect.gen(function*() {
 *   const sql = yield* SqlClient.SqlClient
 *   yield* sql`CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)`
 *   yield* sql`INSERT INTO notes ${sql.insert({ body: "hello" })}`
 *   return yield* sql<{ readonly body: string }>`SELECT body FROM notes`
 * })
 *
 * const notes = program.pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" })))
 *
 * // valet's stores take any `SqlClient`: here a lesson store in a SQLite file.
 * const lessons = LessonStore.layerSql.pipe(Layer.provide(SqliteClient.layer({ filename: "data/lessons.sqlite3" })))
 * ```
 *
 * @since 0.2.0
 */
import { Config, Context, Deferred, Duration, Effect, Layer, Scope, Semaphore, Stream } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient, SqlConnection, SqlError, Statement } from "effect/sql"
import type { DatabaseSync, SQLInputValue, StatementSync } from "node:sqlite"

const MAX_BUSY_TIMEOUT = 2_147_483_647

/**
 * Marks a valet `SqliteClient`.
 *
 * @since 0.2.0
 * @category type ids
 */
export const TypeId: TypeId = "~valet/SqliteClient"
/**
 * Marks a valet `SqliteClient`.
 *
 * @since 0.2.0
 * @category type ids
 */
export type TypeId = "~valet/SqliteClient"

/**
 * A `SqlClient` on one SQLite database; `updateValues` is not supported by SQLite.
 *
 * @since 0.2.0
 * @category models
 */
export interface SqliteClient extends SqlClient.SqlClient {
  readonly [TypeId]: TypeId
  readonly config: SqliteClientConfig
  /** Not supported in SQLite. */
  readonly updateValues: never
  /**
   * Fails with the first error of a statement that no retry cures — see `isFatal` — and never succeeds: race
   * work that retries failed statements against it to end that work instead. After a damaged or foreign file
   * (`SQLITE_CORRUPT`, `SQLITE_NOTADB`) every later statement fails at once with the same error, so nothing more
   * is written into it.
   *
   * @since 0.2.0
   */
  readonly fatal: Effect.Effect<never, SqlError.SqlError>
}

/**
 * SQLite's primary result codes that say the database file itself failed, so that running the statement again
 * cannot succeed: `SQLITE_PERM` (3), `SQLITE_READONLY` (8), `SQLITE_IOERR` (10), `SQLITE_CORRUPT` (11),
 * `SQLITE_FULL` (13), `SQLITE_CANTOPEN` (14), `SQLITE_NOTADB` (26). Busy and locked (5, 6) are not: they pass.
 */
const fatalCodes: ReadonlySet<number> = new Set([3, 8, 10, 11, 13, 14, 26])
/** `SQLITE_CORRUPT` and `SQLITE_NOTADB`: the file is not a database any more; nothing more is run on it. */
const damagedCodes: ReadonlySet<number> = new Set([11, 26])

/** The SQLite result code of a `node:sqlite` error (its primary code: the low byte of an extended one). */
const resultCode = (cause: unknown): number | undefined =>
  typeof cause === "object" && cause !== null && "errcode" in cause && typeof cause.errcode === "number"
    ? cause.errcode & 0xff
    : undefined

/**
 * Whether an error of this client means the file is damaged or is not a SQLite database at all (`SQLITE_CORRUPT`,
 * `SQLITE_NOTADB`), on opening it or on any statement.
 *
 * @since 0.2.0
 * @category errors
 */
export const isDamaged = (error: SqlError.SqlError): boolean => damagedCodes.has(resultCode(error.reason.cause) ?? 0)

/**
 * Whether an error of this client means the database file failed (damaged, not a database, full, unreadable or
 * unwritable), as opposed to the statement (a syntax error, a constraint) or a passing lock.
 *
 * @since 0.2.0
 * @category errors
 */
export const isFatal = (error: SqlError.SqlError): boolean => {
  const code = resultCode(error.reason.cause)
  return code !== undefined && fatalCodes.has(code)
}

/**
 * The SQLite client service (also provided as the generic `SqlClient`).
 *
 * @since 0.2.0
 * @category services
 */
export const SqliteClient: Context.Service<SqliteClient, SqliteClient> = Context.Service<SqliteClient>("valet/SqliteClient")

/**
 * How to open the database. The same fields as `@effect/sql-sqlite-node`'s config, so a swap is mechanical.
 *
 * @since 0.2.0
 * @category options
 */
export interface SqliteClientConfig {
  /** The database file, or `:memory:`. Its directory must exist. */
  readonly filename: string
  /** Open read-only (transactions then start with a plain `BEGIN`). */
  readonly readonly?: boolean | undefined
  /** How many prepared statements to keep, least recently used dropped first (default 200). */
  readonly prepareCacheSize?: number | undefined
  /** Leave the journal mode alone instead of switching to WAL. */
  readonly disableWAL?: boolean | undefined
  /** How long a statement waits for another connection's lock (default 5 seconds; blocks the event loop). */
  readonly busyTimeout?: Duration.Input | undefined
  /**
   * Load the `sqlite-vec` extension (the npm package `sqlite-vec`, an optional dependency of valet) for vector search:
   * the thread store's recall then ranks in SQL instead of scanning. `"auto"` loads it when the package is installed
   * and its binary loads on this platform, and goes on without it otherwise (the stores scan); `true` requires it (a
   * `SqlError` saying why it could not load); `false`, the default, never loads it.
   */
  readonly sqliteVec?: boolean | "auto" | undefined
  /**
   * Paths of other SQLite loadable extensions to load when the database opens; one that does not load is a `SqlError`
   * naming it. Loading is allowed only while the database opens (`node:sqlite`'s `allowExtension`), then switched off.
   */
  readonly extensions?: ReadonlyArray<string> | undefined
  readonly spanAttributes?: Record<string, unknown> | undefined
  readonly transformResultNames?: ((str: string) => string) | undefined
  readonly transformQueryNames?: ((str: string) => string) | undefined
}

/**
 * Opens the database in the current scope (closed when the scope closes) and builds a client on it.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (options: SqliteClientConfig): Effect.Effect<SqliteClient, SqlError.SqlError, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const compiler = Statement.makeCompilerSqlite(options.transformQueryNames)
    const transformRows = options.transformResultNames
      ? Statement.defaultTransforms(options.transformResultNames).array
      : undefined
    const readonly = options.readonly === true
    const db = yield* open(options)
    const fatal = yield* Deferred.make<never, SqlError.SqlError>()
    const connection = makeConnection(db, options.filename, Math.max(0, options.prepareCacheSize ?? 200), fatal)
    const semaphore = yield* Semaphore.make(1)
    const acquirers = SqlClient.makeSqliteAcquirers({
      connection: Effect.succeed(connection),
      semaphore,
      isTransaction: () => db.isOpen && db.isTransaction
    })
    const client = yield* SqlClient.make({
      acquirer: acquirers.acquirer,
      borrower: acquirers.borrower,
      transactionAcquirer: acquirers.transactionAcquirer,
      onCommitFailure: acquirers.onCommitFailure,
      isTransaction: acquirers.isTransaction,
      compiler,
      // The official driver's name: this client manages its connection the same way, and is meant to be swapped for it.
      driver: "sqlite-node",
      // Taking the write lock up front avoids a read lock that cannot be upgraded while another connection writes.
      beginTransaction: readonly ? "BEGIN" : "BEGIN IMMEDIATE",
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      prepareTransactionControls: true,
      spanAttributes: [
        ...(options.spanAttributes ? Object.entries(options.spanAttributes) : []),
        ["db.system.name", "sqlite"]
      ],
      transformRows
    })
    return Object.assign(client, { [TypeId]: TypeId, config: options, fatal: Deferred.await(fatal) }) as SqliteClient
  })

/**
 * Provides `SqliteClient` and the generic `SqlClient` on one database, closed when the layer is released.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (config: SqliteClientConfig): Layer.Layer<SqliteClient | SqlClient.SqlClient, SqlError.SqlError> =>
  Layer.effectContext(
    Effect.map(make(config), (client) => Context.make(SqliteClient, client).pipe(Context.add(SqlClient.SqlClient, client)))
  ).pipe(Layer.provide(Reactivity.layer))

/**
 * `layer` with its config read from `Config` (for example `Config.String("VALET_SQLITE_FILE")` as `filename`).
 *
 * @since 0.2.0
 * @category layers
 */
export const layerConfig = (
  config: Config.Wrap<SqliteClientConfig>
): Layer.Layer<SqliteClient | SqlClient.SqlClient, Config.ConfigError | SqlError.SqlError> =>
  Layer.effectContext(
    Config.unwrap(config).pipe(
      Effect.flatMap(make),
      Effect.map((client) => Context.make(SqliteClient, client).pipe(Context.add(SqlClient.SqlClient, client)))
    )
  ).pipe(Layer.provide(Reactivity.layer))

// ---------------------------------------------------------------------------------------------------------
// The connection
// ---------------------------------------------------------------------------------------------------------

const open = (options: SqliteClientConfig): Effect.Effect<DatabaseSync, SqlError.SqlError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.flatMap(
      // Loaded here, not at the top of the module: see the module doc.
      Effect.tryPromise({
        try: () => import("node:sqlite"),
        catch: (cause) =>
          new SqlError.SqlError({
            reason: new SqlError.ConnectionError({
              cause,
              message: `cannot open ${options.filename}: node:sqlite is not available (Node >= 22.19 has it)`,
              operation: "open"
            })
          })
      }),
      (sqlite) =>
        Effect.flatMap(vectorExtension(options), (vec) => Effect.try({
          try: () => {
            const extensions = [...(vec !== undefined ? [vec] : []), ...(options.extensions ?? [])]
            const db = new sqlite.DatabaseSync(options.filename, {
              readOnly: options.readonly === true,
              ...(extensions.length > 0 ? { allowExtension: true } : {})
            })
            try {
              for (const path of extensions) {
                try {
                  db.loadExtension(path)
                } catch (error) {
                  // sqlite-vec under "auto" that does not load (another platform's binary…): the stores scan.
                  if (path === vec && options.sqliteVec === "auto") continue
                  throw new Error(`cannot load the SQLite extension ${path}: ${error instanceof Error ? error.message : String(error)}`)
                }
              }
              // Loading was for opening only: no statement can load a library later.
              if (extensions.length > 0) db.enableLoadExtension(false)
              const busyTimeout = Math.min(
                MAX_BUSY_TIMEOUT,
                Math.max(0, Math.round(Duration.toMillis(options.busyTimeout ?? Duration.seconds(5))))
              )
              db.exec(`PRAGMA busy_timeout = ${busyTimeout}`)
              if (options.disableWAL !== true && options.readonly !== true) db.exec("PRAGMA journal_mode = WAL")
              return db
            } catch (error) {
              db.close()
              throw error
            }
          },
          catch: (cause) => sqlError(cause, `cannot open ${options.filename}`, "open")
        }))
    ),
    // Closing rolls back a transaction left open; nothing can be using the connection once its scope closes.
    (db) => Effect.sync(() => db.isOpen && db.close())
  )

/**
 * The path of `sqlite-vec`'s loadable library when it is wanted and found: `undefined` when not wanted, or under
 * `"auto"` when the package is not installed (or has no binary for this platform); a `SqlError` when it is required
 * and missing. The package is imported here, not at the top: it is optional.
 */
const vectorExtension = (options: SqliteClientConfig): Effect.Effect<string | undefined, SqlError.SqlError> => {
  const wanted = options.sqliteVec ?? false
  if (wanted === false) return Effect.succeed(undefined)
  // A specifier in a variable: bundlers and type checkers do not require the optional package to be there.
  const specifier = "sqlite-vec"
  const found: Effect.Effect<string | undefined, SqlError.SqlError> = Effect.tryPromise({
    try: async () => ((await import(specifier)) as { readonly getLoadablePath: () => string }).getLoadablePath(),
    catch: (cause) =>
      new SqlError.SqlError({
        reason: new SqlError.ConnectionError({
          cause,
          message: `cannot open ${options.filename} with sqlite-vec: ${cause instanceof Error ? cause.message : String(cause)} (npm install sqlite-vec)`,
          operation: "open"
        })
      })
  })
  return wanted === "auto" ? Effect.catch(found, () => Effect.succeed(undefined)) : found
}

interface Prepared {
  readonly statement: StatementSync
  /** Whether the statement answers rows (a SELECT, or a write with RETURNING). */
  readonly returnsRows: boolean
}

const makeConnection = (
  db: DatabaseSync,
  filename: string,
  cacheSize: number,
  fatal: Deferred.Deferred<never, SqlError.SqlError>
): SqlConnection.Connection => {
  // Least recently used first: a Map iterates in insertion order, and a hit re-inserts its entry.
  const cache = new Map<string, Prepared>()
  // Set on SQLITE_CORRUPT / SQLITE_NOTADB: later statements fail with it instead of reading or writing the file.
  let damaged: SqlError.SqlError | undefined

  const prepare = (sql: string, cached: boolean): Prepared => {
    if (cached) {
      const hit = cache.get(sql)
      if (hit !== undefined) {
        cache.delete(sql)
        cache.set(sql, hit)
        return hit
      }
    }
    const statement = db.prepare(sql)
    const prepared = { statement, returnsRows: statement.columns().length > 0 }
    if (cached && cacheSize > 0) {
      if (cache.size >= cacheSize) cache.delete(cache.keys().next().value!)
      cache.set(sql, prepared)
    }
    return prepared
  }

  const run = <A>(
    sql: string,
    params: ReadonlyArray<unknown>,
    options: { readonly cached: boolean; readonly arrays: boolean; readonly raw: boolean }
  ): Effect.Effect<A, SqlError.SqlError> =>
    Effect.withFiber((fiber) => {
      if (!db.isOpen) {
        return Effect.fail(
          new SqlError.SqlError({
            reason: new SqlError.ConnectionError({
              cause: new Error("database is not open"),
              message: `${filename} is closed (its SqliteClient layer was released)`,
              operation: "execute"
            })
          })
        )
      }
      if (damaged !== undefined) return Effect.fail(damaged)
      const safeIntegers = Context.get(fiber.context, SqlClient.SafeIntegers)
      return Effect.try({
        try: () => {
          const { returnsRows, statement } = prepare(sql, options.cached)
          const values = params.map(bindable)
          statement.setReadBigInts(safeIntegers)
          statement.setReturnArrays(options.arrays)
          if (returnsRows) return statement.all(...values) as A
          const result = statement.run(...values)
          return (options.raw ? { changes: result.changes, lastInsertRowid: result.lastInsertRowid } : []) as A
        },
        catch: (cause) => sqlError(cause, `Failed to execute statement on ${filename}`, "execute")
      }).pipe(
        Effect.tapError((error) => {
          if (!isFatal(error)) return Effect.void
          if (isDamaged(error)) damaged ??= error
          return Deferred.fail(fatal, error)
        })
      )
    })

  const rows = (
    effect: Effect.Effect<ReadonlyArray<object>, SqlError.SqlError>,
    transformRows: (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined
  ) => (transformRows ? Effect.map(effect, transformRows) : effect)

  return {
    execute: (sql, params, transformRows) => rows(run(sql, params, { cached: true, arrays: false, raw: false }), transformRows),
    executeRaw: (sql, params) => run(sql, params, { cached: true, arrays: false, raw: true }),
    executeValues: (sql, params) => run(sql, params, { cached: true, arrays: true, raw: false }),
    // "Unprepared" asks a server not to keep a named statement (PostgreSQL); SQLite prepares every statement anyway,
    // so these are cached by their text too. effect/cluster's storage sends its hot queries unprepared (the read of
    // unprocessed messages, the reply's update): preparing them afresh each time was 5.8% of a durable run's CPU.
    // A text that never repeats (a literal id list) still enters the cache as its newest entry and pushes the oldest
    // out: a burst of more such texts than the cache holds evicts the hot statements, which then cost one prepare
    // each again — slower for a while, never wrong (the array and bigint modes are set on every call).
    executeValuesUnprepared: (sql, params) => run(sql, params, { cached: true, arrays: true, raw: false }),
    executeUnprepared: (sql, params, transformRows) =>
      rows(run(sql, params, { cached: true, arrays: false, raw: false }), transformRows),
    // `node:sqlite` reads synchronously, so the rows are read at once and then streamed.
    executeStream: (sql, params, transformRows) =>
      Stream.fromIterableEffect(rows(run(sql, params, { cached: true, arrays: false, raw: false }), transformRows))
  }
}

/** `node:sqlite` binds null, numbers, bigints, strings and bytes; booleans become 0 / 1 as SQLite stores them. */
const bindable = (value: unknown): SQLInputValue =>
  value === undefined ? null : typeof value === "boolean" ? (value ? 1 : 0) : (value as SQLInputValue)

/** A `node:sqlite` error as a `SqlError` whose reason is classified by SQLite's result code. */
const sqlError = (cause: unknown, message: string, operation: string): SqlError.SqlError => {
  const errcode = typeof cause === "object" && cause !== null && "errcode" in cause ? cause.errcode : undefined
  const text = cause instanceof Error ? cause.message : String(cause)
  const described = `${message}: ${text}`
  // SQLITE_ERROR (1) covers syntax errors too; the message is the only place that says which.
  if (errcode === 1 && /syntax error|incomplete input|unrecognized token/.test(text)) {
    return new SqlError.SqlError({ reason: new SqlError.SqlSyntaxError({ cause, message: described, operation }) })
  }
  const classified = typeof errcode === "number" && typeof cause === "object" && cause !== null && !("errno" in cause)
    ? Object.assign(cause, { errno: errcode })
    : cause
  return new SqlError.SqlError({ reason: SqlError.classifySqliteError(classified, { message: described, operation }) })
}

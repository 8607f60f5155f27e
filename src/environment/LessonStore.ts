/**
 * Lessons an agent learned from its failed attempts (Reflexion's one-sentence reflections), kept per task key
 * so that a later attempt — in the same run or a later one — starts with them.
 *
 * Layers: `layerMemory` (one process, tests), `layerSql` on any `effect/sql` `SqlClient` (SQLite and PostgreSQL
 * dialects — `@effect/sql-pg`'s `PgClient` for PostgreSQL; table `valet_lessons`, created when missing), and
 * `layerSqlite({ filename })` for the embedded default (valet's `SqliteClient` over `node:sqlite`). Rows read
 * back are schema-checked: a bad row is a `LessonStoreError` naming it and the field, never a lesson.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as LessonStore from "valet/LessonStore"
 *
 * // What a failed attempt taught is kept under the task's key; the next attempt reads it back.
 * const program = Effect.gen(function*() {
 *   yield* LessonStore.add("task-42", "Check the units before answering.")
 *   yield* LessonStore.add("task-42", "Run the tests before declaring success.")
 *   const lessons = yield* LessonStore.list("task-42", { limit: 5 })
 *   return lessons.map((lesson) => lesson.lesson)
 * })
 *
 * // In memory for a test; `LessonStore.layerSqlite({ filename: "data/lessons.sqlite3" })` keeps them across runs.
 * const lessons = program.pipe(Effect.provide(LessonStore.layerMemory))
 * ```
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Result, Schema } from "effect"
import type { SqlError } from "effect/sql"
import { SqlClient } from "effect/sql"
import { formatIssue } from "../core/internal/decode.js"
import { createTables, describeSqlError, IntegerColumn, openSqliteFile } from "./internal/sqliteStores.js"

/**
 * A stored lesson. `id` grows with each lesson of a store; `createdAt` is epoch milliseconds (from `Clock`).
 *
 * @since 0.1.0
 * @category models
 */
export const Lesson = Schema.Struct({
  id: Schema.Number,
  key: Schema.String,
  lesson: Schema.String,
  createdAt: Schema.Number
})
/**
 * A stored lesson.
 *
 * @since 0.1.0
 * @category models
 */
export type Lesson = typeof Lesson.Type

/**
 * A lesson store could not read or write; `operation` says what it was doing.
 *
 * @since 0.1.0
 * @category errors
 */
export class LessonStoreError extends Schema.TaggedError<LessonStoreError>()("LessonStoreError", {
  operation: Schema.String,
  message: Schema.String
}) {}

/**
 * Options of `list`.
 *
 * @since 0.1.0
 * @category options
 */
export interface ListOptions {
  /** Only the most recent `limit` lessons (still oldest first). */
  readonly limit?: number | undefined
}

/**
 * What a lesson store does.
 *
 * @since 0.1.0
 * @category services
 */
export interface Service {
  /** Stores a lesson under a key (a task, usually); a blank key or lesson is refused. */
  readonly add: (key: string, lesson: string) => Effect.Effect<Lesson, LessonStoreError>
  /** The lessons of a key, oldest first. */
  readonly list: (key: string, options?: ListOptions) => Effect.Effect<ReadonlyArray<Lesson>, LessonStoreError>
}

/**
 * The lesson store service.
 *
 * @since 0.1.0
 * @category services
 */
export class LessonStore extends Context.Service<LessonStore, Service>()("valet/LessonStore") {}

/**
 * Stores a lesson under a key with the `LessonStore` in context.
 *
 * @since 0.1.0
 * @category accessors
 */
export const add = (key: string, lesson: string): Effect.Effect<Lesson, LessonStoreError, LessonStore> =>
  Effect.flatMap(LessonStore, (store) => store.add(key, lesson))

/**
 * The lessons of a key, oldest first, from the `LessonStore` in context.
 *
 * @since 0.1.0
 * @category accessors
 */
export const list = (key: string, options?: ListOptions): Effect.Effect<ReadonlyArray<Lesson>, LessonStoreError, LessonStore> =>
  Effect.flatMap(LessonStore, (store) => store.list(key, options))

const checkInput = (key: string, lesson: string): LessonStoreError | undefined =>
  key.trim() === ""
    ? new LessonStoreError({ operation: "add", message: "the lesson key is empty" })
    : lesson.trim() === ""
    ? new LessonStoreError({ operation: "add", message: `the lesson for key ${JSON.stringify(key)} is empty` })
    : undefined

const checkLimit = (options: ListOptions | undefined): LessonStoreError | undefined =>
  options?.limit !== undefined && !(Number.isInteger(options.limit) && options.limit >= 0)
    ? new LessonStoreError({ operation: "list", message: `limit must be an integer ≥ 0, got ${options.limit}` })
    : undefined

// ---------------------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------------------

/**
 * A store in this process's memory.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Service> = Effect.sync(() => {
  const byKey = new Map<string, Array<Lesson>>()
  let nextId = 1
  return {
    add: (key, lesson) =>
      Effect.suspend(() => {
        const invalid = checkInput(key, lesson)
        if (invalid !== undefined) return Effect.fail(invalid)
        return Effect.map(Clock.currentTimeMillis, (createdAt) => {
          const stored: Lesson = { id: nextId++, key, lesson: lesson.trim(), createdAt }
          const lessons = byKey.get(key)
          if (lessons === undefined) byKey.set(key, [stored])
          else lessons.push(stored)
          return stored
        })
      }),
    list: (key, options) =>
      Effect.suspend(() => {
        const invalid = checkLimit(options)
        if (invalid !== undefined) return Effect.fail(invalid)
        const lessons = byKey.get(key) ?? []
        return Effect.succeed(options?.limit !== undefined ? lessons.slice(Math.max(0, lessons.length - options.limit)) : lessons.slice())
      })
  }
})

/**
 * A store in this process's memory: lessons last as long as the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<LessonStore> = Layer.effect(LessonStore, makeMemory)

// ---------------------------------------------------------------------------------------------------------
// SQL
// ---------------------------------------------------------------------------------------------------------

/**
 * The table the SQL store keeps lessons in.
 *
 * @since 0.1.0
 * @category constants
 */
export const tableName = "valet_lessons"

const Row = Schema.Struct({ id: IntegerColumn, task_key: Schema.String, lesson: Schema.String, created_at: IntegerColumn })
const decodeRow = Schema.decodeUnknownResult(Row)

const toLessons = (operation: string, rows: ReadonlyArray<unknown>): Effect.Effect<Array<Lesson>, LessonStoreError> => {
  const out: Array<Lesson> = []
  for (const [i, row] of rows.entries()) {
    const decoded = decodeRow(row)
    if (Result.isFailure(decoded)) {
      const id = typeof row === "object" && row !== null && "id" in row ? `id ${String(row.id)}` : `#${i + 1}`
      return Effect.fail(
        new LessonStoreError({
          operation,
          message: formatIssue(`row ${id} of ${tableName} is not a lesson`, decoded.failure.issue, row)
        })
      )
    }
    const { created_at, id, lesson, task_key } = decoded.success
    out.push({ id, key: task_key, lesson, createdAt: created_at })
  }
  return Effect.succeed(out)
}

const sqlFailure = (operation: string) => (error: SqlError.SqlError) =>
  new LessonStoreError({ operation, message: `${tableName}: ${describeSqlError(error)}` })

/**
 * A store on the `SqlClient` in context; creates its table and index when they are missing.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeSql: Effect.Effect<Service, LessonStoreError, SqlClient.SqlClient> = Effect.gen(function*() {
  // Column names are ours whatever name transforms the client was configured with.
  const sql = (yield* SqlClient.SqlClient).withoutTransforms()
  yield* createTables(
    sql,
    tableName,
    sql.onDialectOrElse({
      pg: () =>
        sql`CREATE TABLE IF NOT EXISTS ${sql(tableName)} (
          id BIGSERIAL PRIMARY KEY, task_key TEXT NOT NULL, lesson TEXT NOT NULL, created_at BIGINT NOT NULL)`,
      orElse: () =>
        sql`CREATE TABLE IF NOT EXISTS ${sql(tableName)} (
          id INTEGER PRIMARY KEY AUTOINCREMENT, task_key TEXT NOT NULL, lesson TEXT NOT NULL, created_at INTEGER NOT NULL)`
    }).pipe(Effect.andThen(sql`CREATE INDEX IF NOT EXISTS ${sql(`${tableName}_key`)} ON ${sql(tableName)} (task_key, id)`))
  ).pipe(Effect.mapError(sqlFailure("create table")))
  const columns = sql.literal("id, task_key, lesson, created_at")
  return {
    add: (key, lesson) =>
      Effect.suspend(() => {
        const invalid = checkInput(key, lesson)
        if (invalid !== undefined) return Effect.fail(invalid)
        return Clock.currentTimeMillis.pipe(
          Effect.flatMap((createdAt) =>
            sql`INSERT INTO ${sql(tableName)} ${
              sql.insert({ task_key: key, lesson: lesson.trim(), created_at: createdAt })
            } RETURNING ${columns}`.pipe(Effect.mapError(sqlFailure("add")))
          ),
          Effect.flatMap((rows) => toLessons("add", rows)),
          Effect.flatMap((lessons) =>
            lessons.length === 1
              ? Effect.succeed(lessons[0]!)
              : Effect.fail(new LessonStoreError({ operation: "add", message: `the insert returned ${lessons.length} rows` }))
          )
        )
      }),
    list: (key, options) =>
      Effect.suspend(() => {
        const invalid = checkLimit(options)
        if (invalid !== undefined) return Effect.fail(invalid)
        const query = options?.limit !== undefined
          ? sql`SELECT ${columns} FROM ${sql(tableName)} WHERE task_key = ${key} ORDER BY id DESC LIMIT ${options.limit}`
          : sql`SELECT ${columns} FROM ${sql(tableName)} WHERE task_key = ${key} ORDER BY id ASC`
        return query.pipe(
          Effect.mapError(sqlFailure("list")),
          Effect.flatMap((rows) => toLessons("list", rows)),
          Effect.map((lessons) => (options?.limit !== undefined ? lessons.reverse() : lessons))
        )
      })
  }
})

/**
 * A store on the `SqlClient` in context (SQLite, or PostgreSQL through `@effect/sql-pg`'s `PgClient`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSql: Layer.Layer<LessonStore, LessonStoreError, SqlClient.SqlClient> = Layer.effect(LessonStore, makeSql)

/**
 * Options of `layerSqlite`.
 *
 * @since 0.1.0
 * @category options
 */
export interface SqliteOptions {
  /** The database file (its directory is created when missing), or `:memory:`. */
  readonly filename: string
}

/**
 * A store in a SQLite file (through valet's `SqliteClient` over `node:sqlite`): the embedded default.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqlite = (options: SqliteOptions): Layer.Layer<LessonStore, LessonStoreError> =>
  layerSql.pipe(
    Layer.provide(openSqliteFile(options.filename, (message) => new LessonStoreError({ operation: "open", message })))
  )

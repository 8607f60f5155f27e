import { NodeServices } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, FileSystem, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { TestClock } from "effect/testing"
import * as LessonStore from "../../src/environment/LessonStore.js"
import * as SqliteClient from "../../src/environment/SqliteClient.js"
import { type Backend as AnyBackend, describeOn, openTogether, type SqlBackend as AnySqlBackend, withStore } from "../support/backends.js"
import { freshSchema } from "../support/postgres.js"

type Backend = AnyBackend<LessonStore.LessonStore, LessonStore.LessonStoreError>

/** A SQL backend, and a way to write a bad row (PostgreSQL must first be told to accept one). */
interface SqlBackend extends AnySqlBackend<LessonStore.LessonStore, LessonStore.LessonStoreError> {
  /** Inserts a row whose `created_at` is not a number. */
  readonly insertBadRow: Effect.Effect<unknown, SqlError.SqlError, SqlClient.SqlClient>
}

const memory: Backend = { name: "memory", fresh: Effect.succeed(LessonStore.layerMemory) }

const sqlite: SqlBackend = {
  name: "sqlite",
  fresh: Effect.succeed(LessonStore.layerSqlite({ filename: ":memory:" })),
  database: Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-lessons-" })
    return () => SqliteClient.layer({ filename: `${dir}/lessons.sqlite3` })
  }).pipe(Effect.provide(NodeServices.layer), Effect.orDie),
  insertBadRow: Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql`INSERT INTO valet_lessons (task_key, lesson, created_at) VALUES ('k', 'bad', 'yesterday')`
  )
}

const postgres: SqlBackend = {
  name: "postgres",
  fresh: Effect.map(freshSchema, (schema) => LessonStore.layerSql.pipe(Layer.provide(schema.client()))),
  database: Effect.map(freshSchema, (schema) => schema.client),
  insertBadRow: Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.andThen(
      sql`ALTER TABLE valet_lessons ALTER COLUMN created_at TYPE TEXT`,
      sql`INSERT INTO valet_lessons (task_key, lesson, created_at) VALUES ('k', 'bad', 'yesterday')`
    ))
}

const conformance = (backend: Backend) =>
  describeOn(backend, `LessonStore conformance [${backend.name}]`, () => {
    it.effect("add, list oldest first, limit to the most recent, refuse blanks", () =>
      withStore(
        backend,
        Effect.gen(function*() {
          yield* TestClock.setTime(1_000)
          const first = yield* LessonStore.add("task-a", "  Check the units first. ")
          expect(first).toMatchObject({ key: "task-a", lesson: "Check the units first.", createdAt: 1_000 })
          yield* TestClock.adjust(5)
          yield* LessonStore.add("task-b", "Unrelated.")
          yield* LessonStore.add("task-a", "Show the working.")
          yield* LessonStore.add("task-a", "Answer in one line.")
          const all = yield* LessonStore.list("task-a")
          expect(all.map((lesson) => lesson.lesson)).toEqual(["Check the units first.", "Show the working.", "Answer in one line."])
          expect(all.map((lesson) => lesson.createdAt)).toEqual([1_000, 1_005, 1_005])
          expect(all[0]!.id).toBeLessThan(all[1]!.id)
          // The most recent two, still oldest first.
          expect((yield* LessonStore.list("task-a", { limit: 2 })).map((lesson) => lesson.lesson)).toEqual([
            "Show the working.",
            "Answer in one line."
          ])
          expect(yield* LessonStore.list("task-a", { limit: 0 })).toEqual([])
          expect(yield* LessonStore.list("nobody")).toEqual([])
          const blank = yield* Effect.flip(LessonStore.add("task-a", "   "))
          expect(blank.message).toBe('the lesson for key "task-a" is empty')
          expect((yield* Effect.flip(LessonStore.add("", "x"))).message).toBe("the lesson key is empty")
          expect((yield* Effect.flip(LessonStore.list("task-a", { limit: -1 }))).message).toContain("limit must be an integer")
        })
      ))

    it.effect("50 concurrent adds to one key all land, with distinct ids in list order", () =>
      withStore(
        backend,
        Effect.gen(function*() {
          const texts = Array.from({ length: 50 }, (_, i) => `lesson ${i}`)
          const added = yield* Effect.forEach(texts, (text) => LessonStore.add("busy", text), { concurrency: "unbounded" })
          expect(new Set(added.map((lesson) => lesson.id)).size).toBe(50)
          const listed = yield* LessonStore.list("busy")
          expect([...listed.map((lesson) => lesson.lesson)].sort()).toEqual([...texts].sort())
          const ids = listed.map((lesson) => lesson.id)
          expect(ids).toEqual([...ids].sort((a, b) => a - b))
          expect(listed.every((lesson) => lesson.key === "busy")).toBe(true)
        })
      ))
  })

conformance(memory)
conformance(sqlite)
conformance(postgres)

const sqlConformance = (backend: SqlBackend) =>
  describeOn(backend, `LessonStore SQL [${backend.name}]`, () => {
    it.effect("lessons survive the layer: a second store on the same database reads them", () =>
      Effect.gen(function*() {
        const client = yield* backend.database
        const store = () => LessonStore.layerSql.pipe(Layer.provide(client()))
        yield* LessonStore.add("k", "Cite sources.").pipe(Effect.provide(store()))
        const again = yield* LessonStore.list("k").pipe(Effect.provide(store()))
        expect(again.map((lesson) => lesson.lesson)).toEqual(["Cite sources."])
      }))

    it.effect("three stores opened at once on an empty database all open: creating the table and index does not race", () =>
      Effect.gen(function*() {
        // On PostgreSQL, CREATE TABLE / INDEX IF NOT EXISTS in three sessions at once failed some of them with a
        // duplicate key in pg_type / pg_class, or "already exists" (runners started together on a fresh database).
        expect(yield* openTogether(backend, (client) => LessonStore.layerSql.pipe(Layer.provide(client)))).toEqual([])
      }))

    it.effect("a row that is not a lesson is a LessonStoreError naming the row, never a lesson", () =>
      Effect.gen(function*() {
        const client = yield* backend.database
        yield* Effect.gen(function*() {
          yield* LessonStore.add("k", "fine")
          yield* backend.insertBadRow
          const error = yield* Effect.flip(LessonStore.list("k"))
          expect(error).toBeInstanceOf(LessonStore.LessonStoreError)
          expect(error.operation).toBe("list")
          expect(error.message).toContain("row id 2 of valet_lessons is not a lesson")
          expect(error.message).toContain("created_at")
          expect(error.message).toContain(`"yesterday"`)
        }).pipe(Effect.provide(LessonStore.layerSql.pipe(Layer.provideMerge(client()))))
      }))
  })

sqlConformance(sqlite)
sqlConformance(postgres)

describe("LessonStore SQL [sqlite] specifics", () => {
  it.effect("SQLite file: lessons survive the layer, and the directory is created", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-lessons-" })
      const filename = `${dir}/nested/lessons.sqlite3`
      yield* LessonStore.add("k", "Cite sources.").pipe(Effect.provide(LessonStore.layerSqlite({ filename })))
      const again = yield* LessonStore.list("k").pipe(Effect.provide(LessonStore.layerSqlite({ filename })))
      expect(again.map((lesson) => lesson.lesson)).toEqual(["Cite sources."])
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("a database whose directory cannot be made fails the layer with LessonStoreError", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // A regular file where the directory should be.
      const file = yield* fs.makeTempFileScoped({ prefix: "valet-lessons-" })
      const exit = yield* Effect.exit(
        LessonStore.list("k").pipe(Effect.provide(LessonStore.layerSqlite({ filename: `${file}/db/lessons.sqlite3` })))
      )
      expect(Exit.isFailure(exit)).toBe(true)
      const error = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : undefined
      const failure = error?._tag === "Some" ? error.value : undefined
      expect(failure).toBeInstanceOf(LessonStore.LessonStoreError)
      expect(failure?.operation).toBe("open")
      expect(failure?.message).toContain("cannot create the directory")
      // A path SQLite cannot open (a directory) is a typed failure too, not a defect.
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-lessons-" })
      const cannotOpen = yield* Effect.flip(LessonStore.list("k").pipe(Effect.provide(LessonStore.layerSqlite({ filename: dir }))))
      expect(cannotOpen).toBeInstanceOf(LessonStore.LessonStoreError)
      expect(cannotOpen.message).toBe(`cannot open ${dir}: unable to open database file`)
    }).pipe(Effect.provide(NodeServices.layer)))
})

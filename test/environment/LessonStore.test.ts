import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, TestClock } from "effect"
import { LessonStore } from "../../src/index.js"

/** The same behaviour from every layer. */
const behaves = (store: Layer.Layer<LessonStore.LessonStore, LessonStore.LessonStoreError>) =>
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
  }).pipe(Effect.provide(store))

describe("LessonStore", () => {
  it.effect("memory: add, list oldest first, limit to the most recent, refuse blanks", () => behaves(LessonStore.layerMemory))

  it.effect("SQLite (in memory): the same behaviour", () => behaves(LessonStore.layerSqlite({ filename: ":memory:" })))

  it.scoped("SQLite file: lessons survive the layer, and the directory is created", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-lessons-" })
      const filename = `${dir}/nested/lessons.sqlite3`
      yield* LessonStore.add("k", "Cite sources.").pipe(Effect.provide(LessonStore.layerSqlite({ filename })))
      const again = yield* LessonStore.list("k").pipe(Effect.provide(LessonStore.layerSqlite({ filename })))
      expect(again.map((lesson) => lesson.lesson)).toEqual(["Cite sources."])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("a row that is not a lesson is a LessonStoreError naming the row, never a lesson", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* LessonStore.add("k", "fine")
      yield* sql`INSERT INTO valet_lessons (task_key, lesson, created_at) VALUES ('k', 'bad', 'yesterday')`
      const error = yield* Effect.flip(LessonStore.list("k"))
      expect(error).toBeInstanceOf(LessonStore.LessonStoreError)
      expect(error.operation).toBe("list")
      expect(error.message).toContain("row id 2 of valet_lessons is not a lesson")
      expect(error.message).toContain("created_at")
    }).pipe(
      Effect.provide(LessonStore.layerSql.pipe(Layer.provideMerge(SqliteClient.layer({ filename: ":memory:" })))),
      Effect.orDie
    ))

  it.scoped("a database whose directory cannot be made fails the layer with LessonStoreError", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // A regular file where the directory should be.
      const file = yield* fs.makeTempFileScoped({ prefix: "valet-lessons-" })
      const exit = yield* Effect.exit(
        LessonStore.list("k").pipe(Effect.provide(LessonStore.layerSqlite({ filename: `${file}/db/lessons.sqlite3` })))
      )
      expect(Exit.isFailure(exit)).toBe(true)
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      expect(error).toBeInstanceOf(LessonStore.LessonStoreError)
      expect(error?.operation).toBe("open")
      expect(error?.message).toContain("cannot create the directory")
      // A path SQLite cannot open (a directory) is a typed failure too, not a defect.
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "valet-lessons-" })
      const cannotOpen = yield* Effect.flip(LessonStore.list("k").pipe(Effect.provide(LessonStore.layerSqlite({ filename: dir }))))
      expect(cannotOpen).toBeInstanceOf(LessonStore.LessonStoreError)
      expect(cannotOpen.message).toBe(`cannot open ${dir}: SQLITE_CANTOPEN: unable to open database file`)
    }).pipe(Effect.provide(NodeContext.layer)))
})

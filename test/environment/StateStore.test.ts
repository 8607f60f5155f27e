import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Result } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import * as SqliteClient from "../../src/environment/SqliteClient.js"
import * as StateStore from "../../src/environment/StateStore.js"
import { freshSchema } from "../support/postgres.js"
import { type Backend as AnyBackend, describeOn, openTogether, type SqlBackend as AnySqlBackend, withStore } from "../support/backends.js"

const state = (parts: Partial<StateStore.State>): StateStore.State => ({ ...StateStore.empty, ...parts })

describe("StateStore.merge", () => {
  it("appends every list without dedup and takes a non-empty next focus", () => {
    const existing = state({ goals: ["fix the parser"], decisions: ["use ast-grep"], nextFocus: "tests" })
    const merged = StateStore.merge(existing, {
      goals: ["fix the parser", "add a test"],
      constraints: ["no new deps"],
      hypotheses: ["the bug is in tokenize()"],
      openIssues: ["flaky CI"],
      nextFocus: "tokenize()"
    })
    expect(merged).toEqual({
      goals: ["fix the parser", "fix the parser", "add a test"],
      constraints: ["no new deps"],
      decisions: ["use ast-grep"],
      hypotheses: ["the bug is in tokenize()"],
      history: [],
      openIssues: ["flaky CI"],
      nextFocus: "tokenize()"
    })
    expect(StateStore.merge(merged, { nextFocus: "" }).nextFocus).toBe("tokenize()")
    expect(StateStore.merge(merged, { nextFocus: "   " }).nextFocus).toBe("tokenize()")
    expect(StateStore.merge(merged, {}).nextFocus).toBe("tokenize()")
  })

  it("keeps the last 3 history items and cuts strings at 256 characters, both configurable", () => {
    const long = "x".repeat(300)
    const merged = StateStore.merge(state({ history: ["h1", "h2"] }), { history: ["h3", "h4"], goals: [long], nextFocus: long })
    expect(merged.history).toEqual(["h2", "h3", "h4"])
    expect(merged.goals[0]).toHaveLength(256)
    expect(merged.nextFocus).toHaveLength(256)
    const custom = StateStore.merge(state({ history: ["h1", "h2"] }), { history: ["h3"], goals: ["abcdef"] }, {
      maxItemChars: 4,
      historyItems: 1
    })
    expect(custom.history).toEqual(["h3"])
    expect(custom.goals).toEqual(["abcd"])
  })
})

describe("StateStore.render", () => {
  it("prints the non-empty sections in order, separated by blank lines", () => {
    const rendered = StateStore.render({
      goals: ["g1", "g2"],
      constraints: [],
      decisions: ["d1"],
      hypotheses: [],
      history: ["step 1: ran tests"],
      openIssues: ["i1"],
      nextFocus: "look at parse.py"
    })
    expect(rendered).toBe(
      "Goals:\n- g1\n- g2\n\nDecisions:\n- d1\n\nHistory:\n- step 1: ran tests\n\nOpen issues:\n- i1\n\nNext focus:\nlook at parse.py"
    )
    expect(StateStore.render(state({ constraints: ["c"], hypotheses: ["h"] }))).toBe("Constraints:\n- c\n\nHypotheses:\n- h")
    expect(StateStore.render(state({ nextFocus: "only this" }))).toBe("Next focus:\nonly this")
    expect(StateStore.render(StateStore.empty)).toBe("")
  })
})

describe("StateStore.decodeUpdate", () => {
  it("accepts snake or camel case, single strings and scalar items; ignores unknown keys", () => {
    expect(StateStore.decodeUpdate({
      goals: "one goal",
      open_issues: ["a", 2, true, { k: 1 }, null],
      next_focus: "x",
      mood: "happy"
    })).toEqual(Result.succeed({ goals: ["one goal"], openIssues: ["a", "2", "true", "{\"k\":1}"], nextFocus: "x" }))
    expect(StateStore.decodeUpdate({ openIssues: ["b"], nextFocus: 3 })).toEqual(Result.succeed({ openIssues: ["b"], nextFocus: "3" }))
  })

  it("refuses what is not an object or a list", () => {
    expect(StateStore.decodeUpdate([1, 2])).toEqual(Result.fail("state_update must be a JSON object, got an array"))
    expect(StateStore.decodeUpdate("goals")).toEqual(Result.fail("state_update must be a JSON object, got string"))
    expect(StateStore.decodeUpdate({ goals: { a: 1 } })).toEqual(Result.fail("state_update.goals must be a list of strings, got object"))
    expect(StateStore.decodeUpdate({ next_focus: ["a"] })).toEqual(Result.fail("state_update.next_focus must be a string, got object"))
  })
})

// ---------------------------------------------------------------------------------------------------------
// One conformance suite, every backend
// ---------------------------------------------------------------------------------------------------------

type Backend = AnyBackend<StateStore.StateStore, StateStore.StateStoreError>
type SqlBackend = AnySqlBackend<StateStore.StateStore, StateStore.StateStoreError>

const dir = mkdtempSync(join(tmpdir(), "valet-state-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
const freshFile = () => join(dir, `s${++files}`, "state.sqlite3")

/** A fresh SQLite file (its directory made here: a raw client may open it before any store does). */
const sqliteDatabase = Effect.sync(() => {
  const filename = freshFile()
  mkdirSync(dirname(filename), { recursive: true })
  return () => SqliteClient.layer({ filename })
})

const sqlite: SqlBackend = {
  name: "sqlite",
  fresh: Effect.sync(() => StateStore.layerSqlite({ filename: freshFile() })),
  database: sqliteDatabase
}

const postgres: SqlBackend = {
  name: "postgres",
  fresh: Effect.map(freshSchema, (schema) => StateStore.layerSql().pipe(Layer.provide(schema.client()))),
  database: Effect.map(freshSchema, (schema) => schema.client)
}

const memory: Backend = { name: "memory", fresh: Effect.succeed(StateStore.layerMemory()) }

const conformance = (backend: Backend) =>
  describeOn(backend, `StateStore conformance [${backend.name}]`, () => {
    it.effect("loads the empty state for an unknown task, and what was saved", () =>
      withStore(
        backend,
        Effect.gen(function*() {
          expect(yield* StateStore.load("nobody")).toEqual(StateStore.empty)
          const saved = state({ goals: ["g"], nextFocus: "f" })
          yield* StateStore.save("t1", saved)
          expect(yield* StateStore.load("t1")).toEqual(saved)
          yield* StateStore.save("t1", state({ decisions: ["d"] }))
          expect(yield* StateStore.load("t1")).toEqual(state({ decisions: ["d"] }))
          expect(yield* Effect.flip(StateStore.load(" "))).toMatchObject({ _tag: "StateStoreError", operation: "load" })
        })
      ))

    it.effect("100 concurrent merges into one task lose nothing", () =>
      withStore(
        backend,
        Effect.gen(function*() {
          const goals = Array.from({ length: 100 }, (_, i) => `goal ${i}`)
          yield* Effect.forEach(goals, (goal) => StateStore.update("busy", { goals: [goal], history: [goal] }), {
            concurrency: "unbounded"
          })
          const saved = yield* StateStore.load("busy")
          expect([...saved.goals].sort()).toEqual([...goals].sort())
          expect(saved.history).toHaveLength(3)
        })
      ))

    it.effect("update applies the store's caps", () =>
      withStore(
        backend,
        Effect.gen(function*() {
          const after = yield* StateStore.update("capped", { history: ["a", "b", "c", "d"], goals: ["y".repeat(300)] })
          expect(after.history).toEqual(["b", "c", "d"])
          expect(after.goals[0]).toHaveLength(256)
        })
      ))

    it.effect("save upserts: the second save replaces the first, and update merges onto what was saved", () =>
      withStore(
        backend,
        Effect.gen(function*() {
          yield* StateStore.save("up", state({ goals: ["first"], nextFocus: "a" }))
          yield* StateStore.save("up", state({ goals: ["second"], nextFocus: "b" }))
          expect(yield* StateStore.load("up")).toEqual(state({ goals: ["second"], nextFocus: "b" }))
          const merged = yield* StateStore.update("up", { goals: ["third"], openIssues: ["i"] })
          expect(merged).toEqual(state({ goals: ["second", "third"], openIssues: ["i"], nextFocus: "b" }))
          expect(yield* StateStore.load("up")).toEqual(merged)
        })
      ))

    it.effect("modify answers the state it saved; concurrent writers of different tasks do not mix", () =>
      withStore(
        backend,
        Effect.gen(function*() {
          const tasks = ["a", "b", "c"]
          yield* Effect.forEach(
            Array.from({ length: 30 }, (_, i) => i),
            (i) => StateStore.modify(tasks[i % 3]!, (s) => ({ ...s, decisions: [...s.decisions, `${tasks[i % 3]}${i}`] })),
            { concurrency: "unbounded" }
          )
          for (const task of tasks) {
            const saved = yield* StateStore.load(task)
            expect(saved.decisions).toHaveLength(10)
            expect(saved.decisions.every((decision) => decision.startsWith(task))).toBe(true)
          }
          const answered = yield* StateStore.modify("a", (s) => ({ ...s, nextFocus: "done" }))
          expect(yield* StateStore.load("a")).toEqual(answered)
          expect(yield* StateStore.load("nobody-else")).toEqual(StateStore.empty)
        })
      ))
  })

conformance(memory)
conformance(sqlite)
conformance(postgres)

// ---------------------------------------------------------------------------------------------------------
// What the SQL layers add: the rows themselves, several clients on one database, bad rows
// ---------------------------------------------------------------------------------------------------------

const storeOn = (client: Layer.Layer<SqlClient.SqlClient, SqlError.SqlError>) => StateStore.layerSql().pipe(Layer.provide(client))

const sqlConformance = (backend: SqlBackend) =>
  describeOn(backend, `StateStore SQL [${backend.name}]`, () => {
    it.effect("stores snake-case JSON, upserted by task id", () =>
      Effect.gen(function*() {
        const client = yield* backend.database
        yield* StateStore.update("t", { openIssues: ["i"], nextFocus: "n" }).pipe(Effect.provide(storeOn(client())))
        yield* StateStore.update("t", { goals: ["g"] }).pipe(Effect.provide(storeOn(client())))
        const rows = yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT task_id, state, version FROM valet_state`).pipe(
          Effect.provide(client())
        )
        expect(rows.map((row) => ({ ...row, version: Number(row["version"]) }))).toEqual([{
          task_id: "t",
          state: JSON.stringify({ goals: ["g"], constraints: [], decisions: [], hypotheses: [], history: [], open_issues: ["i"], next_focus: "n" }),
          version: 2
        }])
      }))

    it.effect("three stores opened at once on an empty database all open: creating the table does not race", () =>
      Effect.gen(function*() {
        // On PostgreSQL, CREATE TABLE IF NOT EXISTS in three sessions at once failed some of them with a duplicate
        // key in pg_type / pg_class, or "already exists" (runners started together on a fresh database).
        expect(yield* openTogether(backend, storeOn)).toEqual([])
      }))

    it.effect("two clients (two processes' worth) merging into one task lose nothing", () =>
      Effect.gen(function*() {
        const client = yield* backend.database
        const [a, b] = yield* Effect.all([Layer.build(storeOn(client())), Layer.build(storeOn(client()))])
        const storeA = a.mapUnsafe.get(StateStore.StateStore.key) as StateStore.Service
        const storeB = b.mapUnsafe.get(StateStore.StateStore.key) as StateStore.Service
        const ids = Array.from({ length: 60 }, (_, i) => i)
        yield* Effect.forEach(ids, (i) => (i % 2 === 0 ? storeA : storeB).update("shared", { decisions: [`d${i}`] }), {
          concurrency: "unbounded"
        })
        const saved = yield* storeA.load("shared")
        expect(saved.decisions).toHaveLength(60)
        expect(new Set(saved.decisions).size).toBe(60)
      }))

    it.effect("a row that is not a state is a StateStoreError naming the task and the field", () =>
      Effect.gen(function*() {
        const client = yield* backend.database
        yield* StateStore.save("t", StateStore.empty).pipe(Effect.provide(storeOn(client())))
        yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE valet_state SET state = '{"goals": 3}'`).pipe(
          Effect.provide(client())
        )
        const error = yield* Effect.flip(StateStore.load("t").pipe(Effect.provide(storeOn(client()))))
        expect(error).toMatchObject({ _tag: "StateStoreError", operation: "load", taskId: "t" })
        expect(error.message).toBe(`the saved state of task "t" in valet_state is not a state: goals must be an array, got 3`)
        yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE valet_state SET state = '{"goals": ['`).pipe(
          Effect.provide(client())
        )
        const notJson = yield* Effect.flip(StateStore.update("t", { goals: ["g"] }).pipe(Effect.provide(storeOn(client()))))
        expect(notJson).toMatchObject({ _tag: "StateStoreError", operation: "modify", taskId: "t" })
        expect(notJson.message).toContain(`the saved state of task "t" in valet_state is not a state: the state column is not JSON`)
      }))
  })

sqlConformance(sqlite)
sqlConformance(postgres)

describe("StateStore SQL [sqlite] specifics", () => {
  it.effect("an unusable database path is a StateStoreError", () =>
    Effect.gen(function*() {
      // A directory that cannot be created: its parent is a file.
      writeFileSync(join(dir, "a-file"), "")
      const filename = join(dir, "a-file", "sub", "state.sqlite3")
      const error = yield* Effect.flip(StateStore.load("t").pipe(Effect.provide(StateStore.layerSqlite({ filename }))))
      expect(error).toMatchObject({ _tag: "StateStoreError", operation: "open" })
      expect(error.message).toContain(`cannot create the directory of ${filename}`)
      // A path SQLite cannot open (a directory) is a typed failure too, not a defect.
      const cannotOpen = yield* Effect.flip(StateStore.load("t").pipe(Effect.provide(StateStore.layerSqlite({ filename: dir }))))
      expect(cannotOpen).toMatchObject({ _tag: "StateStoreError", operation: "open", message: `cannot open ${dir}: unable to open database file` })
    }))
})

import { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { StateStore } from "../../src/index.js"

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
    })).toEqual(Either.right({ goals: ["one goal"], openIssues: ["a", "2", "true", "{\"k\":1}"], nextFocus: "x" }))
    expect(StateStore.decodeUpdate({ openIssues: ["b"], nextFocus: 3 })).toEqual(Either.right({ openIssues: ["b"], nextFocus: "3" }))
  })

  it("refuses what is not an object or a list", () => {
    expect(StateStore.decodeUpdate([1, 2])).toEqual(Either.left("state_update must be a JSON object, got an array"))
    expect(StateStore.decodeUpdate("goals")).toEqual(Either.left("state_update must be a JSON object, got string"))
    expect(StateStore.decodeUpdate({ goals: { a: 1 } })).toEqual(Either.left("state_update.goals must be a list of strings, got object"))
    expect(StateStore.decodeUpdate({ next_focus: ["a"] })).toEqual(Either.left("state_update.next_focus must be a string, got object"))
  })
})

/** The behaviour every layer shares. */
const contract = (name: string, makeLayer: () => Layer.Layer<StateStore.StateStore, StateStore.StateStoreError>) =>
  describe(`StateStore (${name})`, () => {
    it.effect("loads the empty state for an unknown task, and what was saved", () =>
      Effect.gen(function*() {
        expect(yield* StateStore.load("nobody")).toEqual(StateStore.empty)
        const saved = state({ goals: ["g"], nextFocus: "f" })
        yield* StateStore.save("t1", saved)
        expect(yield* StateStore.load("t1")).toEqual(saved)
        yield* StateStore.save("t1", state({ decisions: ["d"] }))
        expect(yield* StateStore.load("t1")).toEqual(state({ decisions: ["d"] }))
        expect(yield* Effect.flip(StateStore.load(" "))).toMatchObject({ _tag: "StateStoreError", operation: "load" })
      }).pipe(Effect.provide(makeLayer())))

    it.effect("100 concurrent merges into one task lose nothing", () =>
      Effect.gen(function*() {
        const goals = Array.from({ length: 100 }, (_, i) => `goal ${i}`)
        yield* Effect.forEach(goals, (goal) => StateStore.update("busy", { goals: [goal], history: [goal] }), {
          concurrency: "unbounded"
        })
        const saved = yield* StateStore.load("busy")
        expect([...saved.goals].sort()).toEqual([...goals].sort())
        expect(saved.history).toHaveLength(3)
      }).pipe(Effect.provide(makeLayer())))

    it.effect("update applies the store's caps", () =>
      Effect.gen(function*() {
        const after = yield* StateStore.update("capped", { history: ["a", "b", "c", "d"], goals: ["y".repeat(300)] })
        expect(after.history).toEqual(["b", "c", "d"])
        expect(after.goals[0]).toHaveLength(256)
      }).pipe(Effect.provide(makeLayer())))
  })

contract("memory", () => StateStore.layerMemory())

const dir = mkdtempSync(join(tmpdir(), "valet-state-"))
let files = 0
contract("sqlite", () => StateStore.layerSqlite({ filename: join(dir, `s${++files}`, "state.sqlite3") }))

describe("StateStore (sqlite specifics)", () => {
  it.effect("stores snake-case JSON, upserted by task id", () =>
    Effect.gen(function*() {
      const filename = join(dir, "raw", "state.sqlite3")
      yield* StateStore.update("t", { openIssues: ["i"], nextFocus: "n" }).pipe(Effect.provide(StateStore.layerSqlite({ filename })))
      yield* StateStore.update("t", { goals: ["g"] }).pipe(Effect.provide(StateStore.layerSqlite({ filename })))
      const rows = yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT task_id, state, version FROM valet_state`).pipe(
        Effect.provide(SqliteClient.layer({ filename }))
      )
      expect(rows).toEqual([{
        task_id: "t",
        state: JSON.stringify({ goals: ["g"], constraints: [], decisions: [], hypotheses: [], history: [], open_issues: ["i"], next_focus: "n" }),
        version: 2
      }])
    }))

  it.effect("two connections (two processes' worth) merging into one task lose nothing", () =>
    Effect.gen(function*() {
      const filename = join(dir, "two", "state.sqlite3")
      const [a, b] = yield* Effect.all([
        Layer.build(StateStore.layerSqlite({ filename })),
        Layer.build(StateStore.layerSqlite({ filename }))
      ])
      const storeA = a.unsafeMap.get(StateStore.StateStore.key) as StateStore.Service
      const storeB = b.unsafeMap.get(StateStore.StateStore.key) as StateStore.Service
      const ids = Array.from({ length: 60 }, (_, i) => i)
      yield* Effect.forEach(ids, (i) => (i % 2 === 0 ? storeA : storeB).update("shared", { decisions: [`d${i}`] }), {
        concurrency: "unbounded"
      })
      const saved = yield* storeA.load("shared")
      expect(saved.decisions).toHaveLength(60)
      expect(new Set(saved.decisions).size).toBe(60)
    }).pipe(Effect.scoped))

  it.effect("a row that is not a state is a StateStoreError naming the task", () =>
    Effect.gen(function*() {
      const filename = join(dir, "bad", "state.sqlite3")
      yield* StateStore.save("t", StateStore.empty).pipe(Effect.provide(StateStore.layerSqlite({ filename })))
      yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE valet_state SET state = '{"goals": 3}'`).pipe(
        Effect.provide(SqliteClient.layer({ filename }))
      )
      const error = yield* Effect.flip(StateStore.load("t").pipe(Effect.provide(StateStore.layerSqlite({ filename }))))
      expect(error).toMatchObject({ _tag: "StateStoreError", operation: "load", taskId: "t" })
      expect(error.message).toContain(`saved state of task "t" in valet_state is not a state`)
    }))

  it.effect("an unusable database path is a StateStoreError", () =>
    Effect.gen(function*() {
      // A directory that cannot be created: its parent is a file.
      writeFileSync(join(dir, "a-file"), "")
      const filename = join(dir, "a-file", "sub", "state.sqlite3")
      const error = yield* Effect.flip(StateStore.load("t").pipe(Effect.provide(StateStore.layerSqlite({ filename }))))
      expect(error).toMatchObject({ _tag: "StateStoreError", operation: "open" })
    }))
})

afterAll(() => rmSync(dir, { recursive: true, force: true }))

import { describe, expect, it } from "@effect/vitest"
import { Config, ConfigProvider, Deferred, Effect, Exit, Fiber, Layer, Scope, Stream } from "effect"
import { SqlClient, SqlError } from "effect/sql"
import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import * as SqliteClient from "../../src/environment/SqliteClient.js"
import { damageMiddlePages } from "../support/sqliteFiles.js"

const dir = mkdtempSync(join(tmpdir(), "valet-sqlite-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
const freshFile = () => join(dir, `db${++files}.sqlite3`)

const memory = SqliteClient.layer({ filename: ":memory:" })
const damagedFile = join(dir, "damaged.sqlite3")

const setup = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, flag INTEGER)`
  return sql
})

const names = Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ name: string }>`SELECT name FROM items ORDER BY id`).pipe(
  Effect.map((rows) => rows.map((row) => row.name))
)

describe("SqliteClient: statements", () => {
  it.effect("runs parameterized statements, inserts records, answers rows, RETURNING and values", () =>
    Effect.gen(function*() {
      const sql = yield* setup
      yield* sql`INSERT INTO items ${sql.insert({ name: "a", flag: true })}`
      const returned = yield* sql`INSERT INTO items ${sql.insert([{ name: "b", flag: false }, { name: "c", flag: null }])} RETURNING id, name, flag`
      expect(returned).toEqual([{ id: 2, name: "b", flag: 0 }, { id: 3, name: "c", flag: null }])
      expect(yield* sql`SELECT name, flag FROM items WHERE id = ${1}`).toEqual([{ name: "a", flag: 1 }])
      expect(yield* sql`SELECT name FROM items WHERE ${sql.in("name", ["a", "c"])} ORDER BY name`).toEqual([{ name: "a" }, { name: "c" }])
      expect(yield* sql`SELECT id, name FROM items ORDER BY id`.values).toEqual([[1, "a"], [2, "b"], [3, "c"]])
      // The same statement again, from the cache, with other parameters.
      expect(yield* sql`SELECT name, flag FROM items WHERE id = ${2}`).toEqual([{ name: "b", flag: 0 }])
      expect(yield* sql`UPDATE items SET flag = ${7} WHERE name = ${"c"}`.raw).toEqual({ changes: 1, lastInsertRowid: 3 })
      expect(yield* sql.unsafe("SELECT count(*) AS n FROM items WHERE flag = ?", [7]).unprepared).toEqual([{ n: 1 }])
      expect(yield* Stream.runCollect(sql`SELECT name FROM items ORDER BY id`.stream)).toEqual([{ name: "a" }, { name: "b" }, { name: "c" }])
    }).pipe(Effect.provide(memory)))

  it.effect("keeps working when the statement cache is smaller than the statements used", () =>
    Effect.gen(function*() {
      const sql = yield* setup
      for (let round = 0; round < 3; round++) {
        for (let i = 0; i < 5; i++) {
          yield* sql.unsafe(`INSERT INTO items (name, flag) VALUES (?, ${i})`, [`r${round}-${i}`])
        }
      }
      expect(yield* sql`SELECT count(*) AS n FROM items`).toEqual([{ n: 15 }])
    }).pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:", prepareCacheSize: 2 }))))

  it.effect("a statement run unprepared (as effect/cluster's storage runs its hot queries) is prepared once, then taken from the cache", () =>
    Effect.gen(function*() {
      const sql = yield* setup
      // Counted where node:sqlite compiles SQL: each prepare parses and plans the statement again.
      const { DatabaseSync } = yield* Effect.promise(() => import("node:sqlite"))
      const original = DatabaseSync.prototype.prepare
      const prepared: Array<string> = []
      DatabaseSync.prototype.prepare = function(this: InstanceType<typeof DatabaseSync>, text: string) {
        prepared.push(text)
        return original.call(this, text)
      } as typeof original
      yield* Effect.ensuring(
        Effect.forEach(["a", "b", "c"], (name) => sql`INSERT INTO items (name) VALUES (${name})`.unprepared, { discard: true }),
        Effect.sync(() => void (DatabaseSync.prototype.prepare = original))
      )
      expect(prepared.filter((text) => text.startsWith("INSERT INTO items"))).toHaveLength(1)
      expect(yield* names).toEqual(["a", "b", "c"])
    }).pipe(Effect.provide(memory)))

  it.effect("answers BIGINT columns as bigints under SafeIntegers", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const big = 2n ** 60n
      expect(yield* sql`SELECT ${big} AS n`.pipe(Effect.provideService(SqlClient.SafeIntegers, true))).toEqual([{ n: big }])
      expect(yield* sql`SELECT ${3} AS n`).toEqual([{ n: 3 }])
    }).pipe(Effect.provide(memory)))

  it.effect("transforms names both ways when asked", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE people (first_name TEXT)`
      yield* sql`INSERT INTO people ${sql.insert({ firstName: "Ada" })}`
      expect(yield* sql`SELECT first_name FROM people`).toEqual([{ firstName: "Ada" }])
    }).pipe(Effect.provide(SqliteClient.layer({
      filename: ":memory:",
      transformQueryNames: (name) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`),
      transformResultNames: (name) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())
    }))))
})

describe("SqliteClient: errors", () => {
  it.effect("a bad SQL statement is a typed SqlError (SqlSyntaxError), and the client goes on", () =>
    Effect.gen(function*() {
      const sql = yield* setup
      const syntax = yield* Effect.flip(sql`SELEC name FROM items`)
      expect(SqlError.isSqlError(syntax)).toBe(true)
      expect(syntax.reason._tag).toBe("SqlSyntaxError")
      expect(syntax.message).toContain(`near "SELEC": syntax error`)
      const missing = yield* Effect.flip(sql`SELECT * FROM nowhere`)
      expect(missing.reason._tag).toBe("UnknownError")
      expect(missing.message).toContain("no such table: nowhere")
      yield* sql`INSERT INTO items (name) VALUES ('x')`
      const duplicate = yield* Effect.flip(sql`INSERT INTO items (name) VALUES ('x')`)
      expect(duplicate.reason._tag).toBe("UniqueViolation")
      const unbindable = yield* Effect.flip(sql`SELECT ${{ an: "object" }} AS v`)
      expect(SqlError.isSqlError(unbindable)).toBe(true)
      expect(yield* names).toEqual(["x"])
    }).pipe(Effect.provide(memory)))

  it.effect("a statement that meets a failed file (full, damaged) fails `fatal`; a syntax error or a constraint does not", () =>
    Effect.gen(function*() {
      const sql = yield* SqliteClient.SqliteClient
      const pending = Effect.raceFirst(Effect.as(sql.fatal, "failed"), Effect.succeed("pending"))
      yield* sql`CREATE TABLE t (body TEXT UNIQUE)`
      const syntax = yield* Effect.flip(sql`SELEC 1`)
      yield* sql`INSERT INTO t (body) VALUES ('x')`
      const duplicate = yield* Effect.flip(sql`INSERT INTO t (body) VALUES ('x')`)
      expect([SqliteClient.isFatal(syntax), SqliteClient.isFatal(duplicate)]).toEqual([false, false])
      expect(yield* pending).toBe("pending")
      // SQLITE_FULL: the file may not grow past its pages now.
      const [{ page_count }] = yield* sql<{ page_count: number }>`PRAGMA page_count`
      yield* sql.unsafe(`PRAGMA max_page_count = ${page_count}`)
      const full = yield* Effect.flip(sql`INSERT INTO t (body) VALUES (${"y".repeat(100_000)})`)
      expect(full.message).toContain("database or disk is full")
      expect([SqliteClient.isFatal(full), SqliteClient.isDamaged(full)]).toEqual([true, false])
      expect(yield* Effect.flip(sql.fatal)).toBe(full)
    }).pipe(Effect.provide(SqliteClient.layer({ filename: freshFile() }))))

  it.effect("pages damaged under an open client: SQLITE_CORRUPT is fatal, and every later statement fails at once with it", () =>
    Effect.gen(function*() {
      const filename = damagedFile
      const sql = yield* SqliteClient.SqliteClient
      yield* sql`CREATE TABLE t (body TEXT)`
      yield* sql.withTransaction(Effect.forEach(Array.from({ length: 500 }, (_, i) => i), (i) =>
        sql`INSERT INTO t (body) VALUES (${`${i}`.padEnd(500, "x")})`, { discard: true }))
      // Everything in the main file, and (almost) nothing cached, so the next read goes to the damaged pages.
      yield* sql.unsafe("PRAGMA wal_checkpoint(TRUNCATE)")
      yield* sql.unsafe("PRAGMA cache_size = 1")
      damageMiddlePages(filename, 30)
      const damaged = yield* Effect.flip(sql`SELECT count(*) AS n, sum(length(body)) AS bytes FROM t`)
      expect(damaged.message).toBe(`Failed to execute statement on ${filename}: database disk image is malformed`)
      expect([SqliteClient.isFatal(damaged), SqliteClient.isDamaged(damaged)]).toEqual([true, true])
      expect(yield* Effect.flip(sql.fatal)).toBe(damaged)
      // Nothing more is read from or written to the file.
      expect(yield* Effect.flip(sql`SELECT 1 AS one`)).toBe(damaged)
    }).pipe(Effect.provide(SqliteClient.layer({ filename: damagedFile }))))

  it.effect("a file that cannot be opened fails the layer with a ConnectionError", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Effect.provide(SqlClient.SqlClient, SqliteClient.layer({ filename: dir })))
      expect(error.reason._tag).toBe("ConnectionError")
      expect(error.message).toBe(`cannot open ${dir}: unable to open database file`)
    }))
})

describe("SqliteClient: transactions", () => {
  it.effect("commits on success and rolls back on failure", () =>
    Effect.gen(function*() {
      const sql = yield* setup
      yield* sql.withTransaction(Effect.andThen(sql`INSERT INTO items (name) VALUES ('kept')`, sql`INSERT INTO items (name) VALUES ('kept too')`))
      const failed = yield* Effect.exit(
        sql.withTransaction(Effect.andThen(sql`INSERT INTO items (name) VALUES ('lost')`, Effect.fail("boom")))
      )
      expect(failed).toEqual(Exit.fail("boom"))
      // A statement that fails inside rolls the whole transaction back too.
      const violated = yield* Effect.exit(
        sql.withTransaction(Effect.andThen(sql`INSERT INTO items (name) VALUES ('lost 2')`, sql`INSERT INTO items (name) VALUES ('kept')`))
      )
      expect(Exit.isFailure(violated)).toBe(true)
      expect(yield* names).toEqual(["kept", "kept too"])
    }).pipe(Effect.provide(memory)))

  it.effect("nested transactions are savepoints: an inner failure rolls back only the inner part", () =>
    Effect.gen(function*() {
      const sql = yield* setup
      yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO items (name) VALUES ('outer')`
        const inner = yield* Effect.exit(sql.withTransaction(Effect.andThen(sql`INSERT INTO items (name) VALUES ('inner')`, Effect.fail("no"))))
        expect(Exit.isFailure(inner)).toBe(true)
        yield* sql.withTransaction(sql`INSERT INTO items (name) VALUES ('inner kept')`)
        // Two levels down, then a failure of the outer transaction is tested below.
        yield* sql.withTransaction(sql.withTransaction(sql`INSERT INTO items (name) VALUES ('deep')`))
      }))
      expect(yield* names).toEqual(["outer", "inner kept", "deep"])
      const outer = yield* Effect.exit(sql.withTransaction(Effect.gen(function*() {
        yield* sql.withTransaction(sql`INSERT INTO items (name) VALUES ('committed savepoint')`)
        return yield* Effect.fail("outer fails")
      })))
      expect(Exit.isFailure(outer)).toBe(true)
      expect(yield* names).toEqual(["outer", "inner kept", "deep"])
    }).pipe(Effect.provide(memory)))

  it.effect("an interrupted transaction is rolled back and the connection is usable again", () =>
    Effect.gen(function*() {
      const sql = yield* setup
      const inside = yield* Deferred.make<void>()
      const fiber = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO items (name) VALUES ('interrupted')`
        yield* Deferred.succeed(inside, undefined)
        return yield* Effect.never
      })).pipe(Effect.forkChild)
      yield* Deferred.await(inside)
      yield* Fiber.interrupt(fiber)
      yield* sql`INSERT INTO items (name) VALUES ('after')`
      expect(yield* names).toEqual(["after"])
    }).pipe(Effect.provide(memory)))
})

describe("SqliteClient: one connection, taken in turns", () => {
  it.effect("a statement from another fiber waits for an open transaction instead of joining it", () =>
    Effect.gen(function*() {
      const sql = yield* setup
      const inside = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const writer = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO items (name) VALUES ('one')`
        yield* Deferred.succeed(inside, undefined)
        yield* Deferred.await(release)
        yield* sql`INSERT INTO items (name) VALUES ('two')`
        return yield* Effect.fail("roll it all back")
      })).pipe(Effect.exit, Effect.forkChild)
      yield* Deferred.await(inside)
      // Outside the transaction: it must neither see 'one' nor have its own write rolled back with it.
      const reader = yield* Effect.forkChild(Effect.andThen(sql`INSERT INTO items (name) VALUES ('outside')`, names))
      yield* Effect.yieldNow
      expect(reader.pollUnsafe()).toBeUndefined()
      yield* Deferred.succeed(release, undefined)
      expect(Exit.isFailure(yield* Fiber.join(writer))).toBe(true)
      expect(yield* Fiber.join(reader)).toEqual(["outside"])
    }).pipe(Effect.provide(memory)))

  it.effect("50 concurrent read-increment-write transactions lose no update", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE counter (n INTEGER NOT NULL)`
      yield* sql`INSERT INTO counter (n) VALUES (0)`
      yield* Effect.forEach(
        Array.from({ length: 50 }, (_, i) => i),
        () =>
          sql.withTransaction(Effect.gen(function*() {
            const [row] = yield* sql<{ n: number }>`SELECT n FROM counter`
            yield* Effect.yieldNow
            yield* sql`UPDATE counter SET n = ${row!.n + 1}`
          })),
        { concurrency: "unbounded", discard: true }
      )
      expect(yield* sql`SELECT n FROM counter`).toEqual([{ n: 50 }])
    }).pipe(Effect.provide(SqliteClient.layer({ filename: freshFile() }))))
})

describe("SqliteClient: lifetime", () => {
  it.effect("the connection is closed when the layer's scope closes; a leaked client then fails typed", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(SqliteClient.layer({ filename }), scope)
      const sql = context.mapUnsafe.get(SqlClient.SqlClient.key) as SqlClient.SqlClient
      yield* sql`CREATE TABLE t (x INTEGER)`
      yield* sql`INSERT INTO t (x) VALUES (1)`
      // WAL mode: SQLite keeps the -wal file while a connection is open and removes it on the last close.
      expect(existsSync(`${filename}-wal`)).toBe(true)
      yield* Scope.close(scope, Exit.void)
      expect(existsSync(`${filename}-wal`)).toBe(false)
      const error = yield* Effect.flip(sql`SELECT x FROM t`)
      expect(error.reason._tag).toBe("ConnectionError")
      expect(error.message).toContain("is closed")
      // What was committed is on disk.
      const again = yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT x FROM t`).pipe(
        Effect.provide(SqliteClient.layer({ filename }))
      )
      expect(again).toEqual([{ x: 1 }])
    }))

  it.effect("layerConfig reads its config", () =>
    Effect.gen(function*() {
      const filename = freshFile()
      const rows = yield* Effect.flatMap(SqliteClient.SqliteClient, (sql) =>
        Effect.andThen(sql`CREATE TABLE t (x TEXT)`, sql`SELECT ${sql.config.filename} AS f`)).pipe(
          Effect.provide(
            SqliteClient.layerConfig({ filename: Config.String("VALET_SQLITE_FILE") }).pipe(
              Layer.provide(ConfigProvider.layer(ConfigProvider.fromUnknown({ VALET_SQLITE_FILE: filename })))
            )
          )
        )
      expect(rows).toEqual([{ f: filename }])
      expect(existsSync(filename)).toBe(true)
    }))

  it("importing the module does not load node:sqlite (only making a client does)", async () => {
    const script = [
      `const m = await import(${JSON.stringify(new URL("../../src/environment/SqliteClient.ts", import.meta.url).href)});`,
      `const { Effect, Layer } = await import("effect");`,
      "const loaded = () => process.moduleLoadList.some((name) => /sqlite/i.test(name));",
      "const before = loaded();",
      `await Effect.runPromise(Layer.build(m.layer({ filename: ":memory:" })).pipe(Effect.scoped));`,
      "process.stdout.write(JSON.stringify({ before, after: loaded() }));"
    ].join("\n")
    const output = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8" }, (error, stdout, stderr) =>
        error ? reject(new Error(stderr || error.message)) : resolve(stdout))
    )
    expect(JSON.parse(output)).toEqual({ before: false, after: true })
  })
})

describe("SqliteClient: extensions", () => {
  const version = Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ v: string }>`SELECT vec_version() AS v`)

  it.effect("sqliteVec loads the sqlite-vec package's extension (true and auto); without it, its functions do not exist", () =>
    Effect.gen(function*() {
      const [loaded] = yield* version.pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:", sqliteVec: true })))
      expect(loaded!.v).toMatch(/^v0\.\d+\.\d+/)
      yield* version.pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:", sqliteVec: "auto" })))
      expect(yield* Effect.flip(version.pipe(Effect.provide(memory)))).toBeInstanceOf(SqlError.SqlError)
    }))

  it.effect("an extension that does not load fails the layer naming its path; loading is off once the database is open", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Layer.build(SqliteClient.layer({ filename: ":memory:", extensions: ["/nonexistent/libnothing.so"] })))
      expect(error.message).toContain("cannot load the SQLite extension /nonexistent/libnothing.so")
      // SQL's load_extension() stays refused on a client that loaded one.
      const refused = yield* Effect.flip(
        Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT load_extension('/nonexistent/libnothing.so')`).pipe(
          Effect.provide(SqliteClient.layer({ filename: ":memory:", sqliteVec: true }))
        )
      )
      expect(refused.message).toContain("not authorized")
    }).pipe(Effect.scoped))
})

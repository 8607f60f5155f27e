import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { openSqliteFile } from "../../../src/environment/internal/sqliteStores.js"

const dir = mkdtempSync(join(tmpdir(), "valet-sqlite-stores-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("openSqliteFile (the SQLite file of StateStore and LessonStore)", () => {
  it.effect("commits in WAL mode with synchronous NORMAL: no disk sync on the event loop at every state update", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [mode] = yield* sql.unsafe<{ journal_mode: string }>("PRAGMA journal_mode")
      const [sync] = yield* sql.unsafe<{ synchronous: number }>("PRAGMA synchronous")
      // 1 is NORMAL (2 FULL, SQLite's default).
      expect({ mode: mode?.journal_mode, synchronous: sync?.synchronous }).toEqual({ mode: "wal", synchronous: 1 })
    }).pipe(Effect.provide(openSqliteFile(join(dir, "nested", "state.db"), (message) => new Error(message)))))
})

/**
 * What the SQL stores of this layer share: opening a SQLite file for them (the embedded default); and, from core
 * (where `Threads` uses them too), the integer columns of their rows, a `SqlError` read as one line, and creating
 * their tables when several processes open them at once.
 */
import { Effect, Layer } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { describeSqlError } from "../../core/internal/sql.js"
import * as SqliteClient from "../SqliteClient.js"

export { createTables, describeSqlError, IntegerColumn } from "../../core/internal/sql.js"

/**
 * A `SqlClient` on a SQLite file whose directory is created first (SQLite does not create directories), its
 * commits `synchronous = NORMAL` (WAL). A failure to create it or to open the file is the store's own error, built
 * by `fail` from a one-line message.
 */
export const openSqliteFile = <E>(filename: string, fail: (message: string) => E): Layer.Layer<SqlClient.SqlClient, E> =>
  Layer.effect(
    SqlClient.SqlClient,
    Effect.try({
      try: () => {
        if (filename !== ":memory:") mkdirSync(dirname(filename), { recursive: true })
      },
      catch: (error) =>
        fail(`cannot create the directory of ${filename}: ${error instanceof Error ? error.message : String(error)}`)
    }).pipe(
      Effect.andThen(SqliteClient.make({ filename }).pipe(
        // Commits in the write-ahead log without a disk sync each (WAL's NORMAL): `node:sqlite` is synchronous, so
        // under FULL every state update blocked the event loop for an fsync, and with it every episode of a rollout
        // (bench/rollout.ts, K=64 on a busy 2-core machine: saturation 0.55 → 0.98). A killed process still keeps
        // what it committed; only an OS crash or power loss can drop the last commits.
        Effect.tap((client) => client.unsafe("PRAGMA synchronous = NORMAL")),
        Effect.mapError((error) => fail(describeSqlError(error)))
      ))
    )
  ).pipe(Layer.provide(Reactivity.layer))


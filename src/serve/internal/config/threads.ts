/**
 * The thread store a server or a command keeps conversations in: memory (one process), a SQLite file (its folder
 * created when missing), or a PostgreSQL server (`@effect/sql-pg`, an optional package loaded only then). Opening
 * it is checked at once, so a file that cannot be opened or a server that is not there is one `ThreadStoreError`
 * naming it (a PostgreSQL URL without its credentials) when the server starts, not a failure on the first turn.
 */
import { Context, Effect, FileSystem, Layer, Path, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { describeSqlError } from "../../../core/internal/sql.js"
import * as Threads from "../../../core/Threads.js"
import * as SqliteClient from "../../../environment/SqliteClient.js"
import * as Durable from "../../../rollouts/Durable.js"

/** Where threads are kept. */
export type Store =
  | { readonly _tag: "Memory" }
  | { readonly _tag: "Sqlite"; readonly file: string }
  | { readonly _tag: "Postgres"; readonly url: string }

/** The SQLite file `valet run --thread` and a `threads: { store: sqlite }` without `path` use. */
export const defaultSqliteFile = "data/threads.sqlite3"

/** A store for messages: the SQLite file, or the PostgreSQL server without its credentials. */
export const describe = (store: Store): string =>
  store._tag === "Memory" ? "memory" : store._tag === "Sqlite" ? `sqlite ${store.file}` : Durable.describePostgres(store.url)

const opening = (store: Store, message: string) =>
  new Threads.ThreadStoreError({ operation: "open", message: `Threads: ${describe(store)}: ${message}` })

const sqlite = (store: Store & { readonly _tag: "Sqlite" }): Layer.Layer<SqlClient.SqlClient, Threads.ThreadStoreError, FileSystem.FileSystem | Path.Path> =>
  Layer.effectContext(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    // SQLite creates the file, not its folder (`data/` of a fresh checkout).
    yield* fs.makeDirectory(path.dirname(store.file), { recursive: true }).pipe(
      Effect.mapError((error) => opening(store, `cannot create its folder: ${error.message}`))
    )
    // sqlite-vec when the optional package is installed: recall ranks in SQL; without it the store scans.
    const context = yield* Layer.build(SqliteClient.layer({ filename: store.file, sqliteVec: "auto" })).pipe(
      Effect.mapError((error) => opening(store, `cannot open: ${describeSqlError(error)}`))
    )
    return Context.make(SqlClient.SqlClient, Context.get(context, SqlClient.SqlClient))
  }))

const postgres = (store: Store & { readonly _tag: "Postgres" }): Layer.Layer<SqlClient.SqlClient, Threads.ThreadStoreError> =>
  Layer.effectContext(Effect.gen(function*() {
    const { PgClient } = yield* Effect.tryPromise({
      try: () => import("@effect/sql-pg"),
      catch: () => opening(store, "a PostgreSQL store needs the optional package @effect/sql-pg: npm install @effect/sql-pg")
    })
    const context = yield* Layer.build(PgClient.layer({ url: Redacted.make(store.url), maxConnections: 8 })).pipe(
      Effect.mapError((error) => opening(store, `cannot connect: ${error.message}`))
    )
    const client = Context.get(context, SqlClient.SqlClient)
    // Asked once now: a server that is not there is this line when the server starts.
    yield* client`SELECT 1`.pipe(Effect.mapError((error) => opening(store, `cannot connect: ${describeSqlError(error)}`)))
    return Context.make(SqlClient.SqlClient, client)
  }))

/** `Threads` on the store, for as long as the layer lives. */
export const layer = (store: Store): Layer.Layer<Threads.Threads, Threads.ThreadStoreError, FileSystem.FileSystem | Path.Path> => {
  switch (store._tag) {
    case "Memory":
      return Threads.layerMemory()
    case "Sqlite":
      return Threads.layerSql.pipe(Layer.provide(sqlite(store)))
    case "Postgres":
      return Threads.layerSql.pipe(Layer.provide(postgres(store)))
  }
}

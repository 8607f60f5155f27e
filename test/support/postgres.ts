/**
 * The throwaway PostgreSQL server of the test run (started by `./postgresSetup.ts`, the vitest globalSetup), seen
 * from a test file: `describePostgres` runs a suite when the server is there and skips it with the reason in its
 * name when not; `freshSchema` gives a test its own empty schema, dropped after it.
 */
import { PgClient } from "@effect/sql-pg"
import { describe, inject } from "@effect/vitest"
import { Effect, Layer, Redacted, type Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import type { SqlClient, SqlError } from "effect/sql"
import type { PostgresServer } from "./postgresSetup.js"

/** The server, or why there is none. */
export const server: PostgresServer = inject("valet.postgres") ??
  { _tag: "Unavailable", reason: "the vitest globalSetup test/support/postgresSetup.ts did not run" }

/** A suite that needs the server: run when it is there, else skipped with the reason in the suite's name. */
export const describePostgres = (name: string, body: () => void): void => {
  if (server._tag === "Available") describe(name, body)
  else describe.skip(`${name} — skipped: ${server.reason}`, body)
}

/** An empty schema of its own on the server. */
export interface Schema {
  readonly name: string
  /** A new client (its own pool) whose unqualified table names resolve in this schema. */
  readonly client: () => Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, SqlError.SqlError>
}

let schemas = 0

/** Creates an empty schema, dropped (with everything in it) when the scope closes. */
export const freshSchema: Effect.Effect<Schema, SqlError.SqlError, Scope.Scope> = Effect.gen(function*() {
  if (server._tag === "Unavailable") return yield* Effect.die(new Error(`no PostgreSQL: ${server.reason}`))
  const url = Redacted.make(server.url)
  const admin = yield* PgClient.make({ url, maxConnections: 1 })
  const name = `valet_test_${process.pid}_${++schemas}_${Math.random().toString(36).slice(2, 8)}`
  yield* admin`CREATE SCHEMA ${admin(name)}`
  yield* Effect.addFinalizer(() => Effect.ignore(admin`DROP SCHEMA ${admin(name)} CASCADE`))
  return {
    name,
    client: () => PgClient.layer({ url, maxConnections: 4, startupParameters: { search_path: name } })
  }
}).pipe(Effect.provide(Reactivity.layer))

/** A layer over a fresh schema: what a suite over any `SqlClient` needs to run on PostgreSQL. */
export const layerFreshSchema: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, SqlError.SqlError> = Layer.unwrap(
  Effect.map(freshSchema, (schema) => schema.client())
)

/**
 * Creates an empty database on the server and answers its URL (for processes the test starts, which connect on
 * their own); dropped, with its connections ended, when the scope closes.
 */
export const freshDatabase: Effect.Effect<string, SqlError.SqlError, Scope.Scope> = Effect.gen(function*() {
  if (server._tag === "Unavailable") return yield* Effect.die(new Error(`no PostgreSQL: ${server.reason}`))
  const admin = yield* PgClient.make({ url: Redacted.make(server.url), maxConnections: 1 })
  const name = `valet_test_${process.pid}_${++schemas}_${Math.random().toString(36).slice(2, 8)}`
  yield* admin`CREATE DATABASE ${admin(name)}`
  yield* Effect.addFinalizer(() => Effect.ignore(admin`DROP DATABASE ${admin(name)} WITH (FORCE)`))
  const url = new URL(server.url)
  url.pathname = `/${name}`
  return url.toString()
}).pipe(Effect.provide(Reactivity.layer))

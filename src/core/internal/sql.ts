/**
 * What the SQL stores share, in every layer: the integer columns of their rows, a `SqlError` read as one line, and
 * creating their tables when several processes open them at once. On `effect/sql` alone, so that core's stores
 * (`Threads`) and environment's (`StateStore`, …) use one copy.
 */
import { Effect, Schema, SchemaGetter } from "effect"
import type { SqlClient, SqlError } from "effect/sql"

/**
 * An integer column as the drivers answer it: a number (SQLite), a decimal string or a bigint (PostgreSQL's
 * BIGINT, depending on the driver and `SafeIntegers`). Anything else — `"yesterday"`, `""`, `1.5` — is refused.
 */
export const IntegerColumn = Schema.Union([
  Schema.Int,
  Schema.String.check(Schema.isPattern(/^-?\d+$/, { expected: "an integer" })).pipe(
    Schema.decodeTo(Schema.Int, {
      decode: SchemaGetter.transform((text: string) => Number(text)),
      encode: SchemaGetter.transform((n: number) => String(n))
    })
  ),
  Schema.BigInt.pipe(
    Schema.decodeTo(Schema.Int, {
      decode: SchemaGetter.transform((n: bigint) => Number(n)),
      encode: SchemaGetter.transform((n: number) => BigInt(n))
    })
  )
])

/** A `SqlError` in one line: the reason's message, and the driver's own when it adds something. */
export const describeSqlError = (error: SqlError.SqlError): string => {
  const cause = error.reason.cause
  const own = cause instanceof Error ? cause.message : undefined
  return own !== undefined && own !== "" && !error.message.includes(own) ? `${error.message} (${own})` : error.message
}

/**
 * Runs a store's `CREATE … IF NOT EXISTS` statements so that stores opened at the same moment on an empty PostgreSQL
 * database (runners started together) do not fail each other. `IF NOT EXISTS` looks at the catalog before writing
 * to it, so two sessions creating the same table can both find it missing, and all but one fail with a unique
 * violation on `pg_type` / `pg_class` (23505) or "already exists" (42P07): 33 of 60 stores built three at a time
 * did, here. On PostgreSQL the statements therefore run in one transaction that first takes a transaction-scoped
 * advisory lock named after the table: the others wait for it, then find the table there. SQLite serializes
 * writers itself: there they run as they are.
 */
export const createTables = <A, R>(
  sql: SqlClient.SqlClient,
  table: string,
  statements: Effect.Effect<A, SqlError.SqlError, R>
): Effect.Effect<A, SqlError.SqlError, R> =>
  sql.onDialectOrElse({
    pg: () =>
      sql.withTransaction(
        Effect.andThen(sql`SELECT pg_advisory_xact_lock(hashtext(${`valet create table ${table}`}))`, statements)
      ),
    orElse: () => statements
  })

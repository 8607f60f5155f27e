/**
 * The backends a store's conformance suite runs on (memory, SQLite, PostgreSQL), shared by the StateStore and
 * LessonStore tests.
 */
import { describe } from "@effect/vitest"
import { Effect, type Layer, type Scope } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import { describePostgres } from "./postgres.js"

/** A backend of the store `S`: a fresh, empty store per call (its database removed when the test's scope closes). */
export interface Backend<S, E> {
  readonly name: "memory" | "sqlite" | "postgres"
  readonly fresh: Effect.Effect<Layer.Layer<S, E | SqlError.SqlError>, SqlError.SqlError, Scope.Scope>
}

/** A SQL backend: a fresh database, as many clients (connections, pools) on it as a test wants. */
export interface SqlBackend<S, E> extends Backend<S, E> {
  readonly name: "sqlite" | "postgres"
  readonly database: Effect.Effect<() => Layer.Layer<SqlClient.SqlClient, SqlError.SqlError>, SqlError.SqlError, Scope.Scope>
}

/** Runs `program` against a fresh store of `backend`. */
export const withStore = <S, E, A, E2, R>(backend: Backend<S, E>, program: Effect.Effect<A, E2, R>) =>
  Effect.flatMap(backend.fresh, (layer) => Effect.provide(program, layer))

/** `describe`, or for PostgreSQL `describePostgres` (skipped, saying why, without a server). */
export const describeOn = <S, E>(backend: Backend<S, E>, name: string, body: () => void): void => {
  if (backend.name === "postgres") describePostgres(name, body)
  else describe(name, body)
}

/**
 * The backends a store's conformance suite runs on (memory, SQLite, PostgreSQL), shared by the StateStore and
 * LessonStore tests.
 */
import { describe } from "@effect/vitest"
import { Cause, Effect, Layer, type Scope } from "effect"
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

/**
 * Opens `count` stores at the same moment on a fresh, empty database of `backend`, `rounds` times (a fresh database
 * each time), as runners started together do; answers why each one that failed to open failed (none, when table
 * creation does not race).
 */
export const openTogether = <S, E>(
  backend: SqlBackend<S, E>,
  store: (client: Layer.Layer<SqlClient.SqlClient, SqlError.SqlError>) => Layer.Layer<S, E | SqlError.SqlError>,
  { count = 3, rounds = 5 }: { readonly count?: number; readonly rounds?: number } = {}
): Effect.Effect<ReadonlyArray<string>, SqlError.SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const failures: Array<string> = []
    for (let round = 0; round < rounds; round++) {
      const client = yield* backend.database
      const exits = yield* Effect.forEach(
        Array.from({ length: count }, () => store(client())),
        (layer) => Effect.exit(Layer.build(layer)),
        { concurrency: "unbounded" }
      )
      for (const exit of exits) if (exit._tag === "Failure") failures.push(Cause.pretty(exit.cause).split("\n")[0]!)
    }
    return failures
  })

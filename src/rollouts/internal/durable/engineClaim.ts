/**
 * The claim of a running SQLite engine on its file (`engine.ts`): one process runs a file's workflows — a second
 * would resume the first one's runs too, and both would act on each decision. One row (`valet_workflow_runner`) names
 * the process that runs them: its pid, its host, a claim id and a heartbeat.
 */
import { Clock, Duration, Effect, Schema, type Scope } from "effect"
import type { SqlClient, SqlError, Statement } from "effect/sql"
import { hostname } from "node:os"
import { processExists } from "../../../environment/internal/processes.js"

/**
 * Another process runs the workflows of this file: one process runs a file's workflows (a second would resume the
 * first one's runs too, and both would act on each decision). Start this one as a client (`clientOnly`), or stop
 * that one first.
 */
export class FileClaimed extends Schema.TaggedError<FileClaimed>()("FileClaimed", {
  message: Schema.String
}) {}

/** The claims of the engines open in this process (a row naming this pid is live only while its engine is open). */
const openClaims = new Set<string>()

/** A claim a process on another host left is taken over once its heartbeat is this old. */
const staleClaimMs = 30_000
const heartbeatEvery = Duration.seconds(10)

/** What the claim needs of the engine. */
export interface Engine {
  /** The table of the claim, as the engine names it in SQL (the engine creates it). */
  readonly runnerTable: Statement.Identifier
  /** Writes a statement with the engine's other writes (its group commit). */
  readonly written: (statement: Effect.Effect<unknown, SqlError.SqlError>) => Effect.Effect<void>
  /** The engine's scope: the heartbeat runs in it. */
  readonly scope: Scope.Scope
  /** What a failed statement dies with. */
  readonly onStoreFailure: (error: SqlError.SqlError) => unknown
}

/**
 * Takes the file's claim for the engine's scope, or fails with `FileClaimed` naming the process that holds it; the
 * claim is released when the scope closes.
 */
export const claim = (
  sql: SqlClient.SqlClient,
  { onStoreFailure, runnerTable: t, scope, written }: Engine
): Effect.Effect<void, FileClaimed, Scope.Scope> =>
  Effect.gen(function*() {
    // The claim: taken in one transaction, refused while the process that holds it lives (on this host: its pid;
    // in this process: its engine still open; on another host: a heartbeat less than 30 s old). A process that was
    // killed left a claim whose pid is gone: taken over at once, so a restart after a kill resumes its runs.
    const claim = Math.random().toString(36).slice(2, 12)
    const host = hostname()
    interface Held {
      readonly pid: number | bigint
      readonly host: string
      readonly claim: string
      readonly heartbeat_at: number | bigint
    }
    const live = (held: Held, now: number): boolean =>
      held.host !== host
        ? now - Number(held.heartbeat_at) < staleClaimMs
        : Number(held.pid) === process.pid
        ? openClaims.has(held.claim)
        : processExists(Number(held.pid))
    yield* sql.withTransaction(Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const held = (yield* sql<Held>`SELECT pid, host, claim, heartbeat_at FROM ${t} WHERE id = 1`)[0]
      if (held !== undefined && live(held, now)) {
        return yield* new FileClaimed({
          message: `another process runs this file's workflows (pid ${held.pid} on ${held.host}): one process runs them; ` +
            `stop it first, or open this one as a client (it decides and answers, the other runs)`
        })
      }
      yield* sql`INSERT INTO ${t} (id, pid, host, claim, heartbeat_at) VALUES (1, ${process.pid}, ${host}, ${claim}, ${now})
        ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, host = excluded.host, claim = excluded.claim, heartbeat_at = excluded.heartbeat_at`
    })).pipe(Effect.catch((error) => error instanceof FileClaimed ? Effect.fail(error) : Effect.die(onStoreFailure(error))))
    openClaims.add(claim)
    yield* Effect.addFinalizer(() =>
      Effect.andThen(
        Effect.sync(() => openClaims.delete(claim)),
        sql`DELETE FROM ${t} WHERE claim = ${claim}`.pipe(Effect.ignore)
      )
    )
    // The heartbeat a process on another host reads (one on this host reads the pid).
    yield* Effect.sleep(heartbeatEvery).pipe(
      Effect.andThen(Clock.currentTimeMillis),
      Effect.flatMap((now) => written(sql`UPDATE ${t} SET heartbeat_at = ${now} WHERE claim = ${claim}`)),
      Effect.forever,
      Effect.forkIn(scope)
    )
  })

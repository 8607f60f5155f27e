/**
 * Runners of the durable engine (`engine.ts`) on one PostgreSQL database, and the clients that start work for them.
 *
 * - Each execution has one owner, the runner that runs it (the executions' `owner` column). A runner that starts
 *   one (a child workflow) runs it; one a client starts (`valet eval --durable postgres://…`) is stored without an
 *   owner, and the client says `start`: the runner it falls to takes it at once — the one whose hash with the
 *   execution id is highest among the live runners (rendezvous hashing: an even share each, and few moves when a
 *   runner comes or goes). Any runner takes it after `grace` (2 s) when that one did not (it died meanwhile, or the
 *   lists of live runners differed). Taking is one `UPDATE … WHERE owner IS NULL`: one runner wins.
 * - Runners register in `valet_workflow_runners` with the server process of a connection they hold
 *   (`pg_backend_pid()`), and beat every `heartbeat` (1 s). A runner is dead when that connection is gone (a killed
 *   process: PostgreSQL ends its session at once) or its heartbeat is older than `expiration` (10 s: a frozen
 *   process, a lost network). Any runner's tick deletes the dead and frees the open executions of runners that are
 *   not registered, in one transaction; the live runners take them as above, and each replays its share from what
 *   was stored. A runner that finds its own row gone (it was thought dead) or loses its held connection drops its
 *   runs, frees what it still marks its own and registers again. Until it notices, what it writes for an execution
 *   (activities, clocks, a suspension, a result) is written only while it owns it (`owner = me` in the statement).
 * - What one process writes for another (a deferred completed, an interrupt, a resume, a child's completion, a
 *   result) it also says on the channel `valet_workflow` (`NOTIFY`, delivered when its transaction commits); each
 *   tick looks at the tables too, so a notification lost with a connection delays, never loses, the work.
 *
 * Why not effect/cluster (which valet ran here before, as DESIGN §10 has it): it moved each activity through its
 * message storage and runner sockets — 3.4–6.7 ms of a runner's CPU an activity in bench/durable.ts, against 1.5 ms
 * here, where an activity is one row — and its runners listened on a port of their own, unauthenticated. The
 * workflows are still effect/workflow's; the engine under them is valet's.
 */
import { Context, Duration, Effect, Exit, Fiber, Queue, Schedule, Scope } from "effect"
import { SqlClient, type SqlConnection, type SqlError } from "effect/sql"
import type { WorkflowEngine } from "effect/workflow"
import { randomUUID } from "node:crypto"
import { hostname } from "node:os"
import { createTables } from "../../../core/internal/sql.js"
import * as Engine from "./engine.js"

/**
 * `LISTEN` on the database (`PgClient.listen` of `@effect/sql-pg`, an optional peer: provided by `engines.ts`, which
 * loads it): a queue of the channel's payloads until the scope closes.
 */
export class Listener extends Context.Service<Listener, {
  readonly listen: (channel: string) => Effect.Effect<Queue.Dequeue<{ readonly payload: string }, SqlError.SqlError>, SqlError.SqlError, Scope.Scope>
}>()("valet/durable/Listener") {}

/** The channel the engine's processes talk on. */
const channel = "valet_workflow"
const runnersTable = "valet_workflow_runners"

/** How a runner is set up. */
export interface RunnerOptions {
  /** How often a runner beats, looks for dead runners and takes what falls to it (default 1 s). */
  readonly heartbeat?: Duration.Input | undefined
  /**
   * A runner whose heartbeat is this old is dead, and its executions are taken over (default 10 s). A killed
   * runner's are taken over within a heartbeat, without waiting for this: its database session ends with it.
   */
  readonly expiration?: Duration.Input | undefined
  /** How long an execution waits for the runner it falls to before any runner takes it (default 2 s). */
  readonly grace?: Duration.Input | undefined
  /** What a failed statement dies with (default: the `SqlError`). */
  readonly onStoreFailure?: Engine.OnStoreFailure | undefined
}

/**
 * The rendezvous weight of a runner for an execution: 32-bit FNV-1a of both, then MurmurHash3's finalizer (FNV-1a
 * alone mixes poorly: of 3,000 executions, one of three runners got 234 more or fewer than its 1,000).
 */
const weight = (runner: string, executionId: string): number => {
  let hash = 0x811c9dc5
  const text = `${runner}/${executionId}`
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193)
  }
  hash ^= hash >>> 16
  hash = Math.imul(hash, 0x85ebca6b)
  hash ^= hash >>> 13
  hash = Math.imul(hash, 0xc2b2ae35)
  hash ^= hash >>> 16
  return hash >>> 0
}

/** The live runner an execution falls to. */
export const ownerOf = (runners: ReadonlyArray<string>, executionId: string): string | undefined => {
  let best: string | undefined
  let bestWeight = -1
  for (const runner of runners) {
    const w = weight(runner, executionId)
    if (w > bestWeight || (w === bestWeight && best !== undefined && runner < best)) {
      best = runner
      bestWeight = w
    }
  }
  return best
}

/** Hears the channel for the process's lifetime: each batch of messages to `heard`, again after a lost connection. */
const listen = (listener: Listener["Service"], heard: (messages: ReadonlyArray<string>) => Effect.Effect<void>) =>
  Effect.scoped(Effect.gen(function*() {
    const queue = yield* listener.listen(channel)
    while (true) {
      const batch = yield* Queue.takeAll(queue)
      yield* heard(batch.map((notification) => notification.payload))
    }
  })).pipe(
    Effect.catch((error: SqlError.SqlError) => Effect.logWarning(`valet durable: listening on ${channel} failed (${error.message}); listening again`)),
    Effect.repeat(Schedule.spaced(Duration.seconds(1)))
  )

/** A client: starts executions for the runners and reads what they store; runs none. */
export const client = (
  options: { readonly onStoreFailure?: Engine.OnStoreFailure | undefined } = {}
): Effect.Effect<WorkflowEngine.WorkflowEngine["Service"], never, SqlClient.SqlClient | Listener | Scope.Scope> =>
  Effect.gen(function*() {
    const listener = yield* Listener
    const { engine, hooks } = yield* Engine.build({
      clientOnly: true,
      onStoreFailure: options.onStoreFailure,
      sharing: { runner: undefined, channel }
    }).pipe(Effect.orDie)
    // Results come as `done`: a caller waiting on one asks again at once.
    yield* Effect.forkScoped(listen(listener, (messages) => Effect.forEach(messages, hooks.heard, { discard: true })))
    return engine
  })

/** A runner: runs the executions that fall to it and takes over those of dead runners. */
export const runner = (
  options: RunnerOptions = {}
): Effect.Effect<WorkflowEngine.WorkflowEngine["Service"], never, SqlClient.SqlClient | Listener | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const listener = yield* Listener
    const onStoreFailure = options.onStoreFailure ?? ((error: SqlError.SqlError) => error)
    const stored = <A, R>(effect: Effect.Effect<A, SqlError.SqlError, R>): Effect.Effect<A, never, R> =>
      Effect.catch(effect, (error) => Effect.die(onStoreFailure(error)))
    const heartbeat = Duration.fromInputUnsafe(options.heartbeat ?? Duration.seconds(1))
    const expirationMs = Duration.toMillis(Duration.fromInputUnsafe(options.expiration ?? Duration.seconds(10)))
    const graceMs = Duration.toMillis(Duration.fromInputUnsafe(options.grace ?? Duration.seconds(2)))
    const id = randomUUID()
    const runnerScope = yield* Effect.scope
    const runnersT = sql(runnersTable)
    const executionsT = sql(Engine.executionsTable)
    // Times are the server's: runners on hosts whose clocks differ compare heartbeats and ages on one clock.
    const serverMillisText = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint"
    const serverMillis = sql.literal(serverMillisText)

    const { engine, hooks } = yield* Engine.build({
      onStoreFailure: options.onStoreFailure,
      sharing: { runner: id, channel }
    }).pipe(Effect.orDie)
    yield* stored(createTables(
      sql,
      runnersTable,
      sql`CREATE TABLE IF NOT EXISTS ${runnersT} (
        id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, backend_pid INTEGER NOT NULL, heartbeat_at BIGINT NOT NULL)`
    ))

    // The connection whose session says this runner lives, held while it does; its heartbeat goes over it.
    interface Held {
      readonly scope: Scope.Closeable
      readonly connection: SqlConnection.Connection
      readonly backendPid: number
    }
    const hold: Effect.Effect<Held, SqlError.SqlError> = Effect.gen(function*() {
      const scope = Scope.makeUnsafe()
      const connection = yield* Scope.provide(scope)(sql.reserve).pipe(Effect.onError(() => Scope.close(scope, Exit.void)))
      const rows = yield* connection.execute("SELECT pg_backend_pid() AS pid", [], undefined).pipe(Effect.onError(() => Scope.close(scope, Exit.void)))
      return { scope, connection, backendPid: Number(rows[0]?.pid) }
    })
    let held: Held | undefined = yield* stored(hold)
    yield* Effect.addFinalizer(() => held === undefined ? Effect.void : Scope.close(held.scope, Exit.void))
    /**
     * Registers (again): the executions still marked this runner's are freed first, in the same transaction — after
     * a runner was taken for dead, what it stored as its own meanwhile is no one's to run until freed.
     */
    const register = (backendPid: number) =>
      sql.withTransaction(Effect.andThen(
        sql`UPDATE ${executionsT} SET owner = NULL WHERE owner = ${id} AND result IS NULL`,
        sql`INSERT INTO ${runnersT} (id, host, pid, backend_pid, heartbeat_at) VALUES (${id}, ${hostname()}, ${process.pid}, ${backendPid}, ${serverMillis})
          ON CONFLICT (id) DO UPDATE SET backend_pid = excluded.backend_pid, heartbeat_at = excluded.heartbeat_at`
      ))
    yield* stored(register(held.backendPid))

    let live: ReadonlyArray<string> = [id]
    const mine = (executionId: string) => ownerOf(live, executionId) === id

    /**
     * Takes executions without an owner: those given (said `start`, falling to this runner), or all that fall to
     * this runner or waited `grace`. The rows come back with the taking: a new execution costs two statements (the
     * taking, and the read of its deferreds once it is marked this runner's).
     */
    const take = (only: ReadonlyArray<string> | undefined) =>
      Effect.gen(function*() {
        const workflows = hooks.workflows()
        if (workflows.length === 0 || (only !== undefined && only.length === 0)) return
        let wanted = only
        if (wanted === undefined) {
          const free = yield* stored(sql<{ readonly execution_id: string; readonly age: number | string }>`SELECT execution_id, ${serverMillis} - created_at AS age
            FROM ${executionsT} WHERE owner IS NULL AND result IS NULL AND ${sql.in("workflow", workflows)}`)
          // Those that fall to this runner, and all that waited too long for another: the runner it falls to may lack
          // the workflow's handler (runners need not all register the same workflows), so a share would leave some.
          wanted = free.filter((row) => mine(row.execution_id) || Number(row.age) >= graceMs).map((row) => row.execution_id)
          if (wanted.length === 0) return
        }
        const taken = yield* stored(sql<Engine.Taken>`UPDATE ${executionsT} SET owner = ${id}, takes = takes + 1
          WHERE ${sql.in("execution_id", wanted)} AND owner IS NULL AND result IS NULL AND ${sql.in("workflow", workflows)}
          RETURNING execution_id, workflow, payload, parent, interrupted, suspended, result, takes`)
        yield* hooks.own(taken)
        // Adopted on a fiber of their own: a long takeover (many executions, each loaded) holds up neither the tick
        // nor the messages heard after this one.
        yield* Effect.forEach(taken, (row) => hooks.adopt(row.execution_id), { concurrency: 8, discard: true }).pipe(Effect.forkIn(runnerScope))
      })

    /**
     * Deletes dead runners and frees the open executions of runners that are gone (dead now, or stopped while a
     * taking was under way), in one transaction; reads the live ones.
     */
    const reap = Effect.gen(function*() {
      yield* stored(sql.withTransaction(Effect.andThen(
        sql`DELETE FROM ${runnersT} WHERE id <> ${id}
          AND (heartbeat_at < ${serverMillis} - ${expirationMs} OR backend_pid NOT IN (SELECT pid FROM pg_stat_activity))`,
        sql`UPDATE ${executionsT} SET owner = NULL
          WHERE result IS NULL AND owner IS NOT NULL AND owner NOT IN (SELECT id FROM ${runnersT})`
      )))
      live = (yield* stored(sql<{ readonly id: string }>`SELECT id FROM ${runnersT}`)).map((row) => row.id)
      if (!live.includes(id)) live = [...live, id]
    })

    /** Starts over as a runner the others may have taken for dead: its runs dropped, its executions freed. */
    const startOver = (why: string) =>
      Effect.gen(function*() {
        yield* Effect.logWarning(`valet durable: runner ${id} ${why}; its runs move to the runners that take them`)
        yield* hooks.abandon
        if (held === undefined) {
          held = yield* stored(hold)
        }
        yield* stored(register(held.backendPid))
      })

    // The heartbeat, on a fiber of its own: the tick's work (a takeover, a slow statement) never delays it past the
    // expiration, which would have the others take a live runner for dead.
    const beat = Effect.gen(function*() {
      if (held === undefined) return yield* startOver("had no connection to hold")
      // On the held connection: when its session is gone, so is this runner for the others.
      const beat = yield* Effect.exit(held.connection.execute(`UPDATE ${runnersTable} SET heartbeat_at = ${serverMillisText} WHERE id = $1 RETURNING id`, [id], undefined))
      if (Exit.isFailure(beat)) {
        const lost = held
        held = undefined
        yield* Scope.close(lost.scope, Exit.void)
        yield* startOver("lost the connection that says it lives")
      } else if (beat.value.length === 0) {
        // Thought dead (frozen past the expiration): the others took its executions.
        yield* startOver("was taken for dead")
      }
    })

    const tick = Effect.andThen(reap, take(undefined))

    const heard = (messages: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const started: Array<string> = []
        for (const message of messages) {
          if (message.startsWith("start ")) {
            const executionId = message.slice("start ".length)
            if (mine(executionId)) started.push(executionId)
          } else {
            yield* hooks.heard(message)
          }
        }
        yield* take(started)
      })

    const every = (what: string, effect: Effect.Effect<void>) =>
      effect.pipe(
        Effect.catchCause((cause) => Effect.logWarning(`valet durable: a runner's ${what} failed`, cause)),
        Effect.andThen(Effect.sleep(heartbeat)),
        Effect.forever,
        Effect.forkScoped
      )
    const beating = yield* every("heartbeat", beat)
    const ticking = yield* every("tick", tick)
    // What others stored for this runner's executions, looked for again in case a notification was lost: apart too,
    // as a statement held by a lock there must not stop the takings.
    const looking = yield* every("look for requests", hooks.requests)
    const listening = yield* Effect.forkScoped(listen(listener, heard))
    // Stopped: it takes nothing more, then frees its open executions at once for the others (its runs were
    // interrupted with their handlers). A taking that was under way and commits after this is freed by the others'
    // next reap (its owner is gone).
    yield* Effect.addFinalizer(() =>
      Effect.andThen(
        Fiber.interruptAll([beating, ticking, looking, listening]),
        sql.withTransaction(Effect.andThen(
          sql`UPDATE ${executionsT} SET owner = NULL WHERE owner = ${id} AND result IS NULL`,
          sql`DELETE FROM ${runnersT} WHERE id = ${id}`
        )).pipe(Effect.ignore)
      )
    )
    return engine
  })

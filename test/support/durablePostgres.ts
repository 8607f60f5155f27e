/**
 * Helpers of the tests of Durable's engine shared on PostgreSQL (test/rollouts/DurablePostgresReview*.test.ts):
 * runners and clients built in the test process on one fresh database (two `Engines.layerPostgresRunner` layers are
 * two runners, each its own pool, held connection and LISTEN), an admin connection, polls, and small workflows.
 */
import { PgClient } from "@effect/sql-pg"
import { type Context, Deferred, Duration, Effect, Fiber, Layer, Redacted, Schema, type Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import type { SqlClient } from "effect/sql"
import { Activity, DurableDeferred, Workflow, type WorkflowEngine } from "effect/workflow"
import * as Engines from "../../src/rollouts/internal/durable/engines.js"

/** A connection of the test's own to the database (as an operator's psql would be). */
export const adminOn = (url: string) =>
  PgClient.make({ url: Redacted.make(url), maxConnections: 3 }).pipe(Effect.provide(Reactivity.layer))

/** Builds layers in the test's scope (or the scope given): a runner or a client, with the handlers given. */
export const buildIn = <A>(layer: Layer.Layer<A, unknown>, scope?: Scope.Scope) =>
  Effect.gen(function*() {
    const into = scope ?? (yield* Effect.scope)
    return yield* Layer.buildWithScope(layer, into).pipe(Effect.orDie)
  })

export const runnerWith = (url: string, handlers: Layer.Layer<never, never, WorkflowEngine.WorkflowEngine>, options: { heartbeat?: Duration.Input; expiration?: Duration.Input; maxConnections?: number } = {}) =>
  handlers.pipe(Layer.provideMerge(Engines.layerPostgresRunner({ url, ...options })))

/** Polls `look` every 50 ms until `done` holds; dies after `polls` polls. */
export const until = <A, E, R>(what: string, look: Effect.Effect<A, E, R>, done: (a: A) => boolean, polls = 200) =>
  Effect.gen(function*() {
    for (let poll = 0; poll < polls; poll++) {
      const value = yield* look
      if (done(value)) return value
      yield* Effect.sleep(Duration.millis(50))
    }
    return yield* Effect.die(new Error(`not reached in ${polls} polls: ${what}`))
  })

/** Polls `look` `polls` times (50 ms apart) and answers whether `done` held at some poll. */
export const within = <A, E, R>(look: Effect.Effect<A, E, R>, done: (a: A) => boolean, polls: number) =>
  Effect.gen(function*() {
    for (let poll = 0; poll < polls; poll++) {
      if (done(yield* look)) return true
      yield* Effect.sleep(Duration.millis(50))
    }
    return false
  })

export interface ExecutionRow {
  readonly execution_id: string
  readonly owner: string | null
  readonly result: string | null
  readonly suspended: string | null
}

export const rowOf = (admin: SqlClient.SqlClient, executionId: string) =>
  Effect.map(
    admin<ExecutionRow>`SELECT execution_id, owner, result, suspended FROM valet_workflow_executions WHERE execution_id = ${executionId}`,
    (rows) => rows[0]
  ).pipe(Effect.orDie)

export const runnerIds = (admin: SqlClient.SqlClient) =>
  Effect.map(admin<{ readonly id: string }>`SELECT id FROM valet_workflow_runners ORDER BY id`, (rows) => rows.map((row) => row.id)).pipe(Effect.orDie)

/** What `engineRunners.ts`'s `reap` writes for a runner it finds dead. */
export const reap = (admin: SqlClient.SqlClient, runnerId: string) =>
  admin.withTransaction(Effect.andThen(
    admin`DELETE FROM valet_workflow_runners WHERE id = ${runnerId}`,
    admin`UPDATE valet_workflow_executions SET owner = NULL WHERE result IS NULL AND owner = ${runnerId}`
  )).pipe(Effect.orDie)

/** A call that waits until the test completes its latch (pushed on `calls`), and answers the latch's value. */
export const waitForLatch = (calls: Array<Deferred.Deferred<string>>): Effect.Effect<string> =>
  Effect.suspend(() => {
    const latch = Deferred.makeUnsafe<string>()
    calls.push(latch)
    return Deferred.await(latch)
  })

/** A workflow whose one activity blocks until the test completes that call's latch; it returns the activity's value. */
export const latched = (name: string) => {
  const workflow = Workflow.make(name, { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
  const calls: Array<Deferred.Deferred<string>> = []
  let interrupted = 0
  const handler = workflow.toLayer(Effect.fnUntraced(function*() {
    return yield* Activity.make({
      name: "pick",
      success: Schema.String,
      execute: waitForLatch(calls).pipe(Effect.onInterrupt(() => Effect.sync(() => void interrupted++)))
    })
  }))
  return { workflow, handler, calls, interrupts: () => interrupted }
}

export const Gate = Workflow.make("pgreview/Gate", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
export const opened = DurableDeferred.make("opened", { success: Schema.String })
export const gateHandler = Gate.toLayer(Effect.fnUntraced(function*() {
  return `opened by ${yield* DurableDeferred.await(opened)}`
}))

/**
 * Runner A, beating every second, then runner B, every 200 ms, both with `handler`: A's context and id, and a read of
 * A's last heartbeat (a test acts right after one, while A's next tick is a second away).
 */
export const slowAndFast = (url: string, admin: SqlClient.SqlClient, handler: Layer.Layer<never, never, WorkflowEngine.WorkflowEngine>) =>
  Effect.gen(function*() {
    const a = yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.seconds(1) }))
    const [aId] = yield* runnerIds(admin)
    yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.millis(200) }))
    const beatOf = Effect.map(
      admin<{ readonly heartbeat_at: string }>`SELECT heartbeat_at FROM valet_workflow_runners WHERE id = ${aId!}`,
      (rows) => rows[0]?.heartbeat_at
    ).pipe(Effect.orDie)
    return { a, aId: aId!, beatOf }
  })

export const provided = <R>(context: Context.Context<R>) => <A, E>(effect: Effect.Effect<A, E, R>) => Effect.provide(effect, context)

/** The activities stored for an execution (its journal). */
export const journalOf = (admin: SqlClient.SqlClient, executionId: string) =>
  Effect.map(
    admin<{ readonly activity: string }>`SELECT activity FROM valet_workflow_activities WHERE execution_id = ${executionId} ORDER BY activity`,
    (rows) => rows.map((row) => row.activity)
  ).pipe(Effect.orDie)

/** Completes `Gate`'s deferred of an execution with `value` (a decision). */
export const decide = (workflow: Workflow.Any, deferred: typeof opened, executionId: string, value: string) =>
  DurableDeferred.succeed(deferred, { token: DurableDeferred.tokenFromExecutionId(deferred, { workflow, executionId }), value })

/**
 * Asks a resume for each execution (as `valet runs resume` would) and holds their rows in another session until
 * `release`: a runner adopting them waits there, as on a busy server.
 */
export const holdResumes = (admin: SqlClient.SqlClient, executionIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    yield* Effect.forEach(executionIds, (id) => admin`INSERT INTO valet_workflow_resumes (execution_id) VALUES (${id})`.pipe(Effect.orDie), { discard: true })
    const locked = yield* Deferred.make<void>()
    const released = yield* Deferred.make<void>()
    const holder = yield* admin.withTransaction(Effect.gen(function*() {
      yield* admin`SELECT execution_id FROM valet_workflow_resumes FOR UPDATE`
      yield* Deferred.succeed(locked, undefined)
      yield* Deferred.await(released)
    })).pipe(Effect.orDie, Effect.forkScoped)
    yield* Deferred.await(locked)
    return { release: Effect.andThen(Deferred.succeed(released, undefined), Fiber.await(holder)) }
  })

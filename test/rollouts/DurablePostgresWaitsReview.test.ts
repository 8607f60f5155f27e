/**
 * A fresh reader's probes of a PostgreSQL client's waits (engine.ts: `completions`, `asked`, `awaitComplete`,
 * `answerStored`, `heard`). `asked` is one flag per execution, not one per caller: a caller whose wait is interrupted
 * (it gave up, or its retry schedule's sleep won the race) clears it for every caller. So the waits must not depend on
 * it: a `done` completes and drops the wait whoever gave up, a caller that finds no wait for another process's
 * execution asks again at once, and a caller that reads the result wakes those parked on the wait.
 *
 * The interleavings are made deterministic with a client engine built here (no LISTEN: the test hands it the owner's
 * `done` through `hooks.heard` at the moment a real notification could arrive) on a SQL client that holds a caller's
 * read of the row until the test lets it go. The workflow's callers ask again only an hour after `Suspended` unless
 * woken, so a missed wake shows as a caller still waiting.
 */
import { expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Schedule, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { DurableDeferred, Workflow, WorkflowEngine } from "effect/workflow"
import * as Engine from "../../src/rollouts/internal/durable/engine.js"
import { adminOn, buildIn, decide, rowOf, runnerWith, until, within } from "../support/durablePostgres.js"
import { describePostgres, freshDatabase } from "../support/postgres.js"

// A caller of this workflow asks again only an hour after a `Suspended` answer, unless woken by the execution's `done`.
const Slow = Workflow.make("pgreview/WaitsSlow", {
  payload: { id: Schema.String },
  success: Schema.String,
  idempotencyKey: (payload) => payload.id,
  suspendedRetrySchedule: Schedule.spaced(Duration.hours(1))
})
const opened = DurableDeferred.make("opened", { success: Schema.String })
const slowHandler = Slow.toLayer(Effect.fnUntraced(function*() {
  return `opened by ${yield* DurableDeferred.await(opened)}`
}))

/**
 * The admin's SQL client, whose next `SELECT result FROM …` (`answerStored`'s read of the row), once armed, answers
 * only when the test releases it (after saying it has read).
 */
const holdingReads = (sql: SqlClient.SqlClient) => {
  let armed: { readonly read: Deferred.Deferred<void>; readonly release: Deferred.Deferred<void> } | undefined
  const wrap = (inner: any): any =>
    new Proxy(inner, {
      apply(target, thisArg, args) {
        const statement: Effect.Effect<unknown, unknown> = Reflect.apply(target, thisArg, args)
        const strings = args[0]
        const hold = armed
        if (hold === undefined || !Array.isArray(strings) || !strings.join("?").startsWith("SELECT result FROM")) return statement
        armed = undefined
        return Effect.tap(statement, () => Effect.andThen(Deferred.succeed(hold.read, undefined), Deferred.await(hold.release)))
      },
      get(target, key) {
        if (key === "withoutTransforms") return () => wrap(target.withoutTransforms())
        const value = Reflect.get(target, key)
        return typeof value === "function" ? value.bind(target) : value
      }
    })
  return {
    sql: wrap(sql) as SqlClient.SqlClient,
    arm: Effect.gen(function*() {
      const hold = { read: yield* Deferred.make<void>(), release: yield* Deferred.make<void>() }
      armed = hold
      return hold
    })
  }
}

/**
 * A fresh database with a runner of `Slow`, and a client engine built here on the admin's SQL client (its reads of the
 * row held when armed): the call of `Slow` for `id` on that engine, and its execution id.
 */
const setUp = (id: string) =>
  Effect.gen(function*() {
    const url = yield* freshDatabase
    const admin = yield* adminOn(url)
    yield* buildIn(runnerWith(url, slowHandler, { heartbeat: Duration.millis(200) }))
    const reads = holdingReads(admin)
    const { engine, hooks } = yield* Engine.build({ clientOnly: true, sharing: { runner: undefined, channel: "valet_workflow" } }).pipe(
      Effect.provideService(SqlClient.SqlClient, reads.sql),
      Effect.orDie
    )
    const call = Slow.execute({ id }).pipe(Effect.provideService(WorkflowEngine.WorkflowEngine, engine))
    return { admin, reads, engine, hooks, call, executionId: yield* Slow.executionId({ id }) }
  })

describePostgres("Durable on PostgreSQL, a client's waits (review)", () => {
  it.live("a caller between its read and its wait is woken by the done when another caller of the same execution gave up", () =>
    Effect.gen(function*() {
      const { admin, reads, engine, hooks, call, executionId } = yield* setUp("w1")

      // A: stores the execution and waits on it (`asked` holds it); the runner runs it up to its decision.
      const a = yield* Effect.forkScoped(call)
      yield* until("the run waits for its decision", rowOf(admin, executionId), (row) => row?.suspended != null)
      expect(Engine.pendingWaits(engine)).toBe(1)

      // B: asks too; its read of the row (no result yet) is held before it answers `Suspended`.
      const hold = yield* reads.arm
      const b = yield* Effect.forkScoped(call)
      yield* Deferred.await(hold.read)

      // A gives up (its wait is interrupted: `asked` drops the execution, for B too).
      yield* Fiber.interrupt(a)
      // The run completes; its `done` reaches the client while B is between its read and its wait.
      yield* decide(Slow, opened, executionId, "the test").pipe(Effect.provideService(WorkflowEngine.WorkflowEngine, engine))
      yield* until("the result is stored", rowOf(admin, executionId), (row) => row?.result != null)
      yield* hooks.heard(`done ${executionId}`)

      // B answers `Suspended` and waits: the `done` it came after must wake it, not its schedule an hour later.
      yield* Deferred.succeed(hold.release, undefined)
      const answered = yield* within(Effect.sync(() => b.pollUnsafe()), (exit) => exit !== undefined, 60)
      expect(answered).toBe(true)
      expect(yield* Fiber.join(b)).toBe("opened by the test")
    }).pipe(Effect.scoped), 60_000)

  // Before db30752 too (not made by it): a caller that reads the result drops the wait another caller is parked on,
  // when its read comes before the owner's `done` reaches this process; that `done` then finds no wait to complete.
  it.live("a caller parked on the wait is woken when another caller reads the result before the done arrives", () =>
    Effect.gen(function*() {
      const { admin, engine, hooks, call, executionId } = yield* setUp("w2")

      // B: stores the execution and waits on it; the runner runs it up to its decision.
      const b = yield* Effect.forkScoped(call)
      yield* until("the run waits for its decision", rowOf(admin, executionId), (row) => row?.suspended != null)
      yield* decide(Slow, opened, executionId, "the test").pipe(Effect.provideService(WorkflowEngine.WorkflowEngine, engine))
      yield* until("the result is stored", rowOf(admin, executionId), (row) => row?.result != null)
      // A: asks now, reads the stored result (the owner's `done` has not reached this process yet).
      expect(yield* call).toBe("opened by the test")
      // The `done` arrives: B must be woken by it, not by its schedule an hour later.
      yield* hooks.heard(`done ${executionId}`)
      const answered = yield* within(Effect.sync(() => b.pollUnsafe()), (exit) => exit !== undefined, 60)
      expect(answered).toBe(true)
    }).pipe(Effect.scoped), 60_000)

  // What db30752 set out to drop, left in one case: a caller that gives up while it reads the row (its timeout comes
  // during `execute`, not during `awaitComplete`) leaves the execution in `asked`, so the `done` keeps its wait.
  it.live("a caller that gives up during its read of the row leaves no wait behind once the execution completes", () =>
    Effect.gen(function*() {
      const { admin, reads, engine, hooks, call, executionId } = yield* setUp("w3")

      // C stores the execution, gives up in its wait and asks again at once (a second call, as a retry would)...
      const first = yield* Effect.forkScoped(call)
      yield* until("the run waits for its decision", rowOf(admin, executionId), (row) => row?.suspended != null)
      yield* Fiber.interrupt(first)
      const hold = yield* reads.arm
      const again = yield* Effect.forkScoped(call)
      yield* Deferred.await(hold.read)
      // ...and gives up during that call's read of the row.
      yield* Fiber.interrupt(again)
      yield* decide(Slow, opened, executionId, "the test").pipe(Effect.provideService(WorkflowEngine.WorkflowEngine, engine))
      yield* until("the result is stored", rowOf(admin, executionId), (row) => row?.result != null)
      yield* hooks.heard(`done ${executionId}`)
      expect(Engine.pendingWaits(engine)).toBe(0)
    }).pipe(Effect.scoped), 60_000)
})

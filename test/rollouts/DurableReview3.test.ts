/**
 * A third fresh reader's probes of valet's durable engine (engine.ts with engineRunners.ts), after the second
 * review's fixes (`git diff ec9398b -- src/`); its one test failed on a100479 (a load finished after the runner started
 * over was kept, and the execution, taken again, never ran). Runners and clients are built in this one test process on one fresh
 * database (two `Engines.layerPostgresRunner` layers are two runners: each its own pool, held connection and LISTEN).
 */
import { expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Schema, Scope } from "effect"
import { Activity, DurableClock, Workflow } from "effect/workflow"
import { describePostgres, freshDatabase } from "../support/postgres.js"
import { adminOn, buildIn, provided, rowOf, runnerIds, runnerWith, until, within } from "../support/durablePostgres.js"

describePostgres("Durable on PostgreSQL, third review", () => {
  it.live("a runner taken for dead while an adoption loads does not keep that load: the execution, taken again, runs (its clock is set)", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const Nap = Workflow.make("pgreview3/Nap", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      let befores = 0
      const handler = Nap.toLayer(Effect.fnUntraced(function*(payload) {
        yield* Activity.make({ name: "before", success: Schema.Number, execute: Effect.sync(() => ++befores) })
        yield* DurableClock.sleep({ name: "nap", duration: "3 seconds", inMemoryThreshold: Duration.zero })
        return `${payload.id} woke`
      }))
      // Runner A starts g (it runs "before", sets its clock and waits out of memory); runner B is up beside it.
      const aScope = yield* Scope.make()
      const a = yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.millis(200) }), aScope)
      const [aId] = yield* runnerIds(admin)
      const g = yield* Nap.execute({ id: "g" }, { discard: true }).pipe(provided(a))
      yield* until("g waits for its clock", rowOf(admin, g), (row) => row?.suspended != null && row.owner === aId)
      yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.millis(200) }))
      const bId = (yield* runnerIds(admin)).find((id) => id !== aId)!
      // Another session holds the journal table: B's adoption of g (loading its activities) waits there.
      const locked = yield* Deferred.make<void>()
      const released = yield* Deferred.make<void>()
      const holder = yield* admin.withTransaction(Effect.gen(function*() {
        yield* admin`LOCK TABLE valet_workflow_activities IN ACCESS EXCLUSIVE MODE`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(released)
      })).pipe(Effect.orDie, Effect.forkScoped)
      yield* Deferred.await(locked)
      // A stops: g is freed, B takes it and its adoption waits in the load.
      yield* Scope.close(aScope, Exit.void)
      yield* until("B took g", rowOf(admin, g), (row) => row?.owner === bId)
      const waiting = admin<{ readonly n: string }>`SELECT count(*) AS n FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND query LIKE '%valet_workflow_activities%' AND query NOT LIKE '%pg_stat_activity%'`.pipe(Effect.orDie)
      yield* until("B's adoption waits on the journal", waiting, (rows) => Number(rows[0]!.n) >= 1)
      // B is taken for dead meanwhile (frozen past the expiration, as the others see it): g goes to runner X (a live
      // runner as the table has it, on one of the test's connections).
      yield* admin.withTransaction(Effect.andThen(
        admin`INSERT INTO valet_workflow_runners (id, host, pid, backend_pid, heartbeat_at)
          VALUES ('x', 'x', 1, pg_backend_pid(), (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint)`,
        Effect.andThen(
          admin`DELETE FROM valet_workflow_runners WHERE id = ${bId}`,
          admin`UPDATE valet_workflow_executions SET owner = 'x' WHERE execution_id = ${g}`
        )
      )).pipe(Effect.orDie)
      // B's heartbeat finds its row gone: it drops its runs and registers again (its adoption still waits).
      yield* until("B registered again", runnerIds(admin), (ids) => ids.includes(bId))
      // The journal is free: B's stale load of g ends (after B dropped everything).
      yield* Deferred.succeed(released, undefined)
      yield* Fiber.await(holder)
      yield* until("no statement waits", waiting, (rows) => Number(rows[0]!.n) === 0)
      yield* Effect.sleep(Duration.millis(300))
      // X dies: g is free again, B (the only runner) takes it and must run it — its clock fires, it completes.
      yield* admin.withTransaction(Effect.andThen(
        admin`DELETE FROM valet_workflow_runners WHERE id = 'x'`,
        admin`UPDATE valet_workflow_executions SET owner = NULL WHERE execution_id = ${g}`
      )).pipe(Effect.orDie)
      yield* until("B took g again", rowOf(admin, g), (row) => row?.owner === bId)
      const completed = yield* within(rowOf(admin, g), (row) => row?.result != null, 160)
      expect({ completed, befores }).toEqual({ completed: true, befores: 1 })
    }).pipe(Effect.scoped), 60_000)
})

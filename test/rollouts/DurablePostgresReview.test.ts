/**
 * A fresh reader's probes of valet's durable engine shared on PostgreSQL (src/rollouts/internal/durable/engine.ts
 * with engineRunners.ts): runners and clients built in this one test process on one fresh database. Two
 * `Engines.layerPostgresRunner` layers built here are two runners (each its own pool, held connection and LISTEN).
 *
 * A "reap" (a runner taken for dead) is either made by another runner (its short `expiration`) or written by the
 * test exactly as `engineRunners.ts`'s `reap` writes it (the runner's row deleted, its open executions freed).
 *
 * Eight of these failed on the first version of the shared engine (887235a; the graceful stop's is a race that
 * failed 4 runs of 5): a runner taken for dead wrote its late activity into the new owner's journal; an execution it
 * stored as its own meanwhile was stranded; a runner whose held connection ended never learnt it; a deferred
 * committed out of sequence order, or between a taking and its adoption, was passed over; a workflow a runner does
 * not register was kept, never run; a caller saw an interrupt when the run moved; executions taken while a runner
 * stopped stayed with it. The other four passed and stay as checks.
 */
import { expect, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Schema, Scope } from "effect"
import { Activity, DurableDeferred, Workflow } from "effect/workflow"
import { exitText } from "../../src/rollouts/internal/durable/engineCodecs.js"
import * as Engines from "../../src/rollouts/internal/durable/engines.js"
import { describePostgres, freshDatabase } from "../support/postgres.js"
import { adminOn, buildIn, holdResumes, Gate, gateHandler, latched, opened, provided, reap, rowOf, runnerIds, runnerWith, slowAndFast, until, within } from "../support/durablePostgres.js"

describePostgres("Durable on PostgreSQL, reviewed", () => {
  it.live("a client's executions, spread over two runners, each run once and answered to the client", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const runs = new Map<string, number>()
      const Count = Workflow.make("pgreview/Count", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const handler = Count.toLayer(Effect.fnUntraced(function*({ id }) {
        const value = yield* Activity.make({
          name: "count",
          success: Schema.Number,
          execute: Effect.sync(() => {
            const n = (runs.get(id) ?? 0) + 1
            runs.set(id, n)
            return n
          })
        })
        return `${id}:${value}`
      }))
      yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.millis(200) }))
      yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.millis(200) }))
      const client = yield* buildIn(Engines.layerPostgresClient({ url }))
      const ids = Array.from({ length: 20 }, (_, i) => `c${i}`)
      const results = yield* Effect.forEach(ids, (id) => Count.execute({ id }).pipe(provided(client)), { concurrency: "unbounded" })
      expect(results).toEqual(ids.map((id) => `${id}:1`))
      expect([...runs.values()].every((n) => n === 1)).toBe(true)
    }).pipe(Effect.scoped), 60_000)

  it.live("a runner taken for dead stores nothing: its activity's late result does not enter the journal its successor's run answers from", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const w = latched("pgreview/Frozen")
      // A beats once a minute: to B (expiration 1 s) it is frozen, while its fibers go on (as after SIGCONT, before
      // its tick has run).
      const a = yield* buildIn(runnerWith(url, w.handler, { heartbeat: Duration.minutes(1) }))
      const [aId] = yield* runnerIds(admin)
      const executionId = yield* w.workflow.execute({ id: "f1" }, { discard: true }).pipe(provided(a))
      yield* until("A runs the activity", Effect.sync(() => w.calls.length), (n) => n === 1)
      yield* buildIn(runnerWith(url, w.handler, { heartbeat: Duration.millis(100), expiration: Duration.seconds(1) }))
      // B reaps A and replays the execution: the activity runs there too (it was in flight: at least once).
      const taken = yield* until("B takes the execution", rowOf(admin, executionId), (row) => row !== undefined && row.owner !== null && row.owner !== aId)
      yield* until("B runs the activity again", Effect.sync(() => w.calls.length), (n) => n === 2)
      // A's call ends first: A no longer owns the execution, so it must store nothing.
      yield* Deferred.succeed(w.calls[0]!, "from A")
      yield* Effect.sleep(Duration.millis(500))
      yield* Deferred.succeed(w.calls[1]!, "from B")
      const done = yield* until("the result is stored", rowOf(admin, executionId), (row) => row?.result != null)
      expect(done.owner).toBe(taken.owner)
      expect(done.result).toContain("from B")
      const journal = yield* admin<{ readonly exit: string }>`SELECT exit FROM valet_workflow_activities WHERE execution_id = ${executionId}`.pipe(Effect.orDie)
      // The journal a replay answers from must agree with what the run that stored the result saw.
      expect(journal.map((row) => row.exit).join()).not.toContain("from A")
    }).pipe(Effect.scoped), 60_000)

  it.live("an execution a runner stored as its own after it was reaped, before its tick noticed, is run (not stranded with the re-registered runner)", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const w = latched("pgreview/Stranded")
      const { a, aId, beatOf } = yield* slowAndFast(url, admin, w.handler)
      // Right after A's beat (its next tick is a second away): another runner reaps it, and A, not knowing yet,
      // starts a run of its own (a child, a start it heard: the execution stored with owner A).
      const first = yield* beatOf
      yield* until("A beats", beatOf, (beat) => beat !== first)
      yield* reap(admin, aId!)
      const executionId = yield* w.workflow.execute({ id: "s1" }, { discard: true }).pipe(provided(a))
      // Stored as A's. On a loaded machine a tick may have freed it by the time this reads it (the fast runner's: its
      // owner is not registered; or A's own, having noticed the reap): owner null. Either way the execution must not
      // stay stranded, which is what follows.
      expect([aId, null]).toContain((yield* rowOf(admin, executionId))?.owner)
      // A's tick finds its row gone: it drops its runs and registers again.
      yield* until("A registers again", runnerIds(admin), (ids) => ids.includes(aId!))
      for (const call of w.calls) yield* Deferred.succeed(call, "done")
      // Some live runner must run it.
      const completed = yield* within(rowOf(admin, executionId), (row) => row?.result != null, 100)
      const row = yield* rowOf(admin, executionId)
      expect({ completed, owner: row?.owner === aId ? "A (re-registered, runs nothing of it)" : row?.owner }).toMatchObject({ completed: true })
    }).pipe(Effect.scoped), 60_000)

  it.live("a runner whose held connection is ended notices it is dead to the others: it drops its runs and registers again on a live session", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const w = latched("pgreview/Severed")
      const a = yield* buildIn(runnerWith(url, w.handler, { heartbeat: Duration.millis(200) }))
      const [aId] = yield* runnerIds(admin)
      yield* buildIn(runnerWith(url, w.handler, { heartbeat: Duration.millis(200) }))
      const executionId = yield* w.workflow.execute({ id: "x1" }, { discard: true }).pipe(provided(a))
      yield* until("A runs the activity", Effect.sync(() => w.calls.length), (n) => n === 1)
      // The session A's liveness hangs on ends (a network blip, an idle-session timeout, pg_terminate_backend).
      yield* admin`SELECT pg_terminate_backend(backend_pid) FROM valet_workflow_runners WHERE id = ${aId!}`.pipe(Effect.orDie)
      // B reaps A (its session is gone), or A notices first and frees it: either way the execution is taken again,
      // by B or by A on its new session, and its activity runs again.
      yield* until("its activity runs again", Effect.sync(() => w.calls.length), (n) => n === 2)
      expect((yield* rowOf(admin, executionId))?.owner).not.toBeNull()
      // A must stop its first run and come back as a live runner.
      const liveAgain = admin<{ readonly id: string }>`SELECT id FROM valet_workflow_runners WHERE id = ${aId!}
        AND backend_pid IN (SELECT pid FROM pg_stat_activity)`.pipe(Effect.orDie)
      const dropped = yield* within(Effect.sync(() => w.interrupts()), (n) => n >= 1, 60)
      const back = yield* within(liveAgain, (rows) => rows.length === 1, 40)
      expect({ droppedItsRun: dropped, registeredAgain: back }).toEqual({ droppedItsRun: true, registeredAgain: true })
    }).pipe(Effect.scoped), 60_000)

  it.live("a deferred whose row commits after a later one's (sequence order is not commit order) still reaches the run", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const runner = yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200) }))
      const client = yield* buildIn(Engines.layerPostgresClient({ url }))
      const x1 = yield* Gate.execute({ id: "q1" }, { discard: true }).pipe(provided(runner))
      const x2 = yield* Gate.execute({ id: "q2" }, { discard: true }).pipe(provided(runner))
      yield* until("both wait", Effect.all([rowOf(admin, x1), rowOf(admin, x2)]), ([r1, r2]) => r1?.suspended != null && r2?.suspended != null)
      // One writer's INSERT takes its seq and has not committed yet (another client's decision, a moment slower)...
      const text = yield* exitText(Exit.succeed("the slow client"))
      const inserted = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const slow = yield* admin.withTransaction(Effect.gen(function*() {
        yield* admin`INSERT INTO valet_workflow_deferreds (execution_id, name, exit) VALUES (${x1}, ${opened.name}, ${text})`
        yield* Deferred.succeed(inserted, undefined)
        yield* Deferred.await(release)
      })).pipe(Effect.orDie, Effect.forkScoped)
      yield* Deferred.await(inserted)
      // ...while another's, with a later seq, commits and is read by the runner.
      yield* DurableDeferred.succeed(opened, { token: DurableDeferred.tokenFromExecutionId(opened, { workflow: Gate, executionId: x2 }), value: "the quick client" }).pipe(provided(client))
      yield* until("the quick one completes", rowOf(admin, x2), (row) => row?.result != null)
      // The slow one commits and says so, as the client engine does after its INSERT.
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.await(slow)
      yield* admin`SELECT pg_notify('valet_workflow', ${`wake ${x1}`})`.pipe(Effect.orDie)
      const completed = yield* within(rowOf(admin, x1), (row) => row?.result != null, 60)
      expect(completed).toBe(true)
    }).pipe(Effect.scoped), 60_000)

  it.live("a decision a client stores right after it started the execution reaches the run", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200) }))
      const client = yield* buildIn(Engines.layerPostgresClient({ url }))
      const ids = Array.from({ length: 40 }, (_, i) => `d${i}`)
      const executions = yield* Effect.forEach(ids, (id) =>
        Effect.gen(function*() {
          const executionId = yield* Gate.execute({ id }, { discard: true })
          yield* DurableDeferred.succeed(opened, { token: DurableDeferred.tokenFromExecutionId(opened, { workflow: Gate, executionId }), value: "the client" })
          return executionId
        }).pipe(provided(client)), { concurrency: 4 })
      const open = admin<{ readonly execution_id: string }>`SELECT execution_id FROM valet_workflow_executions WHERE result IS NULL`.pipe(Effect.orDie)
      yield* within(open, (rows) => rows.length === 0, 100)
      const stuck = (yield* open).map((row) => row.execution_id)
      const stored = yield* admin<{ readonly n: string }>`SELECT count(*) AS n FROM valet_workflow_deferreds`.pipe(Effect.orDie)
      expect(Number(stored[0]!.n)).toBe(executions.length)
      // Every decision is stored; every run must have seen it.
      expect(stuck).toEqual([])
    }).pipe(Effect.scoped), 60_000)
  it.live("decisions stored while a runner takes over a stopped runner's executions reach their runs", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const client = yield* buildIn(Engines.layerPostgresClient({ url }))
      const ids = Array.from({ length: 80 }, (_, i) => `t${i}`)
      // Runner A starts them; each waits for its decision. A stops (its executions freed for the others).
      const aScope = yield* Scope.make()
      const a = yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200) }), aScope)
      const executions = yield* Effect.forEach(ids, (id) => Gate.execute({ id }, { discard: true }).pipe(provided(a)))
      const suspended = admin<{ readonly n: string }>`SELECT count(*) AS n FROM valet_workflow_executions WHERE suspended IS NOT NULL`.pipe(Effect.orDie)
      yield* until("all wait", suspended, (rows) => Number(rows[0]!.n) === ids.length)
      yield* Scope.close(aScope, Exit.void)
      // Runner B starts (its first tick takes all 40 at once, then adopts them 8 at a time) while a client decides
      // every one of them.
      yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200) }))
      // The moment B's take is committed (no pause between the looks).
      const owned = admin<{ readonly n: string }>`SELECT count(*) AS n FROM valet_workflow_executions WHERE owner IS NOT NULL`.pipe(Effect.orDie)
      for (let look = 0; look < 5000 && Number((yield* owned)[0]!.n) === 0; look++) yield* Effect.yieldNow
      yield* Effect.forEach(executions, (executionId) =>
        DurableDeferred.succeed(opened, { token: DurableDeferred.tokenFromExecutionId(opened, { workflow: Gate, executionId }), value: "the client" }).pipe(provided(client)), { concurrency: "unbounded", discard: true })
      const open = admin<{ readonly execution_id: string }>`SELECT execution_id FROM valet_workflow_executions WHERE result IS NULL`.pipe(Effect.orDie)
      yield* within(open, (rows) => rows.length === 0, 100)
      const stuck = (yield* open).map((row) => row.execution_id)
      // Every decision is stored; every run must have seen it.
      expect(stuck).toEqual([])
    }).pipe(Effect.scoped), 60_000)
  it.live("a decision stored between a runner's take of an execution and its adoption reaches the run", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const client = yield* buildIn(Engines.layerPostgresClient({ url }))
      const decide = (executionId: string) =>
        DurableDeferred.succeed(opened, { token: DurableDeferred.tokenFromExecutionId(opened, { workflow: Gate, executionId }), value: "the client" }).pipe(provided(client))
      // Runner A starts 16 executions, then y; each waits for its decision. A stops (they are freed).
      const aScope = yield* Scope.make()
      const a = yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200) }), aScope)
      const xs = yield* Effect.forEach(Array.from({ length: 16 }, (_, i) => `x${i}`), (id) => Gate.execute({ id }, { discard: true }).pipe(provided(a)))
      const y = yield* Gate.execute({ id: "y" }, { discard: true }).pipe(provided(a))
      const suspended = admin<{ readonly n: string }>`SELECT count(*) AS n FROM valet_workflow_executions WHERE suspended IS NOT NULL`.pipe(Effect.orDie)
      yield* until("all wait", suspended, (rows) => Number(rows[0]!.n) === xs.length + 1)
      yield* Scope.close(aScope, Exit.void)
      // The x's have a resume asked (as `valet runs resume` would); their rows are held a moment by another session, so
      // the adoptions (8 at a time) are slow, as on a busy server: y waits for its turn, taken but not yet adopted.
      const held = yield* holdResumes(admin, xs)
      yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200) }))
      yield* until("B takes y", rowOf(admin, y), (row) => row?.owner != null)
      // Decided now: y's (not yet adopted), then x0's (adopted: its wake makes B read the new deferreds).
      yield* decide(y)
      yield* decide(xs[0]!)
      yield* Effect.sleep(Duration.millis(300))
      yield* held.release
      const completed = yield* within(rowOf(admin, y), (row) => row?.result != null, 60)
      expect(completed).toBe(true)
    }).pipe(Effect.scoped), 60_000)
  it.live("a workflow a runner starts but does not register is run by a runner that does (not kept, never run, by the one that started it)", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const Only = Workflow.make("pgreview/OnlyOnB", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const onlyHandler = Only.toLayer(({ id }) => Effect.succeed(`ran ${id}`))
      // A runs Gate only; B runs OnlyOnB. A starts an OnlyOnB (as a parent starts a child of another kind, or a
      // service that embeds a runner starts work).
      const a = yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200) }))
      const [aId] = yield* runnerIds(admin)
      yield* buildIn(runnerWith(url, onlyHandler, { heartbeat: Duration.millis(200) }))
      const executionId = yield* Only.execute({ id: "o1" }, { discard: true }).pipe(provided(a))
      const completed = yield* within(rowOf(admin, executionId), (row) => row?.result != null, 80)
      const row = yield* rowOf(admin, executionId)
      expect({ completed, ownedByA: row?.owner === aId }).toEqual({ completed: true, ownedByA: false })
    }).pipe(Effect.scoped), 60_000)

  it.live("a caller waiting on a runner's execution gets its result when the run moves to another runner (not an interrupt)", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const w = latched("pgreview/Moved")
      const { a, aId, beatOf } = yield* slowAndFast(url, admin, w.handler)
      const caller = yield* w.workflow.execute({ id: "m1" }).pipe(provided(a), Effect.exit, Effect.forkScoped)
      yield* until("A runs the activity", Effect.sync(() => w.calls.length), (n) => n === 1)
      const executionId = yield* w.workflow.executionId({ id: "m1" })
      // A is taken for dead (as after a freeze): B replays the execution; A's tick drops A's run.
      const first = yield* beatOf
      yield* until("A beats", beatOf, (beat) => beat !== first)
      yield* reap(admin, aId!)
      yield* until("B takes the execution", rowOf(admin, executionId), (row) => row?.owner != null && row.owner !== aId)
      yield* until("B runs the activity again", Effect.sync(() => w.calls.length), (n) => n === 2)
      yield* until("A registers again", runnerIds(admin), (ids) => ids.includes(aId!))
      for (const call of w.calls) yield* Deferred.succeed(call, "done")
      yield* until("the result is stored", rowOf(admin, executionId), (row) => row?.result != null)
      const exit = yield* Fiber.join(caller)
      expect(Exit.isSuccess(exit) ? exit.value : `failed: ${Cause.pretty(exit.cause).split("\n")[0]}`).toBe("done")
    }).pipe(Effect.scoped), 60_000)

  it.live("a client's interrupt and a client's decision reach the runner that owns the execution", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const runner = yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200) }))
      const client = yield* buildIn(Engines.layerPostgresClient({ url }))
      const x1 = yield* Gate.execute({ id: "i1" }, { discard: true }).pipe(provided(runner))
      const x2 = yield* Gate.execute({ id: "i2" }, { discard: true }).pipe(provided(runner))
      yield* until("both wait", Effect.all([rowOf(admin, x1), rowOf(admin, x2)]), ([r1, r2]) => r1?.suspended != null && r2?.suspended != null)
      yield* Gate.interrupt(x1).pipe(provided(client))
      yield* DurableDeferred.succeed(opened, { token: DurableDeferred.tokenFromExecutionId(opened, { workflow: Gate, executionId: x2 }), value: "the client" }).pipe(provided(client))
      const r1 = yield* until("x1 ends", rowOf(admin, x1), (row) => row?.result != null)
      const r2 = yield* until("x2 ends", rowOf(admin, x2), (row) => row?.result != null)
      expect(r1.result).toContain("Interrupt")
      expect(r2.result).toContain("opened by the client")
      // And a client's call on a stored execution answers it.
      expect(yield* Gate.execute({ id: "i2" }).pipe(provided(client))).toBe("opened by the client")
    }).pipe(Effect.scoped), 60_000)
  it.live("executions started while a runner stops gracefully are all run by the runner left (none kept by the stopped one)", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const Quick = Workflow.make("pgreview/Quick", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const quickHandler = Quick.toLayer(({ id }) => Effect.succeed(id))
      const aScope = yield* Scope.make()
      yield* buildIn(runnerWith(url, quickHandler, { heartbeat: Duration.millis(200) }), aScope)
      yield* buildIn(runnerWith(url, quickHandler, { heartbeat: Duration.millis(200) }))
      const client = yield* buildIn(Engines.layerPostgresClient({ url }))
      const ids = Array.from({ length: 500 }, (_, i) => `g${i}`)
      let started = 0
      const starting = yield* Effect.forEach(ids, (id) => Quick.execute({ id }, { discard: true }).pipe(provided(client), Effect.tap(() => Effect.sync(() => void started++))), { concurrency: 6, discard: true }).pipe(Effect.forkScoped)
      yield* until("some started", Effect.sync(() => started), (n) => n >= 30)
      yield* Scope.close(aScope, Exit.void)
      yield* Fiber.join(starting)
      const open = admin<{ readonly execution_id: string; readonly owner: string | null }>`SELECT execution_id, owner FROM valet_workflow_executions WHERE result IS NULL`.pipe(Effect.orDie)
      yield* within(open, (rows) => rows.length === 0, 100)
      const runners = yield* runnerIds(admin)
      const stuck = (yield* open).map((row) => `${row.execution_id} owner ${row.owner === null ? "none" : runners.includes(row.owner) ? "live" : "gone"}`)
      expect(stuck).toEqual([])
    }).pipe(Effect.scoped), 60_000)
})

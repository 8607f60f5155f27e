/**
 * A second fresh reader's probes of valet's durable engine shared on PostgreSQL (engine.ts with engineRunners.ts),
 * after the first review's fixes. Runners and clients are built in this one test process on one fresh database (two
 * `Engines.layerPostgresRunner` layers are two runners: each its own pool, held connection and LISTEN).
 */
import { expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Schema, Scope } from "effect"
import { Activity, DurableDeferred, Workflow } from "effect/workflow"
import { exitText } from "../../src/rollouts/internal/durable/engineCodecs.js"
import * as Engines from "../../src/rollouts/internal/durable/engines.js"
import { describePostgres, freshDatabase } from "../support/postgres.js"
import { adminOn, buildIn, waitForLatch, holdResumes, decide, Gate, gateHandler, journalOf, opened, provided, rowOf, runnerIds, runnerWith, until, within } from "../support/durablePostgres.js"

describePostgres("Durable on PostgreSQL, second review", () => {
  it.live("a runner taken for dead whose run ends (its result fenced out) does not sweep the journal the new owner replays from", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const Swept = Workflow.make("pgreview2/Swept", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const more = DurableDeferred.make("more", { success: Schema.String })
      let firstRuns = 0
      const calls: Array<Deferred.Deferred<string>> = []
      const handler = Swept.toLayer(Effect.fnUntraced(function*() {
        yield* Activity.make({ name: "first", success: Schema.Number, execute: Effect.sync(() => ++firstRuns) })
        const second = yield* Activity.make({
          name: "second",
          success: Schema.String,
          // The first two calls (A's, B's replay's) wait for the test; a later one answers at once.
          execute: Effect.suspend(() => {
            const latch = Deferred.makeUnsafe<string>()
            calls.push(latch)
            return calls.length > 2 ? Effect.succeed("wait") : Deferred.await(latch)
          })
        })
        if (second === "finish") return "finished"
        return `more: ${yield* DurableDeferred.await(more)}`
      }))
      // A beats once a minute: to B (expiration 1 s) it is frozen, while its fibers go on.
      const a = yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.minutes(1) }))
      const executionId = yield* Swept.execute({ id: "s1" }, { discard: true }).pipe(provided(a))
      yield* until("A waits in its second activity", Effect.sync(() => calls.length), (n) => n === 1)
      yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.millis(100), expiration: Duration.seconds(1) }))
      const client = yield* buildIn(Engines.layerPostgresClient({ url }))
      // B reaps A and replays: "first" answers from the journal, "second" runs again (it was in flight).
      yield* until("B runs the second activity again", Effect.sync(() => calls.length), (n) => n === 2)
      expect(firstRuns).toBe(1)
      yield* Deferred.succeed(calls[1]!, "wait")
      yield* until("B's run waits for more", rowOf(admin, executionId), (row) => row?.suspended != null)
      expect(yield* journalOf(admin, executionId)).toEqual(["first/1", "second/1"])
      // A's late call ends: its run completes in A's memory; its result is fenced out (A owns nothing)...
      yield* Deferred.succeed(calls[0]!, "finish")
      // ...and its sweep (within 5 s) must not delete the journal of the execution B still runs.
      const lost = yield* within(journalOf(admin, executionId), (journal) => journal.length === 0, 160)
      yield* decide(Swept, more, executionId, "the client").pipe(provided(client))
      const done = yield* until("the result is stored", rowOf(admin, executionId), (row) => row?.result != null)
      expect({ journalSweptWhileOpen: lost, firstRuns, result: done.result?.includes("more: the client") }).toEqual({ journalSweptWhileOpen: false, firstRuns: 1, result: true })
    }).pipe(Effect.scoped), 60_000)

  it.live("an execution woken between its take and its adoption, run and suspended meanwhile, is not adopted as never run (its activities not run again)", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const Fresh = Workflow.make("pgreview2/Fresh", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const go = DurableDeferred.make("go", { success: Schema.String })
      const second = DurableDeferred.make("second", { success: Schema.String })
      let counted = 0
      const freshHandler = Fresh.toLayer(Effect.fnUntraced(function*() {
        yield* DurableDeferred.await(go)
        yield* Activity.make({ name: "count", success: Schema.Number, execute: Effect.sync(() => ++counted) })
        return yield* DurableDeferred.await(second)
      }))
      const handlers = Layer.mergeAll(gateHandler, freshHandler)
      const client = yield* buildIn(Engines.layerPostgresClient({ url }))
      // Runner A starts 16 Gates (each waits for its decision), then stops: they are freed.
      const aScope = yield* Scope.make()
      const a = yield* buildIn(runnerWith(url, handlers, { heartbeat: Duration.millis(200) }), aScope)
      const xs = yield* Effect.forEach(Array.from({ length: 16 }, (_, i) => `x${i}`), (id) => Gate.execute({ id }, { discard: true }).pipe(provided(a)))
      const suspended = admin<{ readonly n: string }>`SELECT count(*) AS n FROM valet_workflow_executions WHERE suspended IS NOT NULL`.pipe(Effect.orDie)
      yield* until("all wait", suspended, (rows) => Number(rows[0]!.n) === xs.length)
      yield* Scope.close(aScope, Exit.void)
      // A client starts f (no runner is up: stored without an owner, never taken).
      const f = yield* Fresh.execute({ id: "f" }, { discard: true }).pipe(provided(client))
      // The Gates have resumes asked whose rows another session holds: their adoptions (8 at a time) wait, and f,
      // taken in the same take, waits for its turn.
      const held = yield* holdResumes(admin, xs)
      // Connections enough that the 8 waiting adoptions leave some for the rest of B's work.
      yield* buildIn(runnerWith(url, handlers, { heartbeat: Duration.millis(200), maxConnections: 20 }))
      yield* until("B takes f", rowOf(admin, f), (row) => row?.owner != null)
      // Not adopted yet (adopted, it would run and wait for "go": its suspension stored).
      const adoptedEarly = yield* within(rowOf(admin, f), (row) => row?.suspended != null, 10)
      expect(adoptedEarly).toBe(false)
      // Decided now: the wake loads f (B marked it its own), runs it: "count" runs and is stored; it waits again.
      yield* decide(Fresh, go, f, "the client").pipe(provided(client))
      yield* until("f counted and waits for second", Effect.all([Effect.sync(() => counted), rowOf(admin, f)]), ([n, row]) => n === 1 && row?.suspended != null)
      expect(yield* journalOf(admin, f)).toEqual(["count/1"])
      // The adoptions go on: f's, from its row as taken (takes = 1, "never run"), must not run "count" again.
      yield* held.release
      yield* until("the Gates are adopted", admin<{ readonly n: string }>`SELECT count(*) AS n FROM valet_workflow_resumes`.pipe(Effect.orDie), (rows) => Number(rows[0]!.n) === 0)
      const again = yield* within(Effect.sync(() => counted), (n) => n > 1, 40)
      expect({ countRanAgain: again, counted }).toEqual({ countRanAgain: false, counted: 1 })
    }).pipe(Effect.scoped), 60_000)

  it.live("a deferred that commits after a later one and whose wake is lost is still taken by the tick (a lost notification delays, never loses)", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200) }))
      const [runnerId] = yield* runnerIds(admin)
      const r = yield* buildIn(Engines.layerPostgresClient({ url }))
      // Two executions the runner owns (started by a client, taken by the only runner), both waiting.
      const x1 = yield* Gate.execute({ id: "l1" }, { discard: true }).pipe(provided(r))
      const x2 = yield* Gate.execute({ id: "l2" }, { discard: true }).pipe(provided(r))
      yield* until("both wait", Effect.all([rowOf(admin, x1), rowOf(admin, x2)]), ([r1, r2]) => r1?.suspended != null && r2?.suspended != null && r1.owner === runnerId)
      const text = (value: string) => exitText(Exit.succeed(value))
      // Decisions written with no NOTIFY (as when the runner's LISTEN connection was down when they were said):
      // x1's takes its seq first and commits last.
      const inserted = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const slow = yield* admin.withTransaction(Effect.gen(function*() {
        yield* admin`INSERT INTO valet_workflow_deferreds (execution_id, name, exit) VALUES (${x1}, ${opened.name}, ${yield* text("slow")})`
        yield* Deferred.succeed(inserted, undefined)
        yield* Deferred.await(release)
      })).pipe(Effect.orDie, Effect.forkScoped)
      yield* Deferred.await(inserted)
      yield* admin`INSERT INTO valet_workflow_deferreds (execution_id, name, exit) VALUES (${x2}, ${opened.name}, ${yield* text("quick")})`.pipe(Effect.orDie)
      // The tick finds x2's.
      yield* until("x2 completes by the tick", rowOf(admin, x2), (row) => row?.result != null)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.await(slow)
      // The tick must find x1's too.
      const completed = yield* within(rowOf(admin, x1), (row) => row?.result != null, 60)
      expect(completed).toBe(true)
    }).pipe(Effect.scoped), 60_000)

  it.live("a runner whose tick waits on a slow adoption still beats (a live runner is not taken for dead while it works)", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const Other = Workflow.make("pgreview2/Other", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const otherHandler = Other.toLayer(({ id }) => Effect.succeed(id))
      // Runner A starts 16 Gates (each waits for its decision), then stops: they are freed.
      const aScope = yield* Scope.make()
      const a = yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200) }), aScope)
      const xs = yield* Effect.forEach(Array.from({ length: 16 }, (_, i) => `h${i}`), (id) => Gate.execute({ id }, { discard: true }).pipe(provided(a)))
      const suspended = admin<{ readonly n: string }>`SELECT count(*) AS n FROM valet_workflow_executions WHERE suspended IS NOT NULL`.pipe(Effect.orDie)
      yield* until("all wait", suspended, (rows) => Number(rows[0]!.n) === xs.length)
      yield* Scope.close(aScope, Exit.void)
      // Their resumes are asked, and held a moment by another session (a busy server): adopting them is slow.
      const held = yield* holdResumes(admin, xs)
      // C runs another workflow (it takes none of the Gates) and takes a runner silent for 1 s for dead.
      yield* buildIn(runnerWith(url, otherHandler, { heartbeat: Duration.millis(100), expiration: Duration.seconds(1) }))
      const before = yield* runnerIds(admin)
      yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200), maxConnections: 20 }))
      const [bId] = (yield* runnerIds(admin)).filter((id) => !before.includes(id))
      yield* until("B takes the Gates", rowOf(admin, xs[0]!), (row) => row?.owner === bId)
      // B is alive and well, its tick waiting on its adoptions: its heartbeat must go on.
      const reaped = yield* within(runnerIds(admin), (ids) => !ids.includes(bId!), 60)
      yield* held.release
      expect(reaped).toBe(false)
    }).pipe(Effect.scoped), 60_000)

  it.live("a runner stopped gracefully in the middle of a run does not run the run's compensations (the run goes on elsewhere)", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const Booked = Workflow.make("pgreview2/Booked", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      let booked = 0
      let compensated = 0
      const calls: Array<Deferred.Deferred<string>> = []
      const handler = Booked.toLayer(Effect.fnUntraced(function*() {
        yield* Activity.make({ name: "book", success: Schema.Number, execute: Effect.sync(() => ++booked) }).pipe(
          Workflow.withCompensation(() => Effect.sync(() => void compensated++))
        )
        return yield* Activity.make({
          name: "pay",
          success: Schema.String,
          execute: waitForLatch(calls)
        })
      }))
      const aScope = yield* Scope.make()
      const a = yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.millis(200) }), aScope)
      yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.millis(200) }))
      const executionId = yield* Booked.execute({ id: "b1" }, { discard: true }).pipe(provided(a))
      yield* until("A pays", Effect.sync(() => calls.length), (n) => n === 1)
      // A stops (a deploy, SIGTERM): its run is interrupted and its execution freed for B, which replays it.
      yield* Scope.close(aScope, Exit.void)
      yield* until("B pays", Effect.sync(() => calls.length), (n) => n === 2)
      yield* Deferred.succeed(calls[1]!, "paid")
      const done = yield* until("the result is stored", rowOf(admin, executionId), (row) => row?.result != null)
      expect({ booked, compensated, result: done.result?.includes("paid") }).toEqual({ booked: 1, compensated: 0, result: true })
    }).pipe(Effect.scoped), 60_000)

  it.live("a caller on a runner taken for dead (not knowing it yet) gets the stored result, not its own run's fenced-out one", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const Answer = Workflow.make("pgreview2/Answer", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const calls: Array<Deferred.Deferred<string>> = []
      const handler = Answer.toLayer(() =>
        Activity.make({
          name: "pick",
          success: Schema.String,
          execute: waitForLatch(calls)
        })
      )
      // A beats once a minute: to B (expiration 1 s) it is frozen, while its fibers go on.
      const a = yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.minutes(1) }))
      const caller = yield* Answer.execute({ id: "r1" }).pipe(provided(a), Effect.exit, Effect.forkScoped)
      yield* until("A runs the activity", Effect.sync(() => calls.length), (n) => n === 1)
      const executionId = yield* Answer.executionId({ id: "r1" })
      yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.millis(100), expiration: Duration.seconds(1) }))
      yield* until("B runs the activity again", Effect.sync(() => calls.length), (n) => n === 2)
      yield* Deferred.succeed(calls[1]!, "from B")
      const done = yield* until("B stores the result", rowOf(admin, executionId), (row) => row?.result != null)
      expect(done.result).toContain("from B")
      // A's call ends now: its run ends, its result is not stored (A owns nothing); its caller must get the stored one.
      yield* Deferred.succeed(calls[0]!, "from A")
      const exit = yield* Fiber.join(caller)
      expect(Exit.isSuccess(exit) ? exit.value : "failed").toBe("from B")
    }).pipe(Effect.scoped), 60_000)

  it.live("guard: on PostgreSQL a run waiting past sweeps keeps its journal; ended, its rows are swept and a call answers its result", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      const Kept = Workflow.make("pgreview2/Kept", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      let before = 0
      const handler = Kept.toLayer(Effect.fnUntraced(function*() {
        yield* Activity.make({ name: "before", execute: Effect.sync(() => void before++) })
        return yield* DurableDeferred.await(opened)
      }))
      yield* buildIn(runnerWith(url, handler, { heartbeat: Duration.millis(200) }))
      const client = yield* buildIn(Engines.layerPostgresClient({ url }))
      const executionId = yield* Kept.execute({ id: "k1" }, { discard: true }).pipe(provided(client))
      yield* until("it waits", rowOf(admin, executionId), (row) => row?.suspended != null)
      // Past a sweep (5 s): still there.
      const swept = yield* within(journalOf(admin, executionId), (journal) => journal.length === 0, 130)
      expect(swept).toBe(false)
      yield* decide(Kept, opened, executionId, "the client").pipe(provided(client))
      yield* until("it ends", rowOf(admin, executionId), (row) => row?.result != null)
      yield* until("its rows are swept", journalOf(admin, executionId), (journal) => journal.length === 0, 160)
      expect(yield* Kept.execute({ id: "k1" }).pipe(provided(client))).toBe("the client")
      expect(before).toBe(1)
    }).pipe(Effect.scoped), 60_000)
})

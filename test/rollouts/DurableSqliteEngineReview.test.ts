/**
 * A fresh reader's probes of the one-process SQLite engine (src/rollouts/internal/durable/engine.ts): what a
 * client beside the running process can do, what a restart does with interrupted, failed and parent/child runs, and
 * races between completions. A "process" here is a scope: closed, its fibers end; a new engine on the same file is
 * the next process. Most are regressions (they failed on eab43dd); the restart of an interrupted or parent/child run,
 * concurrent executes, the data round-trip and a clock fired just before the end held already and stay as checks.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Duration, Effect, Exit, Layer, Option, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"
import { Activity, DurableClock, DurableDeferred, Workflow, WorkflowEngine } from "effect/workflow"
import { hostname } from "node:os"
import { DatabaseSync } from "node:sqlite"
import * as SqliteClient from "../../src/environment/SqliteClient.js"
import * as Engines from "../../src/rollouts/internal/durable/engines.js"
import * as Engine from "../../src/rollouts/internal/durable/engine.js"
import { engineOn, isComplete, tempFile, until } from "../support/sqliteEngine.js"


const settle = Effect.gen(function*() {
  for (let turn = 0; turn < 20; turn++) yield* Effect.yieldNow
})

const valueOf = (result: Option.Option<Workflow.Result<unknown, unknown>>) => {
  const value = Option.getOrThrow(result)
  return value._tag === "Complete" ? value.exit : value
}

const Gate = Workflow.make("review/Gate", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
const opened = DurableDeferred.make("opened", { success: Schema.String })
const gateHandler = Gate.toLayer(Effect.fnUntraced(function*() {
  return `opened by ${yield* DurableDeferred.await(opened)}`
}))

/** A workflow that suspends when it fails (as AgentRun does), failing with a string. */
const suspendsOnFailure = (name: string) =>
  Workflow.make(name, {
    payload: { id: Schema.String },
    success: Schema.String,
    error: Schema.String,
    idempotencyKey: (payload) => payload.id,
    annotations: Context.make(Workflow.SuspendOnFailure, true)
  })

/** A workflow that runs an activity, waits for `opened`, and runs another: each counted in `counts`. */
const beforeAndAfter = (name: string, counts: { before: number; after: number }) => {
  const workflow = Workflow.make(name, { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
  const handler = workflow.toLayer(Effect.fnUntraced(function*() {
    yield* Activity.make({ name: "before", execute: Effect.sync(() => void counts.before++) })
    const answer = yield* DurableDeferred.await(opened)
    yield* Activity.make({ name: "after", execute: Effect.sync(() => void counts.after++) })
    return answer
  }))
  return { workflow, handler }
}

describe("Durable's SQLite engine, reviewed", () => {
  it.effect("the first completion of a deferred wins in the run too: a client's stored answer is not overridden by a later one in the running process", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const running = yield* Layer.build(gateHandler.pipe(Layer.provideMerge(engineOn(file))))
      const client = yield* Layer.build(engineOn(file, { clientOnly: true }))
      const executionId = yield* Gate.execute({ id: "g1" }, { discard: true }).pipe(Effect.provide(running))
      const poll = Gate.poll(executionId).pipe(Effect.provide(running))
      yield* until(poll, Option.isSome)
      const token = DurableDeferred.tokenFromExecutionId(opened, { workflow: Gate, executionId })
      // The client answers first (stored); before the runner's poll finds it, the runner is answered too.
      yield* DurableDeferred.succeed(opened, { token, value: "the client" }).pipe(Effect.provide(client))
      yield* DurableDeferred.succeed(opened, { token, value: "the runner" }).pipe(Effect.provide(running))
      const done = yield* until(poll, isComplete, Duration.millis(250))
      // What the file holds is what a restart replays: the run must have seen the same.
      expect(valueOf(done)).toEqual(Exit.succeed("opened by the client"))
    }).pipe(Effect.scoped))

  it.effect("a client's interrupt reaches the process that runs the workflow", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const running = yield* Layer.build(gateHandler.pipe(Layer.provideMerge(engineOn(file))))
      const client = yield* Layer.build(engineOn(file, { clientOnly: true }))
      const executionId = yield* Gate.execute({ id: "g2" }, { discard: true }).pipe(Effect.provide(running))
      const poll = Gate.poll(executionId).pipe(Effect.provide(running))
      yield* until(poll, Option.isSome)
      yield* Gate.interrupt(executionId).pipe(Effect.provide(client))
      const done = yield* until(poll, isComplete, Duration.millis(250), 40)
      const exit = valueOf(done)
      expect(Exit.isExit(exit) && Exit.hasInterrupts(exit)).toBe(true)
    }).pipe(Effect.scoped))

  it.effect("a client's resume reaches the process that runs the workflow (a run suspended on failure runs again)", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      let runs = 0
      const Flaky = suspendsOnFailure("review/Flaky")
      const handler = Flaky.toLayer(() => Effect.suspend(() => ++runs === 1 ? Effect.fail("down for a moment") : Effect.succeed("up")))
      const running = yield* Layer.build(handler.pipe(Layer.provideMerge(engineOn(file))))
      const client = yield* Layer.build(engineOn(file, { clientOnly: true }))
      const executionId = yield* Flaky.execute({ id: "f1" }, { discard: true }).pipe(Effect.provide(running))
      const poll = Flaky.poll(executionId).pipe(Effect.provide(running))
      yield* until(poll, Option.isSome)
      expect(runs).toBe(1)
      yield* Flaky.resume(executionId).pipe(Effect.provide(client))
      const done = yield* until(poll, isComplete, Duration.millis(250), 40)
      expect(valueOf(done)).toEqual(Exit.succeed("up"))
    }).pipe(Effect.scoped))

  it.effect("a run suspended on failure stays suspended when the process restarts (as on effect/cluster): only a resume runs it again", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      let runs = 0
      const Flaky = suspendsOnFailure("review/Flaky2")
      const handler = Flaky.toLayer(() => Effect.suspend(() => (runs++, Effect.fail("the model is down"))))
      const runner = handler.pipe(Layer.provideMerge(engineOn(file)))
      const first = yield* Scope.make()
      const firstContext = yield* Layer.buildWithScope(runner, first)
      const executionId = yield* Flaky.execute({ id: "f2" }, { discard: true }).pipe(Effect.provide(firstContext))
      yield* until(Flaky.poll(executionId).pipe(Effect.provide(firstContext)), Option.isSome)
      yield* Scope.close(first, Exit.void)
      expect(runs).toBe(1)

      const second = yield* Scope.make()
      const secondContext = yield* Layer.buildWithScope(runner, second)
      for (let turn = 0; turn < 10; turn++) {
        yield* TestClock.adjust(Duration.millis(250))
        yield* settle
      }
      // Not run again by the restart: a failed call is not sent again until someone resumes it.
      expect(runs).toBe(1)
      const polled = Option.getOrThrow(yield* Flaky.poll(executionId).pipe(Effect.provide(secondContext)))
      expect(polled._tag === "Suspended" && polled.failed).toBe(true)
      yield* Flaky.resume(executionId).pipe(Effect.provide(secondContext))
      yield* until(Effect.sync(() => runs), (n) => n === 2)
      yield* Scope.close(second, Exit.void)
    }).pipe(Effect.scoped))

  it.effect("an interrupt during an activity, then the process ends: the restart ends the run interrupted, the activity not run again", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      let started = 0
      const Slow = Workflow.make("review/Slow", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const handler = Slow.toLayer(() =>
        Activity.make({ name: "slow", success: Schema.String, execute: Effect.andThen(Effect.sync(() => started++), Effect.as(Effect.sleep(Duration.hours(1)), "slept")) })
      )
      const runner = handler.pipe(Layer.provideMerge(engineOn(file)))
      const first = yield* Scope.make()
      const firstContext = yield* Layer.buildWithScope(runner, first)
      const executionId = yield* Slow.execute({ id: "s1" }, { discard: true }).pipe(Effect.provide(firstContext))
      yield* until(Effect.sync(() => started), (n) => n === 1)
      yield* Slow.interrupt(executionId).pipe(Effect.provide(firstContext))
      yield* settle
      yield* Scope.close(first, Exit.void)

      const second = yield* Layer.build(runner)
      const done = yield* until(Slow.poll(executionId).pipe(Effect.provide(second)), isComplete)
      const exit = valueOf(done)
      expect(Exit.isExit(exit) && Exit.hasInterrupts(exit)).toBe(true)
      expect(started).toBe(1)
    }).pipe(Effect.scoped))

  it.effect("a parent whose child completed while no process ran: the restart completes both, whichever handler registers first", () =>
    Effect.gen(function*() {
      for (const order of ["parent first", "child first"] as const) {
        const file = yield* tempFile
        const Child = Workflow.make("review/Child", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
        const Parent = Workflow.make("review/Parent", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
        const childHandler = Child.toLayer(Effect.fnUntraced(function*() {
          return `child ${yield* DurableDeferred.await(opened)}`
        }))
        const parentHandler = Parent.toLayer(Effect.fnUntraced(function*(payload) {
          return `parent of ${yield* Child.execute({ id: `${payload.id}-child` })}`
        }))
        const handlers = order === "parent first" ? Layer.mergeAll(parentHandler, childHandler) : Layer.mergeAll(childHandler, parentHandler)
        const runner = handlers.pipe(Layer.provideMerge(engineOn(file)))
        const first = yield* Scope.make()
        const firstContext = yield* Layer.buildWithScope(runner, first)
        const parentId = yield* Parent.execute({ id: "p" }, { discard: true }).pipe(Effect.provide(firstContext))
        const childId = yield* Child.executionId({ id: "p-child" })
        yield* until(Child.poll(childId).pipe(Effect.provide(firstContext)), Option.isSome)
        yield* Scope.close(first, Exit.void)

        // While no process runs it, a client completes the child's deferred.
        const client = yield* Scope.make()
        const clientContext = yield* Layer.buildWithScope(engineOn(file, { clientOnly: true }), client)
        const token = DurableDeferred.tokenFromExecutionId(opened, { workflow: Child, executionId: childId })
        yield* DurableDeferred.succeed(opened, { token, value: "answered" }).pipe(Effect.provide(clientContext))
        yield* Scope.close(client, Exit.void)

        const second = yield* Layer.build(runner)
        const done = yield* until(Parent.poll(parentId).pipe(Effect.provide(second)), isComplete, Duration.millis(250))
        expect([order, valueOf(done)]).toEqual([order, Exit.succeed("parent of child answered")])
      }
    }).pipe(Effect.scoped))

  it.effect("two executes of one new execution at once: one run, both callers get its result", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      let runs = 0
      const Once = Workflow.make("review/Once", { payload: { id: Schema.String }, success: Schema.Number, idempotencyKey: (payload) => payload.id })
      const handler = Once.toLayer(() => Effect.sync(() => ++runs))
      const context = yield* Layer.build(handler.pipe(Layer.provideMerge(engineOn(file))))
      const results = yield* Effect.all([Once.execute({ id: "o" }), Once.execute({ id: "o" })], { concurrency: "unbounded" }).pipe(Effect.provide(context))
      expect(results).toEqual([1, 1])
      expect(runs).toBe(1)
      // And after it was dropped from memory: answered from the file.
      expect(yield* Once.execute({ id: "o" }).pipe(Effect.provide(context))).toBe(1)
      expect(runs).toBe(1)
    }).pipe(Effect.scoped))
  it.effect("a payload, an activity's result and the workflow's result of Date, BigInt, Option and optional fields survive a restart as they were", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const Value = Schema.Struct({ when: Schema.Date, n: Schema.BigInt, maybe: Schema.Option(Schema.String), note: Schema.optional(Schema.String) })
      const Typed = Workflow.make("review/Typed", { payload: { id: Schema.String, value: Value }, success: Schema.Struct({ payload: Value, activity: Value, answer: Schema.String }), idempotencyKey: (payload) => payload.id })
      let ran = 0
      const handler = Typed.toLayer(Effect.fnUntraced(function*(payload) {
        const activity = yield* Activity.make({
          name: "typed",
          success: Value,
          execute: Effect.sync(() => (ran++, { when: new Date(Date.UTC(2026, 0, 2)), n: 2n ** 70n, maybe: Option.none(), note: undefined }))
        })
        const answer = yield* DurableDeferred.await(opened)
        return { payload: payload.value, activity, answer }
      }))
      const runner = handler.pipe(Layer.provideMerge(engineOn(file)))
      const value = { when: new Date(Date.UTC(2025, 11, 31, 23, 59, 59, 999)), n: 12345678901234567890n, maybe: Option.some("x") }
      const first = yield* Scope.make()
      const firstContext = yield* Layer.buildWithScope(runner, first)
      const executionId = yield* Typed.execute({ id: "t1", value }, { discard: true }).pipe(Effect.provide(firstContext))
      yield* until(Typed.poll(executionId).pipe(Effect.provide(firstContext)), Option.isSome)
      yield* Scope.close(first, Exit.void)

      const second = yield* Scope.make()
      const secondContext = yield* Layer.buildWithScope(runner, second)
      yield* settle
      const token = DurableDeferred.tokenFromExecutionId(opened, { workflow: Typed, executionId })
      yield* DurableDeferred.succeed(opened, { token, value: "yes" }).pipe(Effect.provide(secondContext))
      const expected = { payload: value, activity: { when: new Date(Date.UTC(2026, 0, 2)), n: 2n ** 70n, maybe: Option.none() }, answer: "yes" }
      const done = yield* until(Typed.poll(executionId).pipe(Effect.provide(secondContext)), isComplete)
      expect(valueOf(done)).toEqual(Exit.succeed(expected))
      expect(ran).toBe(1)
      yield* Scope.close(second, Exit.void)
      // Answered from the file by a later process.
      const third = yield* Layer.build(runner)
      expect(yield* Typed.execute({ id: "t1", value }).pipe(Effect.provide(third))).toEqual(expected)
    }).pipe(Effect.scoped))
  it.effect("a second running process on the same file is refused while the first runs (each activity runs once); a client beside it is not, and once the first ends the next takes the file", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const counts = { before: 0, after: 0 }
      const { handler, workflow: Twice } = beforeAndAfter("review/Twice", counts)
      const runner = handler.pipe(Layer.provideMerge(engineOn(file)))
      const first = yield* Scope.make()
      const a = yield* Layer.buildWithScope(runner, first)
      const executionId = yield* Twice.execute({ id: "w1" }, { discard: true }).pipe(Effect.provide(a))
      yield* until(Twice.poll(executionId).pipe(Effect.provide(a)), Option.isSome)
      // Another running engine on the same file (a second evaluation with the same --store) while the first runs.
      const refused = yield* Effect.flip(Layer.build(runner))
      expect(refused._tag).toBe("FileClaimed")
      expect(refused.message).toMatch(new RegExp(`^another process runs this file's workflows \\(pid ${process.pid} on `))
      const client = yield* Layer.build(engineOn(file, { clientOnly: true }))
      const token = DurableDeferred.tokenFromExecutionId(opened, { workflow: Twice, executionId })
      yield* DurableDeferred.succeed(opened, { token, value: "go" }).pipe(Effect.provide(client))
      yield* until(Twice.poll(executionId).pipe(Effect.provide(a)), isComplete, Duration.millis(250))
      expect(counts).toEqual({ before: 1, after: 1 })
      // The first ends: its claim goes with it, and the next running engine opens the file.
      yield* Scope.close(first, Exit.void)
      const next = yield* Layer.build(runner)
      expect(yield* Twice.execute({ id: "w1" }).pipe(Effect.provide(next))).toBe("go")
      expect(counts).toEqual({ before: 1, after: 1 })
    }).pipe(Effect.scoped))
  it.effect("a claim left by a process that is gone (killed: its pid no longer runs) is taken over at once", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      yield* Effect.scoped(Layer.build(engineOn(file)))
      // The row a killed process leaves: its pid, which no process has now.
      const db = new DatabaseSync(file)
      db.prepare("INSERT INTO valet_workflow_runner (id, pid, host, claim, heartbeat_at) VALUES (1, ?, ?, 'gone', 0)").run(2 ** 22 + 12345, hostname())
      db.close()
      yield* Layer.build(engineOn(file))
      const check = new DatabaseSync(file)
      const row = check.prepare("SELECT pid FROM valet_workflow_runner").get() as { pid: number }
      check.close()
      expect(row.pid).toBe(process.pid)
    }).pipe(Effect.scoped))
  it.effect("an execute of a stored run while register is resuming it: one replay's activities, one result for both", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const counts = { before: 0, after: 0 }
      const { handler, workflow: Both } = beforeAndAfter("review/Both", counts)
      const runner = handler.pipe(Layer.provideMerge(engineOn(file)))
      const first = yield* Scope.make()
      const firstContext = yield* Layer.buildWithScope(runner, first)
      const executionId = yield* Both.execute({ id: "b1" }, { discard: true }).pipe(Effect.provide(firstContext))
      yield* until(Both.poll(executionId).pipe(Effect.provide(firstContext)), Option.isSome)
      yield* Scope.close(first, Exit.void)
      const client = yield* Layer.build(engineOn(file, { clientOnly: true }))
      const token = DurableDeferred.tokenFromExecutionId(opened, { workflow: Both, executionId })
      yield* DurableDeferred.succeed(opened, { token, value: "go" }).pipe(Effect.provide(client))

      // The next process: its register resumes the run (forked) while a caller executes it at once.
      const second = yield* Layer.build(runner)
      const results = yield* Effect.all([Both.execute({ id: "b1" }), Both.execute({ id: "b1" })], { concurrency: "unbounded" }).pipe(Effect.provide(second))
      expect(results).toEqual(["go", "go"])
      expect(counts).toEqual({ before: 1, after: 1 })
    }).pipe(Effect.scoped))
  it.effect("an open run whose stored payload no longer decodes (a workflow's schema changed) does not keep the others from resuming", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const runner = gateHandler.pipe(Layer.provideMerge(engineOn(file)))
      const first = yield* Scope.make()
      const firstContext = yield* Layer.buildWithScope(runner, first)
      // An older run of the same workflow, stored before its payload gained a field this version requires.
      const db = new DatabaseSync(file)
      db.prepare(`INSERT INTO ${Engine.executionsTable} (execution_id, workflow, payload) VALUES ('old', 'review/Gate', '{}')`).run()
      db.close()
      const executionId = yield* Gate.execute({ id: "g3" }, { discard: true }).pipe(Effect.provide(firstContext))
      yield* until(Gate.poll(executionId).pipe(Effect.provide(firstContext)), Option.isSome)
      yield* Scope.close(first, Exit.void)

      const second = yield* Layer.build(runner)
      const client = yield* Layer.build(engineOn(file, { clientOnly: true }))
      yield* settle
      const token = DurableDeferred.tokenFromExecutionId(opened, { workflow: Gate, executionId })
      yield* DurableDeferred.succeed(opened, { token, value: "the client" }).pipe(Effect.provide(client))
      const done = yield* until(Gate.poll(executionId).pipe(Effect.provide(second)), isComplete, Duration.millis(250), 40)
      expect(valueOf(done)).toEqual(Exit.succeed("opened by the client"))
    }).pipe(Effect.scoped))
  it.effect("a disk full when an activity's result is stored: the caller gets DurableStoreError, and the run is not ended for good (the next process runs it)", () =>
    Effect.gen(function*() {
      // Also a run that suspends on failure (AgentRun): not stored as failed, which a restart would leave alone.
      for (const suspendOnFailure of [false, true]) {
        const file = yield* tempFile
        let big = 0
        const Big = Workflow.make(`review/Big${suspendOnFailure}`, {
          payload: { id: Schema.String },
          success: Schema.Number,
          idempotencyKey: (payload) => payload.id,
          annotations: Context.make(Workflow.SuspendOnFailure, suspendOnFailure)
        })
        const handler = Big.toLayer(() =>
          Effect.map(Activity.make({ name: "big", success: Schema.String, execute: Effect.sync(() => (big++, "x".repeat(400_000))) }), (text) => text.length)
        )
        // As layerSqlite, with this test's hold on the connection (a size limit stands for the full disk).
        const runnerOn = Engines.endOnStoreFailure(file).pipe(
          Layer.provideMerge(handler.pipe(Layer.provideMerge(Engine.layer()))),
          Layer.provideMerge(SqliteClient.layer({ filename: file }))
        )
        const first = yield* Scope.make()
        const firstContext = yield* Layer.buildWithScope(runnerOn, first)
        const sql = Context.get(firstContext, SqliteClient.SqliteClient)
        const pages = Number((yield* sql.unsafe<{ readonly page_count: number }>("PRAGMA page_count"))[0]!.page_count)
        yield* sql.unsafe(`PRAGMA max_page_count = ${pages + 4}`)
        const failed = yield* Effect.exit(Big.execute({ id: "b1" }).pipe(Effect.provide(firstContext)))
        expect(Exit.isFailure(failed) && Cause.squash(failed.cause)).toBeInstanceOf(Engines.DurableStoreError)
        expect(big).toBe(1)
        yield* Scope.close(first, Exit.void)

        // Room again (the limit was this connection's): the next process runs the call again and ends the run.
        const second = yield* Layer.build(runnerOn)
        const done = yield* until(Big.poll(yield* Big.executionId({ id: "b1" })).pipe(Effect.provide(second)), isComplete)
        expect(valueOf(done)).toEqual(Exit.succeed(400_000))
        expect(big).toBe(2)
      }
    }).pipe(Effect.scoped))
  it.effect("a clock that fired just before the process ended: the next process neither waits for it again nor runs the step after it twice", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      let after = 0
      const Nap = Workflow.make("review/Nap", { payload: { id: Schema.String }, success: Schema.Number, idempotencyKey: (payload) => payload.id })
      const handler = Nap.toLayer(Effect.fnUntraced(function*() {
        yield* DurableClock.sleep({ name: "nap", duration: Duration.hours(1), inMemoryThreshold: Duration.zero })
        return yield* Activity.make({ name: "after", success: Schema.Number, execute: Effect.sync(() => ++after) })
      }))
      // No client here: a slow poll keeps the hour the clock moves from being 14,400 polls.
      const runner = handler.pipe(Layer.provideMerge(engineOn(file, { pollInterval: Duration.minutes(10) })))
      for (const turnsBeforeEnd of [0, 1, 3]) {
        after = 0
        const id = `n${turnsBeforeEnd}`
        const first = yield* Scope.make()
        const firstContext = yield* Layer.buildWithScope(runner, first)
        const executionId = yield* Nap.execute({ id }, { discard: true }).pipe(Effect.provide(firstContext))
        yield* until(Nap.poll(executionId).pipe(Effect.provide(firstContext)), Option.isSome)
        yield* TestClock.adjust(Duration.hours(1))
        for (let turn = 0; turn < turnsBeforeEnd; turn++) yield* Effect.yieldNow
        yield* Scope.close(first, Exit.void)
        const second = yield* Scope.make()
        const secondContext = yield* Layer.buildWithScope(runner, second)
        const done = yield* until(Nap.poll(executionId).pipe(Effect.provide(secondContext)), isComplete, Duration.millis(10), 50)
        expect([turnsBeforeEnd, valueOf(done), after]).toEqual([turnsBeforeEnd, Exit.succeed(1), 1])
        yield* Scope.close(second, Exit.void)
      }
    }).pipe(Effect.scoped))
  it.effect("a client's execute of a run the other process runs waits for its result; of a run not started, one clear refusal", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const running = yield* Layer.build(gateHandler.pipe(Layer.provideMerge(engineOn(file))))
      const client = yield* Layer.build(engineOn(file, { clientOnly: true }))
      const executionId = yield* Gate.execute({ id: "g4" }, { discard: true }).pipe(Effect.provide(running))
      yield* until(Gate.poll(executionId).pipe(Effect.provide(running)), Option.isSome)
      const waiting = yield* Effect.forkChild(Gate.execute({ id: "g4" }).pipe(Effect.provide(client)))
      const token = DurableDeferred.tokenFromExecutionId(opened, { workflow: Gate, executionId })
      yield* DurableDeferred.succeed(opened, { token, value: "the client" }).pipe(Effect.provide(client))
      const result = yield* until(Effect.sync(() => waiting.pollUnsafe()), (exit) => exit !== undefined, Duration.millis(250), 200)
      expect(result).toEqual(Exit.succeed("opened by the client"))
      const refused = yield* Effect.exit(Gate.execute({ id: "never started" }).pipe(Effect.provide(client)))
      expect(Exit.isFailure(refused) && String(Cause.squash(refused.cause))).toMatch(/^review\/Gate \w+ was never started: a client \(clientOnly\) runs no workflow/)
    }).pipe(Effect.scoped))
  it.effect("a timeout that lost its race to a decision stops when the run completes: no wake-up stored later for a run that is over", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const Timed = Workflow.make("review/Timed", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      // As valet's waits (waits.ts): the decision raced with a DurableClock.
      const handler = Timed.toLayer(() =>
        DurableDeferred.raceAll({
          name: "decision",
          success: Schema.String,
          error: Schema.Never,
          effects: [
            DurableDeferred.await(opened),
            Effect.as(DurableClock.sleep({ name: "timeout", duration: Duration.hours(1), inMemoryThreshold: Duration.zero }), "timed out")
          ]
        })
      )
      const context = yield* Layer.build(handler.pipe(Layer.provideMerge(engineOn(file, { pollInterval: Duration.minutes(10) }))))
      const executionId = yield* Timed.execute({ id: "t" }, { discard: true }).pipe(Effect.provide(context))
      const poll = Timed.poll(executionId).pipe(Effect.provide(context))
      yield* until(poll, Option.isSome)
      const token = DurableDeferred.tokenFromExecutionId(opened, { workflow: Timed, executionId })
      yield* DurableDeferred.succeed(opened, { token, value: "approved" }).pipe(Effect.provide(context))
      expect(valueOf(yield* until(poll, isComplete))).toEqual(Exit.succeed("approved"))
      yield* TestClock.adjust(Duration.hours(2))
      yield* settle
      const db = new DatabaseSync(file)
      const names = db.prepare("SELECT name FROM valet_workflow_deferreds WHERE execution_id = ? ORDER BY seq").all(executionId).map((row) => row.name)
      db.close()
      expect(names).not.toContain("DurableClock/timeout")
    }).pipe(Effect.scoped))
  it.effect("an unsafe interrupt survives the end of the process: the replay that would complete ends interrupted", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      let stored = 0
      const Cut = Workflow.make("review/Cut", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const handler = Cut.toLayer(Effect.fnUntraced(function*() {
        yield* Activity.make({ name: "stored", execute: Effect.sync(() => void stored++) })
        // Work that is no activity (not durable): the run is cut in the middle of it.
        yield* Effect.sleep(Duration.minutes(10))
        return "finished"
      }))
      const runner = handler.pipe(Layer.provideMerge(engineOn(file, { pollInterval: Duration.hours(1) })))
      const first = yield* Scope.make()
      const firstContext = yield* Layer.buildWithScope(runner, first)
      const executionId = yield* Cut.execute({ id: "c1" }, { discard: true }).pipe(Effect.provide(firstContext))
      yield* until(Effect.sync(() => stored), (n) => n === 1)
      yield* settle
      yield* Effect.flatMap(Effect.service(WorkflowEngine.WorkflowEngine), (engine) => engine.interruptUnsafe(Cut, executionId)).pipe(Effect.provide(firstContext))
      yield* settle
      yield* Scope.close(first, Exit.void)

      const second = yield* Layer.build(runner)
      const done = yield* until(Cut.poll(executionId).pipe(Effect.provide(second)), isComplete, Duration.minutes(1))
      const exit = valueOf(done)
      expect(Exit.isExit(exit) && Exit.hasInterrupts(exit)).toBe(true)
      expect(stored).toBe(1)
    }).pipe(Effect.scoped))
  it.effect("a resume a client asked for while no process ran is taken by the next process (a run suspended on failure runs again)", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      let runs = 0
      const Flaky = suspendsOnFailure("review/Flaky3")
      const handler = Flaky.toLayer(() => Effect.suspend(() => ++runs === 1 ? Effect.fail("down for a moment") : Effect.succeed("up")))
      const runner = handler.pipe(Layer.provideMerge(engineOn(file)))
      const first = yield* Scope.make()
      const firstContext = yield* Layer.buildWithScope(runner, first)
      const executionId = yield* Flaky.execute({ id: "f3" }, { discard: true }).pipe(Effect.provide(firstContext))
      yield* until(Flaky.poll(executionId).pipe(Effect.provide(firstContext)), Option.isSome)
      yield* Scope.close(first, Exit.void)
      const client = yield* Scope.make()
      yield* Flaky.resume(executionId).pipe(Effect.provide(yield* Layer.buildWithScope(engineOn(file, { clientOnly: true }), client)))
      yield* Scope.close(client, Exit.void)

      const second = yield* Layer.build(runner)
      const done = yield* until(Flaky.poll(executionId).pipe(Effect.provide(second)), isComplete)
      expect([valueOf(done), runs]).toEqual([Exit.succeed("up"), 2])
    }).pipe(Effect.scoped))
})

/**
 * The one-process SQLite engine (src/rollouts/internal/durable/engine.ts) on its own: what it stores survives
 * the end of its process (a scope closed, then a new engine on the same file), clocks keep their first time, a
 * deferred another connection completes wakes the run, and a run sees its handler's services. The child-process
 * tests (SIGKILL mid-run) are in Durable.test.ts, DurableApprovals.test.ts and DurableEpisodes.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Context, Duration, Effect, Exit, Fiber, Layer, Option, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"
import { Activity, DurableClock, DurableDeferred, Workflow } from "effect/workflow"
import { DatabaseSync } from "node:sqlite"
import * as Durable from "../../src/rollouts/Durable.js"
import { engineOn, tempFile, until } from "../support/sqliteEngine.js"


/** The engine's activity and deferred rows in a file, read as another process would. */
const rowsIn = (file: string) => {
  const db = new DatabaseSync(file)
  try {
    return db.prepare("SELECT (SELECT count(*) FROM valet_workflow_activities) AS activities, (SELECT count(*) FROM valet_workflow_deferreds) AS deferreds").get() as
      { readonly activities: number; readonly deferreds: number }
  } finally {
    db.close()
  }
}

describe("Durable's SQLite engine", () => {
  it.effect("a run left by an ended process runs again when its handler is registered: ended activities are answered from the file, its clock fires at its first time", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const counts = { first: 0, fails: 0, second: 0 }
      const Nap = Workflow.make("test/Nap", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const handler = Nap.toLayer(Effect.fnUntraced(function*(payload) {
        const first = yield* Activity.make({ name: "first", success: Schema.String, execute: Effect.sync(() => (counts.first++, "one")) })
        const failed = yield* Activity.make({
          name: "fails",
          error: Schema.String,
          execute: Effect.andThen(Effect.sync(() => counts.fails++), Effect.fail("refused"))
        }).pipe(Effect.catch((error) => Effect.succeed(error)))
        yield* DurableClock.sleep({ name: "nap", duration: Duration.hours(1), inMemoryThreshold: Duration.zero })
        const second = yield* Activity.make({ name: "second", success: Schema.String, execute: Effect.sync(() => (counts.second++, "two")) })
        return `${payload.id}:${first}:${failed}:${second}`
      }))
      const runner = handler.pipe(Layer.provideMerge(engineOn(file)))
      const executionId = yield* Nap.executionId({ id: "n1" })

      // The first process: starts the run, which stores two activities and sets its clock, then ends.
      const first = yield* Scope.make()
      const firstContext = yield* Layer.buildWithScope(runner, first)
      yield* Nap.execute({ id: "n1" }, { discard: true }).pipe(Effect.provide(firstContext))
      const suspended = yield* until(Nap.poll(executionId).pipe(Effect.provide(firstContext)), Option.isSome)
      expect(Option.getOrThrow(suspended)._tag).toBe("Suspended")
      // Half an hour passes before the process ends.
      yield* TestClock.adjust(Duration.minutes(30))
      yield* Scope.close(first, Exit.void)
      expect(counts).toEqual({ first: 1, fails: 1, second: 0 })
      expect(rowsIn(file)).toEqual({ activities: 2, deferreds: 0 })

      // The second process: nobody calls the workflow; registering its handler runs it again.
      const second = yield* Scope.make()
      const secondContext = yield* Layer.buildWithScope(runner, second)
      yield* TestClock.adjust(Duration.minutes(29))
      yield* Effect.yieldNow
      const poll = Nap.poll(executionId).pipe(Effect.provide(secondContext))
      expect(Option.map(yield* poll, (result) => result._tag)).toEqual(Option.some("Suspended"))
      // The clock fires one hour after it was first set, not an hour after the restart (which would be at 1 h 30).
      const done = yield* until(poll, (result) => Option.isSome(result) && result.value._tag === "Complete", Duration.seconds(30))
      const firedAt = yield* Clock.currentTimeMillis
      expect(firedAt).toBeGreaterThanOrEqual(Duration.toMillis(Duration.hours(1)))
      expect(firedAt).toBeLessThan(Duration.toMillis(Duration.minutes(62)))
      const result = Option.getOrThrow(done)
      expect(result._tag === "Complete" && Exit.isSuccess(result.exit) ? result.exit.value : result).toBe("n1:one:refused:two")
      expect(counts).toEqual({ first: 1, fails: 1, second: 1 })
      yield* Scope.close(second, Exit.void)

      // A third process answers the stored result and runs nothing; the ended run's activities and its clock's
      // wake-up are no longer kept (swept by the second process, or by the third as it starts).
      const third = yield* Layer.build(runner)
      const again = yield* Nap.execute({ id: "n1" }).pipe(Effect.provide(third))
      expect(again).toBe("n1:one:refused:two")
      expect(counts).toEqual({ first: 1, fails: 1, second: 1 })
      expect(rowsIn(file)).toEqual({ activities: 0, deferreds: 0 })
    }).pipe(Effect.scoped))

  it.effect("a deferred another connection completes (a client beside the running process) wakes the run", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const Gate = Workflow.make("test/Gate", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const opened = DurableDeferred.make("opened", { success: Schema.String })
      const runner = Gate.toLayer(Effect.fnUntraced(function*() {
        return `opened by ${yield* DurableDeferred.await(opened)}`
      })).pipe(Layer.provideMerge(engineOn(file)))
      const running = yield* Layer.build(runner)
      const client = yield* Layer.build(engineOn(file, { clientOnly: true }))
      const executionId = yield* Gate.execute({ id: "g1" }, { discard: true }).pipe(Effect.provide(running))
      const poll = Gate.poll(executionId).pipe(Effect.provide(running))
      yield* until(poll, Option.isSome)
      // The client sees the run as stored: suspended.
      expect(Option.map(yield* Gate.poll(executionId).pipe(Effect.provide(client)), (result) => result._tag)).toEqual(Option.some("Suspended"))
      const token = DurableDeferred.tokenFromExecutionId(opened, { workflow: Gate, executionId })
      yield* DurableDeferred.succeed(opened, { token, value: "the client" }).pipe(Effect.provide(client))
      const done = yield* until(poll, (result) => Option.isSome(result) && result.value._tag === "Complete", Duration.millis(250))
      const result = Option.getOrThrow(done)
      expect(result._tag === "Complete" && Exit.isSuccess(result.exit) ? result.exit.value : result).toBe("opened by the client")
      // And the client reads the result the running process stored.
      const seen = Option.getOrThrow(yield* Gate.poll(executionId).pipe(Effect.provide(client)))
      expect(seen._tag === "Complete" && Exit.isSuccess(seen.exit) ? seen.exit.value : seen).toBe("opened by the client")
    }).pipe(Effect.scoped))

  it.effect("a run that waits is not run again by each call that asks for it; what it waits for runs it once more", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      let replays = 0
      const Gate = Workflow.make("test/Gate2", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const opened = DurableDeferred.make("opened", { success: Schema.String })
      const context = yield* Layer.build(Gate.toLayer(Effect.fnUntraced(function*() {
        replays++
        return `opened by ${yield* DurableDeferred.await(opened)}`
      })).pipe(Layer.provideMerge(engineOn(file))))
      const executionId = yield* Gate.execute({ id: "g" }, { discard: true }).pipe(Effect.provide(context))
      yield* until(Gate.poll(executionId).pipe(Effect.provide(context)), Option.isSome)
      for (let call = 0; call < 3; call++) yield* Gate.execute({ id: "g" }, { discard: true }).pipe(Effect.provide(context))
      const waiting = yield* Gate.execute({ id: "g" }).pipe(Effect.provide(context), Effect.forkChild)
      yield* TestClock.adjust(Duration.seconds(1))
      expect(replays).toBe(1)
      const token = DurableDeferred.tokenFromExecutionId(opened, { workflow: Gate, executionId })
      yield* DurableDeferred.succeed(opened, { token, value: "a decision" }).pipe(Effect.provide(context))
      // The caller that waited is woken by the completion itself (its retry schedule's next try is seconds away).
      yield* TestClock.adjust(Duration.millis(1))
      expect(yield* Fiber.join(waiting)).toBe("opened by a decision")
      expect(replays).toBe(2)
    }).pipe(Effect.scoped))

  it.effect("a run sees the services its handler was registered with, not a caller's layer of the same service", () =>
    Effect.gen(function*() {
      class Greeting extends Context.Service<Greeting, string>()("test/Greeting") {}
      const file = yield* tempFile
      const Greet = Workflow.make("test/Greet", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const runner = Greet.toLayer(() => Effect.map(Effect.service(Greeting), (greeting) => greeting)).pipe(
        Layer.provide(Layer.succeed(Greeting, "the handler's")),
        Layer.provideMerge(engineOn(file))
      )
      const context = yield* Layer.build(runner)
      const greeting = yield* Greet.execute({ id: "x" }).pipe(Effect.provideService(Greeting, "the caller's"), Effect.provide(context))
      expect(greeting).toBe("the handler's")
    }).pipe(Effect.scoped))

  it.effect("a file an earlier valet wrote with effect/cluster's engine is refused, naming the file", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const db = new DatabaseSync(file)
      db.exec("CREATE TABLE cluster_messages (id INTEGER PRIMARY KEY)")
      db.close()
      const error = yield* Effect.flip(Layer.build(Durable.layerSqlite(file)))
      expect(error._tag).toBe("DurableStoreError")
      expect(error.message).toBe(
        `sqlite ${file}: written by an earlier valet (effect/cluster's engine), whose runs this version cannot resume: finish them with that version, or name a new file`
      )
    }).pipe(Effect.scoped))

  it.effect("the activities of ended runs are swept while the process runs: every hundred ended runs, and the rest within 5 s", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const Tiny = Workflow.make("test/Tiny", { payload: { id: Schema.Number }, success: Schema.Number, idempotencyKey: (payload) => String(payload.id) })
      const runner = Tiny.toLayer(Effect.fnUntraced(function*(payload) {
        return yield* Activity.make({ name: "double", success: Schema.Number, execute: Effect.succeed(payload.id * 2) })
      })).pipe(Layer.provideMerge(engineOn(file)))
      const context = yield* Layer.build(runner)
      const results = yield* Effect.forEach(Array.from({ length: 130 }, (_, id) => id), (id) => Tiny.execute({ id }), { concurrency: 10 }).pipe(Effect.provide(context))
      expect(results[129]).toBe(258)
      // A hundred swept as the hundredth ended; 30 left for the timed sweep.
      const before = yield* until(Effect.sync(() => rowsIn(file)), (rows) => rows.activities === 30, Duration.millis(1), 50)
      expect(before).toEqual({ activities: 30, deferreds: 0 })
      yield* until(Effect.sync(() => rowsIn(file)), (rows) => rows.activities === 0, Duration.seconds(1), 20)
      // Answered from the stored results, nothing run again.
      expect(yield* Tiny.execute({ id: 7 }).pipe(Effect.provide(context))).toBe(14)
    }).pipe(Effect.scoped))
})

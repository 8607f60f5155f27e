/**
 * Guards of the sweep of ended executions' activity and deferred rows on the one-process SQLite engine (engine.ts
 * `sweep`, every 100 ended runs or 5 s, and leftovers when a process starts): what a run still open needs (a run
 * waiting for a decision, a run suspended on failure then resumed, a parent whose child ended) is never swept, and
 * an ended run's rows go. These passed on ec9398b and stay as checks.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Layer, Option, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"
import { Activity, DurableDeferred, Workflow } from "effect/workflow"
import { DatabaseSync } from "node:sqlite"
import { engineOn, isComplete, tempFile, until } from "../support/sqliteEngine.js"

const settle = Effect.gen(function*() {
  for (let turn = 0; turn < 20; turn++) yield* Effect.yieldNow
})
/** Moves the test clock past a few sweeps (5 s each). */
const pastSweeps = Effect.gen(function*() {
  for (let turn = 0; turn < 24; turn++) {
    yield* TestClock.adjust(Duration.millis(500))
    yield* settle
  }
})
const rows = (file: string, table: string, executionId: string) => {
  const db = new DatabaseSync(file)
  try {
    return Number((db.prepare(`SELECT count(*) AS n FROM ${table} WHERE execution_id = ?`).get(executionId) as { n: number }).n)
  } finally {
    db.close()
  }
}
const opened = DurableDeferred.make("opened", { success: Schema.String })

describe("Durable's SQLite engine: the sweep of ended runs", () => {
  it.effect("a run waiting for a decision past several sweeps keeps its journal; ended, its rows go", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const counts = { before: 0, after: 0 }
      const Waits = Workflow.make("sweep/Waits", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const handler = Waits.toLayer(Effect.fnUntraced(function*() {
        yield* Activity.make({ name: "before", execute: Effect.sync(() => void counts.before++) })
        const answer = yield* DurableDeferred.await(opened)
        yield* Activity.make({ name: "after", execute: Effect.sync(() => void counts.after++) })
        return answer
      }))
      const running = yield* Layer.build(handler.pipe(Layer.provideMerge(engineOn(file))))
      const executionId = yield* Waits.execute({ id: "w1" }, { discard: true }).pipe(Effect.provide(running))
      const poll = Waits.poll(executionId).pipe(Effect.provide(running))
      yield* until(poll, Option.isSome)
      yield* pastSweeps
      expect(rows(file, "valet_workflow_activities", executionId)).toBe(1)
      yield* DurableDeferred.succeed(opened, { token: DurableDeferred.tokenFromExecutionId(opened, { workflow: Waits, executionId }), value: "yes" }).pipe(Effect.provide(running))
      yield* until(poll, isComplete)
      expect(counts).toEqual({ before: 1, after: 1 })
      yield* pastSweeps
      expect([rows(file, "valet_workflow_activities", executionId), rows(file, "valet_workflow_deferreds", executionId)]).toEqual([0, 0])
      expect(yield* Waits.execute({ id: "w1" }).pipe(Effect.provide(running))).toBe("yes")
    }).pipe(Effect.scoped))

  it.effect("a run suspended on failure, past sweeps and a restart, resumed: its activities done before answer from the journal", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      let booked = 0
      let calls = 0
      const Flaky = Workflow.make("sweep/Flaky", {
        payload: { id: Schema.String },
        success: Schema.String,
        error: Schema.String,
        idempotencyKey: (payload) => payload.id,
        annotations: Context.make(Workflow.SuspendOnFailure, true)
      })
      const handler = Flaky.toLayer(Effect.fnUntraced(function*() {
        yield* Activity.make({ name: "book", execute: Effect.sync(() => void booked++) })
        return yield* Effect.suspend(() => ++calls === 1 ? Effect.fail("down") : Effect.succeed("up"))
      }))
      const runner = handler.pipe(Layer.provideMerge(engineOn(file)))
      const first = yield* Scope.make()
      const firstContext = yield* Layer.buildWithScope(runner, first)
      const executionId = yield* Flaky.execute({ id: "f1" }, { discard: true }).pipe(Effect.provide(firstContext))
      yield* until(Flaky.poll(executionId).pipe(Effect.provide(firstContext)), Option.isSome)
      yield* pastSweeps
      yield* Scope.close(first, Exit.void)
      const second = yield* Layer.build(runner)
      yield* pastSweeps
      yield* Flaky.resume(executionId).pipe(Effect.provide(second))
      yield* until(Flaky.poll(executionId).pipe(Effect.provide(second)), isComplete)
      expect({ booked, calls }).toEqual({ booked: 1, calls: 2 })
    }).pipe(Effect.scoped))

  it.effect("a parent whose child ended (and was swept) replays past the child after a restart, the child not run again", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      let childRuns = 0
      const Child = Workflow.make("sweep/Child", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const Parent = Workflow.make("sweep/Parent", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const handlers = Layer.mergeAll(
        Child.toLayer(({ id }) => Activity.make({ name: "work", success: Schema.String, execute: Effect.sync(() => `${id}:${++childRuns}`) })),
        Parent.toLayer(Effect.fnUntraced(function*({ id }) {
          const child = yield* Child.execute({ id: `${id}-child` })
          const answer = yield* DurableDeferred.await(opened)
          return `${child} ${answer}`
        }))
      )
      const runner = handlers.pipe(Layer.provideMerge(engineOn(file)))
      const first = yield* Scope.make()
      const firstContext = yield* Layer.buildWithScope(runner, first)
      const executionId = yield* Parent.execute({ id: "p1" }, { discard: true }).pipe(Effect.provide(firstContext))
      yield* until(Parent.poll(executionId).pipe(Effect.provide(firstContext)), Option.isSome)
      yield* pastSweeps
      yield* Scope.close(first, Exit.void)
      const second = yield* Layer.build(runner)
      yield* pastSweeps
      yield* DurableDeferred.succeed(opened, { token: DurableDeferred.tokenFromExecutionId(opened, { workflow: Parent, executionId }), value: "yes" }).pipe(Effect.provide(second))
      yield* until(Parent.poll(executionId).pipe(Effect.provide(second)), isComplete)
      expect(yield* Parent.execute({ id: "p1" }).pipe(Effect.provide(second))).toBe("p1-child:1 yes")
      expect(childRuns).toBe(1)
    }).pipe(Effect.scoped))
})

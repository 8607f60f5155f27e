/**
 * A SQLite client's waits (`clientOnly`: a process beside the one that runs a file's workflows): it hears of no
 * completion, so a caller's wait there is its retry schedule alone. A caller that gives up must leave nothing behind,
 * and one that stays still gets its result.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Option, Schema } from "effect"
import { DurableDeferred, Workflow, WorkflowEngine } from "effect/workflow"
import { pendingWaits } from "../../src/rollouts/internal/durable/engine.js"
import { engineOn, isComplete, tempFile, until } from "../support/sqliteEngine.js"

describe("Durable on SQLite, a client's waits", () => {
  it.effect("a caller on a client that gives up leaves no wait; one that stays gets the result on its schedule", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const Gate = Workflow.make("test/WaitGate", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const opened = DurableDeferred.make("opened", { success: Schema.String })
      const running = yield* Layer.build(Gate.toLayer(Effect.fnUntraced(function*() {
        return `opened by ${yield* DurableDeferred.await(opened)}`
      })).pipe(Layer.provideMerge(engineOn(file))))
      const client = yield* Layer.build(engineOn(file, { clientOnly: true }))
      const clientEngine = Context.get(client, WorkflowEngine.WorkflowEngine)
      const executionId = yield* Gate.execute({ id: "w1" }, { discard: true }).pipe(Effect.provide(running))
      yield* until(Gate.poll(executionId).pipe(Effect.provide(running)), Option.isSome)

      // A caller on the client asks, is answered `Suspended` and waits; then gives up.
      const gaveUp = yield* Effect.forkChild(Gate.execute({ id: "w1" }).pipe(Effect.provide(client)))
      for (let turn = 0; turn < 20; turn++) yield* Effect.yieldNow
      expect(gaveUp.pollUnsafe()).toBeUndefined()
      yield* Fiber.interrupt(gaveUp)
      expect(pendingWaits(clientEngine)).toBe(0)

      // Another stays; the decision comes (through the client), and the caller's schedule finds the result.
      const stays = yield* Effect.forkChild(Gate.execute({ id: "w1" }).pipe(Effect.provide(client)))
      const token = DurableDeferred.tokenFromExecutionId(opened, { workflow: Gate, executionId })
      yield* DurableDeferred.succeed(opened, { token, value: "the client" }).pipe(Effect.provide(client))
      yield* until(Gate.poll(executionId).pipe(Effect.provide(running)), isComplete)
      const answered = yield* until(Effect.sync(() => stays.pollUnsafe()), (exit) => exit !== undefined, "1 second", 120)
      expect(answered !== undefined && answered._tag === "Success" ? answered.value : answered).toBe("opened by the client")
      expect(pendingWaits(clientEngine)).toBe(0)
    }).pipe(Effect.scoped))
})

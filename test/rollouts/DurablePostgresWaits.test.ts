/**
 * A PostgreSQL client's waits on executions that runners run: a caller that gives up (its call timed out or was
 * interrupted) must not leave its wait behind for the life of the process, once the execution completes; a caller
 * that still asks gets its result.
 */
import { expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Fiber } from "effect"
import { WorkflowEngine } from "effect/workflow"
import { pendingWaits } from "../../src/rollouts/internal/durable/engine.js"
import * as Engines from "../../src/rollouts/internal/durable/engines.js"
import { adminOn, buildIn, decide, Gate, gateHandler, opened, provided, rowOf, runnerWith, until } from "../support/durablePostgres.js"
import { describePostgres, freshDatabase } from "../support/postgres.js"

describePostgres("Durable on PostgreSQL, a client's waits", () => {
  it.live("a caller that gives up leaves no wait behind once the execution completes; one that still waits gets the result", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const admin = yield* adminOn(url)
      yield* buildIn(runnerWith(url, gateHandler, { heartbeat: Duration.millis(200) }))
      const client = yield* buildIn(Engines.layerPostgresClient({ url }))
      const engine = Context.get(client, WorkflowEngine.WorkflowEngine)
      const call = (id: string) => Gate.execute({ id }).pipe(provided(client))

      // g1: its only caller gives up while the run waits for a decision.
      const gaveUp = yield* Effect.exit(Effect.timeout(call("g1"), Duration.millis(500)))
      expect(Exit.isFailure(gaveUp)).toBe(true)
      const g1 = Gate.executionId({ id: "g1" })
      const executionId = yield* g1
      yield* until("the run waits for its decision", rowOf(admin, executionId), (row) => row?.suspended != null)
      expect(pendingWaits(engine)).toBe(1)

      // g2: its caller goes on waiting.
      const waiting = yield* Effect.forkScoped(call("g2"))
      const g2 = yield* Gate.executionId({ id: "g2" })
      yield* until("the second run waits for its decision", rowOf(admin, g2), (row) => row?.suspended != null)

      yield* decide(Gate, opened, executionId, "the test").pipe(provided(client))
      yield* decide(Gate, opened, g2, "the test").pipe(provided(client))
      expect(yield* Fiber.join(waiting)).toBe("opened by the test")
      yield* until("both results are stored", Effect.all([rowOf(admin, executionId), rowOf(admin, g2)]), (rows) => rows.every((row) => row?.result != null))
      // The `done` of each reaches the client: nothing is left waiting for executions that are over.
      yield* until("the client holds no wait", Effect.sync(() => pendingWaits(engine)), (n) => n === 0)
    }).pipe(Effect.scoped), 60_000)
})

/**
 * Helpers of the tests of Durable's one-process SQLite engine (test/rollouts/DurableSqliteEngine*.test.ts): a file in
 * a directory removed with the scope, the engine on it, and a loop that lets the engine's fibers run under the test
 * clock until a condition holds.
 */
import { Duration, Effect, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import type { Workflow } from "effect/workflow"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as SqliteClient from "../../src/environment/SqliteClient.js"
import * as Engine from "../../src/rollouts/internal/durable/engine.js"

/** `runs.db` in a directory of its own, removed when the scope closes. */
export const tempFile = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-sqlite-engine-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
).pipe(Effect.map((dir) => join(dir, "runs.db")))

/** The engine on `filename` (its own SQLite connection, as another process would have). */
export const engineOn = (filename: string, options: Engine.Options = {}) =>
  Engine.layer(options).pipe(Layer.provide(SqliteClient.layer({ filename })))

/** Lets the engine's fibers and SQLite statements run, the test clock moved by `step` each turn, until `done`. */
export const until = <A>(look: Effect.Effect<A>, done: (a: A) => boolean, step: Duration.Input = Duration.millis(10), turns = 500) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < turns; turn++) {
      const value = yield* look
      if (done(value)) return value
      yield* TestClock.adjust(step)
      yield* Effect.yieldNow
    }
    return yield* Effect.die(`the condition was not reached in ${turns} turns`)
  })

/** Whether a poll found the execution complete. */
export const isComplete = (result: Option.Option<Workflow.Result<unknown, unknown>>) => Option.isSome(result) && result.value._tag === "Complete"

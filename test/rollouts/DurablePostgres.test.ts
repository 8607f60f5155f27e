/**
 * Durable's engine on a shared PostgreSQL database (src/rollouts/internal/durable/engineRunners.ts), with runners and
 * clients built in this process on one fresh database: where an execution runs (rendezvous hashing), a client's
 * execution waiting for a runner, and a stopped runner's executions taken by another, their stored activities
 * answered. The process tests (runners killed with SIGKILL) are in DurableCluster.test.ts.
 */
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Layer, Redacted, Schema, Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import { Activity, DurableClock, Workflow } from "effect/workflow"
import * as Durable from "../../src/rollouts/Durable.js"
import { ownerOf } from "../../src/rollouts/internal/durable/engineRunners.js"
import { describePostgres, freshDatabase } from "../support/postgres.js"

describe("rendezvous: the runner an execution falls to", () => {
  const ids = Array.from({ length: 3000 }, (_, i) => `execution-${i}`)

  const Runners = Schema.Array(Schema.String).check(Schema.isMinLength(1), Schema.isMaxLength(6))
  it.prop("the same runners give the same owner, whatever their order", { runners: Runners, id: Schema.String }, ({ id, runners }) => {
    expect(ownerOf([...runners].reverse(), id)).toBe(ownerOf(runners, id))
    expect(runners).toContain(ownerOf(runners, id))
  })

  it("three runners get even shares; one gone, only its share moves", () => {
    const runners = ["7b0c0f1e-runner-a", "1d9e4a52-runner-b", "c3f7a8e0-runner-c"]
    const shares = new Map<string, number>()
    for (const id of ids) shares.set(ownerOf(runners, id)!, (shares.get(ownerOf(runners, id)!) ?? 0) + 1)
    for (const runner of runners) expect(Math.abs(shares.get(runner)! - 1000), runner).toBeLessThan(100)
    const moved = ids.filter((id) => ownerOf(runners, id) !== ownerOf(runners.slice(0, 2), id))
    expect(moved.every((id) => ownerOf(runners, id) === runners[2])).toBe(true)
  })
})

describePostgres("Durable's engine on PostgreSQL, runners in this process", () => {
  const counts = { step: 0, long: 0 }
  const Job = Workflow.make("test/Job", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
  // A step that ends, then one that takes long enough for a runner to be stopped in it.
  const handler = Job.toLayer(Effect.fnUntraced(function*(payload) {
    const first = yield* Activity.make({ name: "step", success: Schema.String, execute: Effect.sync(() => (counts.step++, "one")) })
    const second = yield* Activity.make({
      name: "long",
      success: Schema.String,
      execute: Effect.andThen(Effect.sync(() => counts.long++), Effect.as(Effect.sleep("1500 millis"), "two"))
    })
    return `${payload.id}:${first}:${second}`
  }))

  it.live("a client's execution waits while no runner serves, and runs once one starts", () =>
    Effect.gen(function*() {
      counts.step = 0
      counts.long = 0
      const url = yield* freshDatabase
      const client = yield* Layer.build(Durable.layerPostgresClient({ url }))
      const running = yield* Job.execute({ id: "j1" }).pipe(Effect.provide(client), Effect.forkScoped)
      // Nothing serves: the execution is stored and waits (20 polls, 100 ms apart).
      for (let poll = 0; poll < 20; poll++) {
        expect(running.pollUnsafe()).toBeUndefined()
        yield* Effect.sleep("100 millis")
      }
      yield* Layer.build(handler.pipe(Layer.provideMerge(Durable.layerPostgresRunner({ url }))))
      expect(yield* Fiber.join(running)).toBe("j1:one:two")
      expect(counts).toEqual({ step: 1, long: 1 })
    }).pipe(Effect.scoped), 60_000)

  it.live("a runner stopped mid-run frees its executions at once: another takes them, the ended activities answered from storage", () =>
    Effect.gen(function*() {
      counts.step = 0
      counts.long = 0
      const url = yield* freshDatabase
      const client = yield* Layer.build(Durable.layerPostgresClient({ url }))
      const first = yield* Scope.make()
      yield* Layer.buildWithScope(handler.pipe(Layer.provideMerge(Durable.layerPostgresRunner({ url }))), first)
      // The only runner: every execution falls to it.
      const ids = ["a", "b", "c", "d"]
      const running = yield* Effect.forEach(ids, (id) => Job.execute({ id }), { concurrency: "unbounded" }).pipe(
        Effect.provide(client),
        Effect.forkScoped
      )
      for (let poll = 0; counts.long < ids.length; poll++) {
        if (poll > 200) return yield* Effect.die(`the runs did not reach their long step: ${JSON.stringify(counts)}`)
        yield* Effect.sleep("20 millis")
      }
      expect(counts).toEqual({ step: 4, long: 4 })
      // A second runner joins; the first stops in the long steps (its runs interrupted, nothing stored for them).
      yield* Layer.build(handler.pipe(Layer.provideMerge(Durable.layerPostgresRunner({ url }))))
      yield* Scope.close(first, Exit.void)
      // Taken by the second: the ended step answered from storage, the interrupted one run again.
      expect(yield* Fiber.join(running)).toEqual(ids.map((id) => `${id}:one:two`))
      expect(counts).toEqual({ step: 4, long: 8 })
    }).pipe(Effect.scoped), 60_000)

  it.live("a database an earlier valet's runners used (effect/cluster's tables) is refused with one line, for runners and clients", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      yield* Effect.scoped(Effect.gen(function*() {
        const sql = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 1 })
        yield* sql`CREATE TABLE cluster_messages (id BIGINT PRIMARY KEY)`
      })).pipe(Effect.provide(Reactivity.layer))
      for (const layer of [Durable.layerPostgresRunner({ url }), Durable.layerPostgresClient({ url })]) {
        const exit = yield* Effect.exit(Effect.scoped(Layer.build(layer)))
        expect(Exit.isFailure(exit)).toBe(true)
        const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : undefined
        expect(error).toBeInstanceOf(Durable.DurableStoreError)
        expect((error as Durable.DurableStoreError).message).toMatch(/^postgres 127\.0\.0\.1:\d+\/valet_test_\w+: written by an earlier valet's runners .* drop its cluster_\* tables/)
      }
    }).pipe(Effect.scoped), 60_000)

  it.live("a durable clock set on a runner that stops fires on the runner that takes the run over", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      let naps = 0
      const Nap = Workflow.make("test/PgNap", { payload: { id: Schema.String }, success: Schema.String, idempotencyKey: (payload) => payload.id })
      const napper = Nap.toLayer(Effect.fnUntraced(function*(payload) {
        yield* Activity.make({ name: "before", success: Schema.Number, execute: Effect.sync(() => ++naps) })
        yield* DurableClock.sleep({ name: "nap", duration: "1500 millis", inMemoryThreshold: Duration.zero })
        return `${payload.id} woke`
      }))
      const client = yield* Layer.build(Durable.layerPostgresClient({ url }))
      const first = yield* Scope.make()
      yield* Layer.buildWithScope(napper.pipe(Layer.provideMerge(Durable.layerPostgresRunner({ url }))), first)
      const running = yield* Nap.execute({ id: "n1" }).pipe(Effect.provide(client), Effect.forkScoped)
      for (let poll = 0; naps < 1; poll++) {
        if (poll > 200) return yield* Effect.die("the run did not start")
        yield* Effect.sleep("20 millis")
      }
      // The first runner stops while the run sleeps; a second takes it over and its clock fires there.
      yield* Layer.build(napper.pipe(Layer.provideMerge(Durable.layerPostgresRunner({ url }))))
      yield* Scope.close(first, Exit.void)
      expect(yield* Fiber.join(running)).toBe("n1 woke")
      expect(naps).toBe(1)
    }).pipe(Effect.scoped), 60_000)
})

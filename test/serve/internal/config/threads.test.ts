/**
 * The thread store of `valet serve` (`threads:` in valet.yaml) and of `valet run --thread`: a SQLite file or a
 * PostgreSQL server, opened and checked when the layer is built, so a store that cannot be used is one
 * `ThreadStoreError` naming it (a PostgreSQL URL without its credentials) before any turn.
 */
import { NodeServices } from "@effect/platform-node"
import { expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Threads from "../../../../src/core/Threads.js"
import * as ThreadStore from "../../../../src/serve/internal/config/threads.js"
import { describePostgres, freshDatabase } from "../../../support/postgres.js"

it.effect("a file that is not a SQLite database: one ThreadStoreError naming the file, when the layer is built", () =>
  Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "valet-thread-store-"))
    try {
      const file = join(dir, "notes.txt")
      writeFileSync(file, "these are not the pages of a database ".repeat(200))
      const error = yield* Effect.flip(Layer.build(ThreadStore.layer({ _tag: "Sqlite", file })))
      expect(error._tag).toBe("ThreadStoreError")
      expect(error.message).toContain(`sqlite ${file}`)
      expect(error.message).toMatch(/not a database/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }).pipe(Effect.scoped, Effect.provide(NodeServices.layer)))

it.effect("a PostgreSQL server that is not there: one ThreadStoreError naming it without the password", () =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(Layer.build(ThreadStore.layer({ _tag: "Postgres", url: "postgres://valet:s3cret@127.0.0.1:1/threads" })))
    expect(error._tag).toBe("ThreadStoreError")
    expect(error.message).toMatch(/^Threads: postgres 127\.0\.0\.1:1\/threads: cannot connect/)
    expect(error.message).not.toContain("s3cret")
  }).pipe(Effect.scoped, Effect.provide(NodeServices.layer)), 30_000)

describePostgres("the PostgreSQL thread store", () => {
  it.live("a thread created through one layer is there through the next (the tables made once)", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase
      const store = ThreadStore.layer({ _tag: "Postgres", url })
      yield* Threads.create({ id: "kept", owner: "ada", metadata: { title: "pg" } }).pipe(Effect.provide(store))
      expect(yield* Threads.get("kept").pipe(Effect.provide(store))).toMatchObject({ id: "kept", owner: "ada", metadata: { title: "pg" } })
    }).pipe(Effect.scoped, Effect.provide(NodeServices.layer)), 60_000)
})

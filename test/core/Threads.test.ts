/**
 * Threads: one conformance suite on memory, SQLite and a real PostgreSQL (the store), then turns on threads
 * (`Agent.run` / `Agent.stream` with `thread`): the history a turn is given, what it appends however it ends, one
 * turn at a time.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Schema, type Scope, Stream } from "effect"
import { TestClock } from "effect/testing"
import { SqlClient, type SqlError } from "effect/sql"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import * as Agent from "../../src/core/Agent.js"
import * as EmbeddingModel from "../../src/core/EmbeddingModel.js"
import * as Guardrail from "../../src/core/Guardrail.js"
import * as HashedEmbeddingModel from "../../src/core/HashedEmbeddingModel.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Turn from "../../src/core/internal/threads/turn.js"
import * as Threads from "../../src/core/Threads.js"
import * as Tool from "../../src/core/Tool.js"
import * as SqliteClient from "../../src/environment/SqliteClient.js"
import { type Backend as AnyBackend, describeOn, type SqlBackend as AnySqlBackend, withStore } from "../support/backends.js"
import { describePostgres, freshSchema } from "../support/postgres.js"

type Backend = AnyBackend<Threads.Threads, Threads.ThreadStoreError>
type SqlBackend = AnySqlBackend<Threads.Threads, Threads.ThreadStoreError>

const dir = mkdtempSync(join(tmpdir(), "valet-threads-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
let files = 0
const sqliteDatabase = Effect.sync(() => {
  const filename = join(dir, `t${++files}`, "threads.sqlite3")
  mkdirSync(dirname(filename), { recursive: true })
  return () => SqliteClient.layer({ filename })
})

const memory: Backend = { name: "memory", fresh: Effect.succeed(Threads.layerMemory()) }
const sqlite: SqlBackend = {
  name: "sqlite",
  fresh: Effect.map(sqliteDatabase, (client) => Threads.layerSql.pipe(Layer.provide(client()))),
  database: sqliteDatabase
}
const postgres: SqlBackend = {
  name: "postgres",
  fresh: Effect.map(freshSchema, (schema) => Threads.layerSql.pipe(Layer.provide(schema.client()))),
  database: Effect.map(freshSchema, (schema) => schema.client)
}

const user = (content: string): Model.Message => ({ role: "user", content })
const assistant = (content: string): Model.Message => ({ role: "assistant", content })

const add = Tool.make({
  name: "add",
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a + b)
})

const conformance = (backend: Backend) =>
  describeOn(backend, `Threads conformance [${backend.name}]`, () => {
    it.effect("create, get, list an owner's threads a page at a time, delete; owners and ids checked", () =>
      withStore(backend, Effect.gen(function*() {
        const first = yield* Threads.create({ id: "t1", owner: "ada", metadata: { title: "first" } })
        expect(first).toMatchObject({ id: "t1", owner: "ada", metadata: { title: "first" }, messageCount: 0 })
        for (let i = 2; i <= 5; i++) {
          yield* TestClock.adjust(10)
          yield* Threads.create({ id: `t${i}`, owner: "ada" })
        }
        yield* Threads.create({ id: "other", owner: "grace" })
        const generated = yield* Threads.create({ owner: "ada" })
        expect(generated.id).toMatch(/^thr_[0-9a-f]{20}$/)
        yield* Threads.delete(generated.id)
        expect(yield* Threads.get("t1", { owner: "ada" })).toEqual(first)
        // Newest first, two at a time, every thread once.
        const seen: Array<string> = []
        let cursor: string | undefined
        do {
          const page: Threads.ThreadPage = yield* Threads.list("ada", { limit: 2, ...(cursor !== undefined ? { cursor } : {}) })
          seen.push(...page.threads.map((thread) => thread.id))
          cursor = page.nextCursor
        } while (cursor !== undefined)
        expect(seen).toEqual(["t5", "t4", "t3", "t2", "t1"])
        expect((yield* Threads.list("grace")).threads.map((thread) => thread.id)).toEqual(["other"])
        // Another owner's thread: forbidden, named; an unknown one: not found; a bad id, limit or cursor: refused.
        expect(yield* Effect.flip(Threads.get("t1", { owner: "grace" }))).toMatchObject({ _tag: "ThreadForbidden", threadId: "t1" })
        expect(yield* Effect.flip(Threads.messages("t1", { owner: "grace" }))).toMatchObject({ _tag: "ThreadForbidden" })
        expect(yield* Effect.flip(Threads.delete("t1", { owner: "grace" }))).toMatchObject({ _tag: "ThreadForbidden" })
        expect(yield* Effect.flip(Threads.get("nope"))).toMatchObject({ _tag: "ThreadNotFound", threadId: "nope" })
        expect(yield* Effect.flip(Threads.get("a__b"))).toMatchObject({ _tag: "ThreadStoreError", operation: "get" })
        expect(yield* Effect.flip(Threads.create({ id: "t1", owner: "ada" }))).toMatchObject({ message: `Threads.create: a thread "t1" exists` })
        expect(yield* Effect.flip(Threads.create({ owner: "" }))).toMatchObject({ _tag: "ThreadStoreError" })
        expect(yield* Effect.flip(Threads.list("ada", { limit: 0 }))).toMatchObject({ message: "Threads.list: limit must be an integer in [1, 500], got 0" })
        expect(yield* Effect.flip(Threads.list("ada", { cursor: "x" }))).toMatchObject({ _tag: "ThreadStoreError", operation: "list" })
        yield* Threads.delete("t1")
        expect(yield* Effect.flip(Threads.get("t1"))).toMatchObject({ _tag: "ThreadNotFound" })
      })))

    it.effect("append in one write, read a page at a time; messages are checked, by index", () =>
      withStore(backend, Effect.gen(function*() {
        yield* Threads.create({ id: "long", owner: "ada" })
        const all = Array.from({ length: 250 }, (_, i): Model.Message => (i % 2 === 0 ? user(`q${i}`) : assistant(`a${i}`)))
        for (let i = 0; i < 250; i += 50) yield* Threads.append("long", all.slice(i, i + 50))
        const last = yield* Threads.messages("long")
        expect(last).toMatchObject({ start: 150, total: 250 })
        expect(last.messages).toEqual(all.slice(150))
        const before = yield* Threads.messages("long", { before: 150, limit: 1000 })
        expect(before.start).toBe(0)
        expect(before.messages).toEqual(all.slice(0, 150))
        expect(yield* Effect.flip(Threads.messages("long", { before: 251 }))).toMatchObject({ _tag: "ThreadStoreError", threadId: "long" })
        const bad = yield* Effect.flip(Threads.append("long", [user("ok"), { role: "robot", content: "x" } as unknown as Model.Message]))
        expect(bad).toMatchObject({ _tag: "ThreadStoreError", threadId: "long", index: 251 })
        expect(bad.message).toContain("messages[1] (message 251 of thread \"long\") is not a message")
        // Nothing of a refused append was written.
        expect((yield* Threads.get("long")).messageCount).toBe(250)
        // A count expected and not found: another writer appended.
        expect(yield* Effect.flip(Threads.append("long", [user("x")], { expectedCount: 3 }))).toMatchObject({ _tag: "ThreadBusy" })
      })))

    it.effect("20 writers appending at once: every message lands once, in one piece each", () =>
      withStore(backend, Effect.gen(function*() {
        yield* Threads.create({ id: "busy", owner: "ada" })
        yield* Effect.forEach(Array.from({ length: 20 }, (_, w) => w), (w) =>
          Threads.append("busy", [user(`w${w} q`), assistant(`w${w} a`)]), { concurrency: "unbounded" })
        const page = yield* Threads.messages("busy", { limit: 1000 })
        expect(page.total).toBe(40)
        // Each writer's two messages are next to each other: no append was cut by another.
        for (let i = 0; i < 40; i += 2) expect(page.messages[i + 1]!.content).toBe(Model.textOf(page.messages[i]!.content).replace(" q", " a"))
        expect(new Set(page.messages.map((message) => Model.textOf(message.content))).size).toBe(40)
      })))

    it.effect("fork at a message: a new thread of the same owner with the messages before it", () =>
      withStore(backend, Effect.gen(function*() {
        yield* Threads.create({ id: "base", owner: "ada", metadata: { title: "t" } })
        yield* Threads.append("base", [user("1"), assistant("2"), user("3"), assistant("4")])
        const forked = yield* Threads.fork("base", { at: 2, id: "edited" })
        expect(forked).toMatchObject({ id: "edited", owner: "ada", metadata: { title: "t" }, messageCount: 2 })
        expect((yield* Threads.messages("edited")).messages).toEqual([user("1"), assistant("2")])
        yield* Threads.append("edited", [user("3, edited")])
        expect((yield* Threads.messages("base")).messages).toHaveLength(4)
        expect(yield* Effect.flip(Threads.fork("base", { at: 5 }))).toMatchObject({ message: "Threads.fork: at must be an integer in [0, 4], got 5" })
        expect(yield* Effect.flip(Threads.fork("base", { at: 1, owner: "grace" }))).toMatchObject({ _tag: "ThreadForbidden" })
      })))

    it.effect("a summary: kept beside the messages, replaced whole, with the lease; a fork keeps it only if it stands for messages before at", () =>
      withStore(backend, Effect.gen(function*() {
        const threads = yield* Threads.Threads
        yield* Threads.create({ id: "s", owner: "ada" })
        expect(yield* Threads.summary("s")).toBeUndefined()
        yield* Threads.append("s", [user("1"), assistant("2"), user("3"), assistant("4"), user("5"), assistant("6")])
        yield* threads.writeSummary("s", { content: "[Summary of 2 earlier messages]\nOne, two.", through: 2 })
        expect(yield* Threads.summary("s", { owner: "ada" })).toEqual({ content: "[Summary of 2 earlier messages]\nOne, two.", through: 2 })
        const lease = yield* threads.acquire("s", { durationMs: 1000 })
        yield* threads.writeSummary("s", { content: "[Summary of 4 earlier messages]\nOne to four.", through: 4 }, { lease })
        // The messages are untouched: every one is still read.
        expect((yield* Threads.messages("s")).messages.map((message) => Model.textOf(message.content))).toEqual(["1", "2", "3", "4", "5", "6"])
        // A lease lost: nothing written. Through past the messages, or empty text: refused, naming the field.
        yield* TestClock.adjust(1001)
        yield* threads.acquire("s", { durationMs: 1000 })
        expect(yield* Effect.flip(threads.writeSummary("s", { content: "[Summary of 5 earlier messages]\nx", through: 5 }, { lease }))).toMatchObject({ _tag: "ThreadBusy", threadId: "s" })
        expect(yield* Effect.flip(threads.writeSummary("s", { content: "x", through: 7 }))).toMatchObject({
          _tag: "ThreadStoreError",
          message: "Threads.writeSummary: through must be an integer in [1, 6] (the thread's messages), got 7"
        })
        expect(yield* Effect.flip(threads.writeSummary("s", { content: "", through: 1 }))).toMatchObject({ _tag: "ThreadStoreError", operation: "writeSummary" })
        expect(yield* Effect.flip(Threads.summary("s", { owner: "grace" }))).toMatchObject({ _tag: "ThreadForbidden" })
        expect(yield* Threads.summary("s")).toMatchObject({ through: 4 })
        // A fork at 4 or later keeps it; one before 4 does not (the summary speaks of messages it does not hold).
        yield* Threads.fork("s", { at: 4, id: "s-at-4" })
        yield* Threads.fork("s", { at: 3, id: "s-at-3" })
        expect(yield* Threads.summary("s-at-4")).toMatchObject({ through: 4 })
        expect(yield* Threads.summary("s-at-3")).toBeUndefined()
        // Deleted with the thread.
        yield* Threads.delete("s")
        yield* Threads.create({ id: "s", owner: "ada" })
        expect(yield* Threads.summary("s")).toBeUndefined()
      })))

    it.effect("a lease: one holder at a time; given back, or expired, it can be taken; a lost lease cannot append", () =>
      withStore(backend, Effect.gen(function*() {
        const threads = yield* Threads.Threads
        yield* Threads.create({ id: "l", owner: "ada" })
        const lease = yield* threads.acquire("l", { durationMs: 1000 })
        expect(yield* Effect.flip(threads.acquire("l", { durationMs: 1000 }))).toMatchObject({ _tag: "ThreadBusy", threadId: "l" })
        yield* threads.append("l", [user("a")], { lease })
        yield* threads.release(lease)
        const second = yield* threads.acquire("l", { durationMs: 1000 })
        // The holder died: its lease expires, another takes the thread, and the first can no longer write.
        yield* TestClock.adjust(1001)
        const third = yield* threads.acquire("l", { durationMs: 1000 })
        expect(yield* Effect.flip(threads.append("l", [user("late")], { lease: second }))).toMatchObject({ _tag: "ThreadBusy" })
        expect(yield* Effect.flip(threads.renew(second, 1000))).toMatchObject({ _tag: "ThreadBusy" })
        yield* threads.renew(third, 5000)
        yield* TestClock.adjust(2000)
        expect(yield* Effect.flip(threads.acquire("l", { durationMs: 1000 }))).toMatchObject({ _tag: "ThreadBusy" })
        expect((yield* Threads.messages("l")).messages).toEqual([user("a")])
      })))

    it.effect("an append with a turn key lands once: the same key again, or several at once, appends nothing more; other keys land", () =>
      withStore(backend, Effect.gen(function*() {
        const threads = yield* Threads.Threads
        yield* Threads.create({ id: "k", owner: "ada" })
        const first = yield* Threads.append("k", [user("q1"), assistant("a1")], { turnKey: "run-1" })
        expect(first.messageCount).toBe(2)
        // The same key again (a turn that repeats its append): nothing appended, the thread answered as it is.
        const again = yield* Threads.append("k", [user("q1"), assistant("a1")], { turnKey: "run-1", owner: "ada" })
        expect(again).toMatchObject({ id: "k", messageCount: 2 })
        // Five appends of one key at once: one lands.
        yield* Effect.forEach([1, 2, 3, 4, 5], () => Threads.append("k", [user("q2"), assistant("a2")], { turnKey: "run-2" }), {
          concurrency: "unbounded"
        })
        // One turn holding its lease, its append run twice at once (two executions of a durable turn): one copy.
        const lease = yield* threads.acquire("k", { durationMs: 60_000, turnKey: "run-3" })
        yield* Effect.forEach([1, 2], () => threads.append("k", [user("q3"), assistant("a3")], { lease, turnKey: "run-3" }), {
          concurrency: "unbounded"
        })
        yield* threads.release(lease)
        // Different keys: both land. A key already stored is answered before the count expected is checked.
        yield* Threads.append("k", [user("q4")], { turnKey: "run-4" })
        yield* Threads.append("k", [assistant("a4")], { turnKey: "run-5" })
        expect((yield* Threads.append("k", [user("q1")], { turnKey: "run-1", expectedCount: 0 })).messageCount).toBe(8)
        expect((yield* Threads.messages("k")).messages).toEqual([
          user("q1"), assistant("a1"), user("q2"), assistant("a2"), user("q3"), assistant("a3"), user("q4"), assistant("a4")
        ])
        // A key is per thread: another thread's turn of the same key lands there.
        yield* Threads.create({ id: "k2", owner: "ada" })
        expect((yield* Threads.append("k2", [user("q1")], { turnKey: "run-1" })).messageCount).toBe(1)
        // A bad key is refused, naming it; a deleted thread's keys go with it.
        expect(yield* Effect.flip(Threads.append("k", [user("x")], { turnKey: "" }))).toMatchObject({
          _tag: "ThreadStoreError",
          threadId: "k",
          message: `Threads.append: turnKey must be a non-empty string of at most 256 characters, got ""`
        })
        yield* Threads.delete("k2")
        yield* Threads.create({ id: "k2", owner: "ada" })
        expect((yield* Threads.append("k2", [user("q1")], { turnKey: "run-1" })).messageCount).toBe(1)
      })))

    it.effect("turnOf: where a keyed turn's messages landed; running while its key's lease holds the thread; else undefined", () =>
      withStore(backend, Effect.gen(function*() {
        const threads = yield* Threads.Threads
        yield* Threads.create({ id: "t", owner: "ada" })
        yield* Threads.append("t", [user("q0")])
        // A turn holding the lease under its key, nothing appended yet: running (another key's is not).
        const lease = yield* threads.acquire("t", { durationMs: 1000, turnKey: "run-1" })
        expect(yield* Threads.turnOf("t", "run-1")).toEqual({ status: "running" })
        expect(yield* Threads.turnOf("t", "run-2")).toBeUndefined()
        yield* threads.append("t", [user("q1"), assistant("a1")], { lease, turnKey: "run-1" })
        yield* threads.release(lease)
        expect(yield* Threads.turnOf("t", "run-1", { owner: "ada" })).toEqual({ status: "appended", start: 1, count: 2 })
        // A lease given back, or expired, without an append: nothing.
        const dropped = yield* threads.acquire("t", { durationMs: 1000, turnKey: "run-2" })
        yield* threads.release(dropped)
        expect(yield* Threads.turnOf("t", "run-2")).toBeUndefined()
        yield* threads.acquire("t", { durationMs: 1000, turnKey: "run-3" })
        yield* TestClock.adjust(1001)
        expect(yield* Threads.turnOf("t", "run-3")).toBeUndefined()
        // A fork does not carry the keys; another owner's thread and a bad key are refused.
        yield* Threads.fork("t", { at: 3, id: "t2" })
        expect(yield* Threads.turnOf("t2", "run-1")).toBeUndefined()
        expect(yield* Effect.flip(Threads.turnOf("t", "run-1", { owner: "bob" }))).toMatchObject({ _tag: "ThreadForbidden" })
        expect(yield* Effect.flip(Threads.turnOf("t", ""))).toMatchObject({ _tag: "ThreadStoreError", threadId: "t" })
      })))

    it.effect("a turn key's lease: taken again by the same turn at once (resumed), by no other turn until given back or expired", () =>
      withStore(backend, Effect.gen(function*() {
        const threads = yield* Threads.Threads
        yield* Threads.create({ id: "r", owner: "ada" })
        // The turn's process died holding the lease: the turn, resumed elsewhere, takes it back at once.
        const held = yield* threads.acquire("r", { durationMs: 1000, turnKey: "run-1" })
        const resumed = yield* threads.acquire("r", { durationMs: 1000, turnKey: "run-1" })
        expect(resumed.threadId).toBe("r")
        // The earlier execution, still ending somewhere, can neither give back nor renew what the resumed one holds.
        yield* threads.release(held)
        expect(yield* Effect.flip(threads.renew(held, 1000))).toMatchObject({ _tag: "ThreadBusy" })
        // Any other turn waits for it.
        expect(yield* Effect.flip(threads.acquire("r", { durationMs: 1000 }))).toMatchObject({ _tag: "ThreadBusy" })
        expect(yield* Effect.flip(threads.acquire("r", { durationMs: 1000, turnKey: "run-2" }))).toMatchObject({ _tag: "ThreadBusy" })
        yield* threads.append("r", [user("q1"), assistant("a1")], { lease: resumed, turnKey: "run-1" })
        // Expired and taken by another turn: the first can no longer take it, nor append a turn not yet stored...
        yield* TestClock.adjust(1001)
        const other = yield* threads.acquire("r", { durationMs: 1000, turnKey: "run-2" })
        expect(yield* Effect.flip(threads.acquire("r", { durationMs: 1000, turnKey: "run-1" }))).toMatchObject({ _tag: "ThreadBusy" })
        expect(yield* Effect.flip(threads.append("r", [user("late")], { lease: held, turnKey: "run-9" }))).toMatchObject({ _tag: "ThreadBusy" })
        // ...but its append already stored is answered, not refused.
        expect((yield* threads.append("r", [user("q1"), assistant("a1")], { lease: held, turnKey: "run-1" })).messageCount).toBe(2)
        yield* threads.release(other)
        const again = yield* threads.acquire("r", { durationMs: 1000, turnKey: "run-1" })
        yield* threads.release(again)
        yield* threads.acquire("r", { durationMs: 1000 })
      })))

    it.effect("working memory: written once, read back, replaced whole; per owner it is shared by the owner's threads", () =>
      withStore(backend, Effect.gen(function*() {
        yield* Threads.create({ id: "m1", owner: "ada" })
        yield* Threads.create({ id: "m2", owner: "ada" })
        const Profile = Schema.Struct({ name: Schema.optional(Schema.String), likes: Schema.Array(Schema.String) })
        const memory = Threads.workingMemory(Profile, { initial: { likes: [] }, scope: "owner" })
        const agent = Agent.make({ name: "assistant", instructions: "Remember." })
        yield* Agent.run(agent, "I am Ada and I like tea.", { thread: { id: "m1", workingMemory: memory } }).pipe(
          Effect.provide(ScriptedModel.layer([
            { toolCalls: [{ id: "w1", name: "update_working_memory", arguments: { name: "Ada", likes: ["tea"] } }] },
            "Noted."
          ]))
        )
        // Another thread of the same owner starts with it, as a system message after the instructions.
        const seen = yield* Effect.gen(function*() {
          yield* Agent.run(agent, "What do I like?", { thread: { id: "m2", workingMemory: memory } })
          return (yield* ScriptedModel.calls)[0]!.messages!
        }).pipe(Effect.provide(ScriptedModel.layer(["Tea."])))
        expect(seen[1]).toEqual({
          role: "system",
          content: `Your working memory (replace it with the update_working_memory tool when something worth remembering changes):\n{"name":"Ada","likes":["tea"]}`
        })
        // A document the schema refuses is a tool error the model reads; the stored one is unchanged.
        const threads = yield* Threads.Threads
        expect(yield* threads.readMemory("owner:ada")).toEqual({ name: "Ada", likes: ["tea"] })
        yield* Agent.run(agent, "Forget it.", { thread: { id: "m1", workingMemory: memory } }).pipe(
          Effect.provide(ScriptedModel.layer([
            { toolCalls: [{ id: "w2", name: "update_working_memory", arguments: { likes: "not a list" } }] },
            "Sorry."
          ]))
        )
        expect(yield* threads.readMemory("owner:ada")).toEqual({ name: "Ada", likes: ["tea"] })
        expect(yield* threads.readMemory("owner:grace")).toBeUndefined()
        // A stored document that no longer fits: named.
        yield* threads.writeMemory("thread:m2", { likes: 3 })
        const error = yield* Effect.flip(Agent.run(agent, "Hi", {
          thread: { id: "m2", workingMemory: Threads.workingMemory(Profile, { initial: { likes: [] } }) }
        }).pipe(Effect.provide(ScriptedModel.layer(["x"]))))
        expect(error).toMatchObject({ _tag: "ThreadStoreError" })
        expect(error.message).toContain(`the working memory "thread:m2" does not fit its schema`)
      })))

    it.effect("turns: the second sees the first; a tool loop is kept whole; each turn appends once", () =>
      withStore(backend, Effect.gen(function*() {
        yield* Threads.create({ id: "chat", owner: "ada" })
        const agent = Agent.make({ name: "calc", instructions: "Use add.", tools: [add] })
        const first = yield* Agent.run(agent, "What is 2 + 3?", { thread: "chat" })
        expect(first.output).toBe("5.")
        const second = yield* Agent.run(agent, "And doubled?", { thread: { id: "chat", owner: "ada" } })
        expect(second.output).toBe("10.")
        const calls = yield* ScriptedModel.calls
        // The second turn's model read the first turn whole: question, call, result, answer, then the new question.
        expect(calls[2]!.messages!.slice(1)).toEqual([
          user("What is 2 + 3?"),
          { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "add", arguments: `{"a":2,"b":3}` }] },
          { role: "tool", toolCallId: "call_1", name: "add", content: "5" },
          assistant("5."),
          user("And doubled?")
        ])
        const page = yield* Threads.messages("chat")
        expect(page.total).toBe(6)
        expect(page.messages.at(-2)).toEqual(user("And doubled?"))
        expect(page.messages.at(-1)).toEqual(assistant("10."))
      }).pipe(Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ id: "call_1", name: "add", arguments: { a: 2, b: 3 } }] },
        "5.",
        "10."
      ])))))

    it.effect("a turn whose task is parts (text and an image): stored and read back whole; the next turn's model sees them", () =>
      withStore(backend, Effect.gen(function*() {
        yield* Threads.create({ id: "look", owner: "ada" })
        const agent = Agent.make({ name: "looker", instructions: "Describe." })
        const task: ReadonlyArray<Model.Part> = [Model.textPart("What is in this picture?"), Model.imagePart({ data: pixel, mediaType: "image/png" })]
        yield* Agent.run(agent, task, { thread: "look" })
        yield* Agent.run(agent, "And its colour?", { thread: "look" })
        const page = yield* Threads.messages("look")
        expect(page.messages).toEqual([{ role: "user", content: task }, assistant("A pixel."), user("And its colour?"), assistant("Clear.")])
        const calls = yield* ScriptedModel.calls
        expect(calls[1]!.messages!.slice(1, 3)).toEqual([{ role: "user", content: task }, assistant("A pixel.")])
      }).pipe(Effect.provide(ScriptedModel.layer(["A pixel.", "Clear."])))))

    it.effect("a tool's image is kept in the thread (run and stream): the next turn's model sees it again", () =>
      withStore(backend, Effect.gen(function*() {
        const shot = Tool.make({
          name: "screenshot",
          description: "Takes a screenshot",
          parameters: Schema.Struct({}),
          handler: () => Effect.succeed("took a screenshot"),
          parts: () => [Model.imagePart({ data: pixel, mediaType: "image/png" })]
        })
        const agent = Agent.make({ name: "viewer", instructions: "Look.", tools: [shot] })
        const image = [Model.imagePart({ data: pixel, mediaType: "image/png" })]
        yield* Threads.create({ id: "shots", owner: "ada" })
        yield* Agent.run(agent, "Look at the screen.", { thread: "shots" })
        yield* Stream.runDrain(Agent.stream(agent, "Again.", { thread: "shots" }))
        const page = yield* Threads.messages("shots")
        // Before: the thread kept the tool's text only; the image the model saw in the turn was gone.
        expect(page.messages.filter((message) => message.role === "tool")).toEqual([
          { role: "tool", toolCallId: "call_1", name: "screenshot", content: "took a screenshot", parts: image },
          { role: "tool", toolCallId: "call_2", name: "screenshot", content: "took a screenshot", parts: image }
        ])
        const calls = yield* ScriptedModel.calls
        expect(calls[2]!.messages!.find((message) => message.role === "tool")).toMatchObject({ parts: image })
      }).pipe(Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ id: "call_1", name: "screenshot", arguments: {} }] },
        "A screen.",
        { toolCalls: [{ id: "call_2", name: "screenshot", arguments: {} }] },
        "The same screen."
      ])))))
  })

// A real 1×1 PNG.
const pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="

conformance(memory)
conformance(sqlite)
conformance(postgres)

// ---------------------------------------------------------------------------------------------------------
// What the SQL store adds: damaged rows, several clients on one database
// ---------------------------------------------------------------------------------------------------------

const sqlConformance = (backend: SqlBackend) =>
  describeOn(backend, `Threads SQL [${backend.name}]`, () => {
    it.effect("a damaged message row is an error naming the thread and the message's index", () =>
      Effect.gen(function*() {
        const client = yield* backend.database
        const store = Threads.layerSql.pipe(Layer.provide(client()))
        yield* Effect.gen(function*() {
          yield* Threads.create({ id: "d", owner: "ada" })
          yield* Threads.append("d", [user("a"), assistant("b"), user("c")])
        }).pipe(Effect.provide(store))
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE valet_thread_messages SET message = ${"{not json"} WHERE thread_id = ${"d"} AND idx = 1`
        }).pipe(Effect.provide(client()))
        const error = yield* Effect.flip(Threads.messages("d").pipe(Effect.provide(store)))
        expect(error).toMatchObject({ _tag: "ThreadStoreError", threadId: "d", index: 1 })
        expect(error.message).toMatch(/^Threads\.messages: message 1 of thread "d" is not JSON/)
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE valet_thread_messages SET message = ${`{"role":"user","content":3}`} WHERE thread_id = ${"d"} AND idx = 1`
        }).pipe(Effect.provide(client()))
        expect(yield* Effect.flip(Threads.messages("d").pipe(Effect.provide(store)))).toMatchObject({ index: 1 })
      }).pipe(Effect.scoped))

    it.effect("a database made before summaries gets their table when a store opens it; a damaged summary row is named", () =>
      Effect.gen(function*() {
        const client = yield* backend.database
        const store = Threads.layerSql.pipe(Layer.provide(client()))
        yield* Effect.gen(function*() {
          yield* Threads.create({ id: "old", owner: "ada" })
          yield* Threads.append("old", [user("a"), assistant("b")])
        }).pipe(Effect.provide(store))
        // As an earlier version left it: no summaries table.
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`DROP TABLE valet_thread_summaries`
        }).pipe(Effect.provide(client()))
        yield* Effect.gen(function*() {
          const threads = yield* Threads.Threads
          expect(yield* Threads.summary("old")).toBeUndefined()
          yield* threads.writeSummary("old", { content: "[Summary of 1 earlier messages]\na", through: 1 })
          expect(yield* Threads.summary("old")).toEqual({ content: "[Summary of 1 earlier messages]\na", through: 1 })
          expect((yield* Threads.messages("old")).messages).toEqual([user("a"), assistant("b")])
        }).pipe(Effect.provide(store))
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`UPDATE valet_thread_summaries SET through = ${0} WHERE thread_id = ${"old"}`
        }).pipe(Effect.provide(client()))
        const error = yield* Effect.flip(Threads.summary("old").pipe(Effect.provide(store)))
        expect(error).toMatchObject({ _tag: "ThreadStoreError", threadId: "old", operation: "summary" })
        expect(error.message).toBe(`Threads.summary: the summary of thread "old" in valet_thread_summaries stands for 0 messages (at least 1)`)
      }).pipe(Effect.scoped))

    it.effect("two stores on one database (two processes): one turn at a time, and both writers' appends land", () =>
      Effect.gen(function*() {
        const client = yield* backend.database
        const one = yield* Layer.build(Threads.layerSql.pipe(Layer.provide(client())))
        const two = yield* Layer.build(Threads.layerSql.pipe(Layer.provide(client())))
        const a = Threads.Threads.of(one.mapUnsafe.get(Threads.Threads.key) as Threads.Service)
        const b = two.mapUnsafe.get(Threads.Threads.key) as Threads.Service
        yield* a.create({ id: "shared", owner: "ada" })
        const lease = yield* a.acquire("shared", { durationMs: 60_000 })
        expect(yield* Effect.flip(b.acquire("shared", { durationMs: 60_000 }))).toMatchObject({ _tag: "ThreadBusy" })
        yield* a.release(lease)
        yield* b.acquire("shared", { durationMs: 60_000 })
        yield* Effect.all([
          Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => a.append("shared", [user(`a${i}`)]), { concurrency: 5 }),
          Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => b.append("shared", [user(`b${i}`)]), { concurrency: 5 })
        ], { concurrency: "unbounded" })
        expect((yield* a.messages("shared")).total).toBe(20)
      }).pipe(Effect.scoped))
    it.effect("two stores (two processes) append one turn at once, ten times over: one copy of each turn", () =>
      Effect.gen(function*() {
        const client = yield* backend.database
        const one = (yield* Layer.build(Threads.layerSql.pipe(Layer.provide(client())))).mapUnsafe.get(Threads.Threads.key) as Threads.Service
        const two = (yield* Layer.build(Threads.layerSql.pipe(Layer.provide(client())))).mapUnsafe.get(Threads.Threads.key) as Threads.Service
        yield* one.create({ id: "twice", owner: "ada" })
        for (let turn = 0; turn < 10; turn++) {
          yield* Effect.all([one, two, one, two].map((store) =>
            store.append("twice", [user(`q${turn}`), assistant(`a${turn}`)], { turnKey: `run-${turn}` })
          ), { concurrency: "unbounded" })
        }
        const page = yield* one.messages("twice")
        expect(page.messages.map((message) => Model.textOf(message.content))).toEqual(Array.from({ length: 10 }, (_, i) => [`q${i}`, `a${i}`]).flat())
      }).pipe(Effect.scoped))

    it.effect("a database made before turn keys (no valet_thread_turns) gets the table when a store opens it", () =>
      Effect.gen(function*() {
        const client = yield* backend.database
        yield* Effect.gen(function*() {
          yield* Threads.create({ id: "old", owner: "ada" })
          yield* Threads.append("old", [user("q0"), assistant("a0")])
        }).pipe(Effect.provide(Threads.layerSql.pipe(Layer.provide(client()))))
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`DROP TABLE valet_thread_turns`
        }).pipe(Effect.provide(client()))
        yield* Effect.gen(function*() {
          yield* Threads.append("old", [user("q1")], { turnKey: "run-1" })
          yield* Threads.append("old", [user("q1")], { turnKey: "run-1" })
          expect((yield* Threads.messages("old")).messages).toEqual([user("q0"), assistant("a0"), user("q1")])
        }).pipe(Effect.provide(Threads.layerSql.pipe(Layer.provide(client()))))
      }).pipe(Effect.scoped))
  })

sqlConformance(sqlite)
sqlConformance(postgres)

// ---------------------------------------------------------------------------------------------------------
// Turns: how a turn ends is what it keeps
// ---------------------------------------------------------------------------------------------------------

describe("Turns on a thread", () => {
  const agent = Agent.make({ name: "assistant", instructions: "Be brief." })
  const withThread = <A, E, R>(program: Effect.Effect<A, E, R>) =>
    Effect.gen(function*() {
      yield* Threads.create({ id: "t", owner: "ada" })
      return yield* program
    }).pipe(Effect.provide(Threads.layerMemory()))

  it.effect("a task the input guardrails refused is not kept: the next turn's model never reads it", () =>
    withThread(Effect.gen(function*() {
      const guarded = Agent.make({ name: "guarded", instructions: "Be brief.", guardrails: { input: [Guardrail.redact({ mode: "trip" })] } })
      const refused = yield* Effect.flip(Agent.run(guarded, "My card is 4111 1111 1111 1111.", { thread: "t" }))
      expect(refused).toMatchObject({ _tag: "GuardrailTripped", kind: "input" })
      yield* Agent.run(guarded, "Hello?", { thread: "t" })
      // Before: the refused task was stored with a note, and the next turn sent it to the model unchecked. (The
      // refused turn's own first call may have gone out beside the check: only the next turn's calls are looked at.)
      const calls = (yield* ScriptedModel.calls).filter((call) => JSON.stringify(call.messages).includes("Hello?"))
      expect(calls).toHaveLength(1)
      expect(JSON.stringify(calls[0]!.messages)).not.toContain("4111")
      expect((yield* Threads.messages("t")).messages).toEqual([user("Hello?"), assistant("Hi.")])
    })).pipe(Effect.provide(ScriptedModel.layer(() => "Hi."))))

  it.effect("an interrupted turn (a spent budget) keeps the task and a note with its partial answer; a failed one, a note", () =>
    withThread(Effect.gen(function*() {
      const calc = Agent.make({ name: "calc", instructions: "x", tools: [add] })
      const cut = yield* Agent.run(calc, "Add forever", { thread: "t", budget: { maxCalls: 1 } }).pipe(
        Effect.provide(ScriptedModel.layer([{ text: "Working", toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }] }]))
      )
      expect(cut.interrupted).toBe(true)
      const failed = yield* Effect.flip(Agent.run(agent, "Hello?", { thread: "t" }).pipe(Effect.provide(ScriptedModel.layer([]))))
      expect(failed._tag).toBe("ScriptExhausted")
      // Never half a tool exchange: the call and its result are not kept, the note is.
      expect((yield* Threads.messages("t")).messages).toEqual([
        user("Add forever"),
        assistant(`${cut.output === "" ? "" : `${cut.output}\n\n`}(This turn ended early: budget:max_calls.)`),
        user("Hello?"),
        assistant("(This turn ended early: failed (ScriptExhausted).)")
      ])
      // "drop" keeps nothing; a function keeps what it says.
      yield* Effect.flip(Agent.run(agent, "Again?", { thread: { id: "t", incomplete: "drop" } }).pipe(Effect.provide(ScriptedModel.layer([]))))
      yield* Effect.flip(Agent.run(agent, "Once more?", { thread: { id: "t", incomplete: ({ task }) => [user(task)] } }).pipe(Effect.provide(ScriptedModel.layer([]))))
      const after = yield* Threads.messages("t")
      expect(after.messages.slice(4)).toEqual([user("Once more?")])
    })))

  it.effect("expectedCount: a turn finding another count under its lease fails with ThreadBusy before its model is called", () =>
    withThread(Effect.gen(function*() {
      yield* Agent.run(agent, "First?", { thread: "t" })
      const refused = yield* Effect.flip(Agent.run(agent, "Second?", { thread: { id: "t", expectedCount: 0 } }))
      expect(refused).toMatchObject({ _tag: "ThreadBusy", threadId: "t" })
      expect(refused.message).toMatch(/holds 2 messages, not the 0/)
      expect(yield* ScriptedModel.calls).toHaveLength(1)
      yield* Agent.run(agent, "Second?", { thread: { id: "t", expectedCount: 2 } })
      expect((yield* Threads.messages("t")).total).toBe(4)
    })).pipe(Effect.provide(ScriptedModel.layer(() => "Hi."))))

  it.effect("two turns at once: the second fails with ThreadBusy, or with onBusy: wait runs after the first", () =>
    withThread(Effect.gen(function*() {
      // The first turn's model answers after a second: the thread is held meanwhile.
      const slow = ScriptedModel.layer([{ text: "first", delay: "1 second" }, "second", "third"])
      yield* Effect.gen(function*() {
        const first = yield* Effect.forkChild(Agent.run(agent, "one", { thread: "t" }))
        yield* TestClock.adjust(10)
        expect(yield* Effect.flip(Agent.run(agent, "two", { thread: "t" }))).toMatchObject({ _tag: "ThreadBusy", threadId: "t" })
        const waiting = yield* Effect.forkChild(Agent.run(agent, "three", { thread: { id: "t", onBusy: "wait" } }))
        yield* TestClock.adjust(2000)
        expect((yield* Fiber.join(first)).output).toBe("first")
        expect((yield* Fiber.join(waiting)).output).toBe("second")
      }).pipe(Effect.provide(slow))
      expect((yield* Threads.messages("t")).messages).toEqual([user("one"), assistant("first"), user("three"), assistant("second")])
    })))

  it.effect("an interrupted run (its fiber) keeps the note and gives the thread back", () =>
    withThread(Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(Agent.run(agent, "Long question", { thread: "t" }).pipe(
        Effect.provide(ScriptedModel.layer([{ text: "never", delay: "1 minute" }]))
      ))
      yield* TestClock.adjust(10)
      yield* Fiber.interrupt(fiber)
      expect((yield* Threads.messages("t")).messages).toEqual([user("Long question"), assistant("(This turn ended early: interrupted.)")])
      // The lease was given back: the next turn runs at once.
      const next = yield* Agent.run(agent, "Again", { thread: "t" }).pipe(Effect.provide(ScriptedModel.layer(["ok"])))
      expect(next.output).toBe("ok")
    })))

  it.effect("a streamed turn keeps what the run ended with; a reader that stops early keeps the note", () =>
    withThread(Effect.gen(function*() {
      const events = yield* Stream.runCollect(Agent.stream(agent, "Hi", { thread: "t" }).pipe(Stream.provide(ScriptedModel.layer(["Hello there."]))))
      expect(events.at(-1)?._tag).toBe("RunCompleted")
      yield* Stream.runDrain(Agent.stream(agent, "Tell me more", { thread: "t" }).pipe(
        Stream.take(1),
        Stream.provide(ScriptedModel.layer([{ text: "More", delay: "1 second" }]))
      ))
      expect((yield* Threads.messages("t")).messages).toEqual([
        user("Hi"),
        assistant("Hello there."),
        user("Tell me more"),
        assistant("(This turn ended early: interrupted.)")
      ])
    })))

  it.effect("a turn with an owner that is not the thread's, or on a thread that does not exist, is refused; nothing kept", () =>
    withThread(Effect.gen(function*() {
      expect(yield* Effect.flip(Agent.run(agent, "q4", { thread: { id: "t", owner: "grace" } }).pipe(Effect.provide(ScriptedModel.layer(["x"])))))
        .toMatchObject({ _tag: "ThreadForbidden", threadId: "t" })
      expect(yield* Effect.flip(Agent.run(agent, "q4", { thread: "missing" }).pipe(Effect.provide(ScriptedModel.layer(["x"])))))
        .toMatchObject({ _tag: "ThreadNotFound", threadId: "missing" })
      expect((yield* Threads.get("t")).messageCount).toBe(0)
    })))

  it.effect("the page given: from the first user message of the last historyLimit messages", () =>
    withThread(Effect.gen(function*() {
      // A tool exchange, then a second question: the last 4 start inside the exchange.
      yield* Threads.append("t", [
        user("q1"),
        { role: "assistant", content: "", toolCalls: [{ id: "c", name: "add", arguments: "{}" }] },
        { role: "tool", toolCallId: "c", name: "add", content: "0" },
        assistant("a1"),
        user("q2"),
        assistant("a2")
      ])
      const seen = yield* Effect.gen(function*() {
        yield* Agent.run(agent, "q3", { thread: { id: "t", historyLimit: 4 } })
        return (yield* ScriptedModel.calls)[0]!.messages!
      }).pipe(Effect.provide(ScriptedModel.layer(["a3"])))
      // The last 4 are [tool, a1, q2, a2]: cut back to q2.
      expect(seen.slice(1)).toEqual([user("q2"), assistant("a2"), user("q3")])
    })))
})

describe("What a turn keeps (internals)", () => {
  const call = (id: string): Model.Message => ({ role: "assistant", content: "", toolCalls: [{ id, name: "add", arguments: "{}" }] })
  const result = (id: string): Model.Message => ({ role: "tool", toolCallId: id, name: "add", content: "0" })

  it("the history given never ends in a call without its result (a thread forked inside an exchange)", () => {
    expect(Turn.fromFirstUserMessage([result("x"), user("q"), call("a"), result("a"), assistant("a1"), user("q2"), call("b")]))
      .toEqual([user("q"), call("a"), result("a"), assistant("a1"), user("q2")])
    expect(Turn.fromFirstUserMessage([call("a"), result("a")])).toEqual([])
  })

  it("a transcript is one tool loop ending in the answer: a reply before the last without calls is not one", () => {
    const replied = (text: string, calls: ReadonlyArray<{ id: string }> = []) =>
      ({ _tag: "ModelReplied", sessionId: "s", timestamp: 0, step: "x", text, toolCalls: calls.map((c) => ({ ...c, name: "add", arguments: "{}" })), finishReason: "stop", usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, latencyMs: 0 }) as const
    const returned = (id: string) => ({ _tag: "ToolReturned", sessionId: "s", timestamp: 0, toolCallId: id, name: "add", content: "0", isError: false, durationMs: 0 }) as const
    expect(Turn.transcriptOf([replied("", [{ id: "a" }]), returned("a"), replied("done")], "done")).toHaveLength(3)
    // A plan, then an answer (ReWOO without steps): not a conversation to keep as is.
    expect(Turn.transcriptOf([replied("[]"), replied("done")], "done")).toBeUndefined()
    // A call never answered, or an answer that is not the output: not kept as is.
    expect(Turn.transcriptOf([replied("", [{ id: "a" }]), replied("done")], "done")).toBeUndefined()
    expect(Turn.transcriptOf([replied("other")], "done")).toBeUndefined()
  })
})

// ---------------------------------------------------------------------------------------------------------
// Semantic recall: vectors in every store (memory, SQLite scan, sqlite-vec, PostgreSQL scan, pgvector when the
// server has it), and turns that recall
// ---------------------------------------------------------------------------------------------------------

interface RecallBackend {
  readonly label: string
  readonly postgres: boolean
  /** The searches the store may report (pgvector only where the server has the extension). */
  readonly expected: ReadonlyArray<Threads.VectorSearch>
  readonly fresh: Effect.Effect<{
    readonly store: Layer.Layer<Threads.Threads, Threads.ThreadStoreError | SqlError.SqlError>
    readonly client?: () => Layer.Layer<SqlClient.SqlClient, SqlError.SqlError>
  }, SqlError.SqlError, Scope.Scope>
}

const sqliteWith = (config: Partial<SqliteClient.SqliteClientConfig>) =>
  Effect.map(sqliteDatabase, () => {
    const filename = join(dir, `t${files}`, "threads.sqlite3")
    const client = () => SqliteClient.layer({ filename, ...config })
    return { store: Threads.layerSql.pipe(Layer.provide(client())), client }
  })

const recallBackends: ReadonlyArray<RecallBackend> = [
  { label: "memory", postgres: false, expected: ["memory"], fresh: Effect.succeed({ store: Threads.layerMemory() }) },
  // No extension loaded: the scan, as on a machine without the optional sqlite-vec package.
  { label: "sqlite (scan)", postgres: false, expected: ["scan"], fresh: sqliteWith({}) },
  { label: "sqlite (sqlite-vec)", postgres: false, expected: ["sqlite-vec"], fresh: sqliteWith({ sqliteVec: true }) },
  {
    label: "postgres (scan)",
    postgres: true,
    expected: ["scan"],
    fresh: Effect.map(freshSchema, (schema) => ({ store: Threads.layerSqlWith({ vectorSearch: "scan" }).pipe(Layer.provide(schema.client())), client: schema.client }))
  },
  {
    label: "postgres (auto: pgvector when the server has it)",
    postgres: true,
    expected: ["pgvector", "scan"],
    fresh: Effect.map(freshSchema, (schema) => ({ store: Threads.layerSql.pipe(Layer.provide(schema.client())), client: schema.client }))
  }
]

// Without the little words, texts are near by what they are about.
const stopWords = new Set(["is", "the", "my", "what", "a", "on", "i"])
const hashed = (text: string) => HashedEmbeddingModel.vectorOf(text, 64, stopWords)

const recallConformance = (backend: RecallBackend) =>
  (backend.postgres ? describePostgres : describe)(`Threads recall [${backend.label}]`, () => {
    it.effect("top k of the owner by cosine; one thread; the page left out; fork copies the vectors, delete removes them", () =>
      Effect.flatMap(backend.fresh, ({ store }) =>
        Effect.gen(function*() {
          const threads = yield* Threads.Threads
          expect(backend.expected).toContain(threads.vectorSearch)
          const texts: Record<string, ReadonlyArray<string>> = {
            t1: ["my cat is called Tom", "the invoice is due on Friday", "I like green tea"],
            t2: ["Tom the cat likes fish", "the weather is sunny"],
            g1: ["my cat is called Tom"]
          }
          for (const [id, contents] of Object.entries(texts)) {
            yield* Threads.create({ id, owner: id === "g1" ? "grace" : "ada" })
            yield* Threads.append(id, contents.map(user))
            yield* Threads.storeVectors(id, "hashed-64", contents.map((content, index) => ({ index, vector: hashed(content) })))
          }
          const query = { owner: "ada", model: "hashed-64", vector: hashed("what is my cat called"), topK: 2 }
          const best = yield* Threads.recall(query)
          // Grace's identical message is not Ada's.
          expect(best.map((hit) => [hit.threadId, hit.index, hit.message.content])).toEqual([
            ["t1", 0, "my cat is called Tom"],
            ["t2", 0, "Tom the cat likes fish"]
          ])
          expect(best[0]!.score).toBeGreaterThan(best[1]!.score)
          expect(best[0]!.score).toBeCloseTo(EmbeddingModel.cosineSimilarity(query.vector, hashed("my cat is called Tom")), 5)
          // The page a turn already shows (t1 from 0) is left out; one thread only; a threshold; another model.
          expect((yield* Threads.recall({ ...query, exclude: { threadId: "t1", start: 0 } })).map((hit) => hit.threadId)).toEqual(["t2", "t2"])
          expect((yield* Threads.recall({ ...query, exclude: { threadId: "t1", start: 1 }, topK: 1 }))[0]).toMatchObject({ threadId: "t1", index: 0 })
          expect((yield* Threads.recall({ ...query, threadId: "t2", topK: 5 })).map((hit) => hit.index).sort()).toEqual([0, 1])
          expect(yield* Threads.recall({ ...query, minScore: 0.99 })).toEqual([])
          expect(yield* Threads.recall({ ...query, model: "other" })).toEqual([])
          // A message's vector replaced: stored again, it ranks by the new one.
          yield* Threads.storeVectors("t1", "hashed-64", [{ index: 0, vector: hashed("nothing alike") }])
          expect((yield* Threads.recall({ ...query, topK: 1 }))[0]).toMatchObject({ threadId: "t2", index: 0 })
          yield* Threads.storeVectors("t1", "hashed-64", [{ index: 0, vector: hashed("my cat is called Tom") }])
          // Refused, by index: a message that does not exist, a zero vector, lengths that differ, another owner.
          expect(yield* Effect.flip(Threads.storeVectors("t1", "hashed-64", [{ index: 3, vector: hashed("x") }])))
            .toMatchObject({ _tag: "ThreadStoreError", threadId: "t1", message: `Threads.storeVectors: index 3 is not a message of thread "t1" (it holds 3)` })
          expect(yield* Effect.flip(Threads.storeVectors("t1", "hashed-64", [{ index: 1, vector: [0, 0] }])))
            .toMatchObject({ index: 1, message: `Threads.storeVectors: the vector of message 1 of thread "t1" cannot be stored: it is all zeros (no direction to compare)` })
          expect(yield* Effect.flip(Threads.storeVectors("t1", "hashed-64", [{ index: 0, vector: [1, 0] }, { index: 1, vector: [1] }])))
            .toMatchObject({ index: 1 })
          expect(yield* Effect.flip(Threads.storeVectors("t1", "hashed-64", [], { owner: "grace" }))).toMatchObject({ _tag: "ThreadForbidden" })
          expect(yield* Effect.flip(Threads.recall({ ...query, topK: 0 }))).toMatchObject({ message: "Threads.recall: topK must be an integer in [1, 100], got 0" })
          // Fork at 1: the copy holds message 0 and its vector, no more.
          yield* Threads.fork("t1", { at: 1, id: "f1" })
          expect((yield* Threads.recall({ ...query, threadId: "f1", topK: 5 })).map((hit) => [hit.index, hit.message.content])).toEqual([[0, "my cat is called Tom"]])
          // Deleted with its thread; the fork keeps its own.
          yield* Threads.delete("t1")
          expect((yield* Threads.recall({ ...query, topK: 5 })).map((hit) => `${hit.threadId}#${hit.index}`)).toEqual(["f1#0", "t2#0", "t2#1"])
        }).pipe(Effect.provide(store))).pipe(Effect.scoped))

    if (backend.label !== "memory") {
      it.effect("a damaged vector row is an error naming the thread and the message's index", () =>
        Effect.flatMap(backend.fresh, ({ client, store }) =>
          Effect.gen(function*() {
            yield* Effect.gen(function*() {
              yield* Threads.create({ id: "d", owner: "ada" })
              yield* Threads.append("d", [user("my cat is called Tom"), user("tea"), user("coffee")])
              yield* Threads.storeVectors("d", "hashed-64", [0, 1, 2].map((index) => ({ index, vector: hashed(["my cat is called Tom", "tea", "coffee"][index]!) })))
            }).pipe(Effect.provide(store))
            yield* Effect.gen(function*() {
              const sql = yield* SqlClient.SqlClient
              yield* sql`UPDATE valet_thread_vectors SET vector = ${new Uint8Array([1, 2, 3])} WHERE thread_id = ${"d"} AND idx = 1`
            }).pipe(Effect.provide(client!()))
            const error = yield* Effect.flip(Threads.recall({ owner: "ada", model: "hashed-64", vector: hashed("cat"), topK: 1 }).pipe(Effect.provide(store)))
            expect(error).toMatchObject({ _tag: "ThreadStoreError", threadId: "d", index: 1 })
            expect(error.message).toBe(`Threads.recall: the vector of message 1 of thread "d" in valet_thread_vectors is damaged: the vector holds 3 bytes, not 256 (64 float32 dimensions)`)
          })).pipe(Effect.scoped))
    }
  })

for (const backend of recallBackends) recallConformance(backend)

describe("Turns with recall", () => {
  const agent = Agent.make({ name: "assistant", instructions: "Be brief." })
  const recall = { topK: 2 } as const
  const withThreads = <A, E, R>(program: Effect.Effect<A, E, R>) =>
    Effect.gen(function*() {
      yield* Threads.create({ id: "a", owner: "ada" })
      yield* Threads.create({ id: "b", owner: "ada" })
      return yield* program
    }).pipe(Effect.provide(Threads.layerMemory()))

  it.effect("another thread of the owner is shown the nearest past messages, after the working memory; its own page is not repeated", () =>
    withThreads(Effect.gen(function*() {
      yield* Agent.run(agent, "My cat is called Tom.", { thread: { id: "a", recall } }).pipe(Effect.provide(ScriptedModel.layer(["Nice name."])))
      // Both messages were embedded once appended, in one call.
      expect(yield* HashedEmbeddingModel.calls).toEqual([["My cat is called Tom."], ["My cat is called Tom.", "Nice name."]])
      const memory = Threads.workingMemory(Schema.Struct({ likes: Schema.Array(Schema.String) }), { initial: { likes: [] } })
      const seen = yield* Effect.gen(function*() {
        yield* Agent.run(agent, "What is my cat called?", { thread: { id: "b", recall, workingMemory: memory } })
        return (yield* ScriptedModel.calls)[0]!.messages!
      }).pipe(Effect.provide(ScriptedModel.layer(["Tom."])))
      expect(seen.map((message) => message.role)).toEqual(["system", "system", "system", "user"])
      expect(seen[1]!.content).toMatch(/^Your working memory/)
      expect(seen[2]).toEqual({
        role: "system",
        content: "Messages from earlier conversations that may be relevant (most relevant first):\n[user, thread a] My cat is called Tom.\n[assistant, thread a] Nice name."
      })
      // In thread a itself, the same messages are in the history page: not recalled again.
      const again = yield* Effect.gen(function*() {
        yield* Agent.run(agent, "And my cat?", { thread: { id: "a", recall } })
        return (yield* ScriptedModel.calls)[0]!.messages!
      }).pipe(Effect.provide(ScriptedModel.layer(["Tom."])))
      // (Thread b's messages are recalled; thread a's own, in the page, are not.)
      expect(again[1]!.content).toMatch(/^Messages from earlier conversations[^]*\[user, thread b\] What is my cat called\?/)
      expect(again[1]!.content).not.toContain("thread a")
      expect(again.slice(2)).toEqual([user("My cat is called Tom."), assistant("Nice name."), user("And my cat?")])
      // Scope "thread": thread b sees only its own.
      const own = yield* Effect.gen(function*() {
        yield* Agent.run(agent, "Tom?", { thread: { id: "b", recall: { ...recall, scope: "thread" }, historyLimit: 1 } })
        return (yield* ScriptedModel.calls)[0]!.messages!
      }).pipe(Effect.provide(ScriptedModel.layer(["Yes."])))
      // Only b's first message: its last one is the page given (historyLimit 1), left out.
      expect(own[1]!.content).toBe("Messages from earlier conversations that may be relevant (most relevant first):\n[user, thread b] What is my cat called?")
    })).pipe(Effect.provide(HashedEmbeddingModel.layer({ dimensions: 64 }))))

  it.effect("a task given as parts: recall embeds its text only (never an image's base64)", () =>
    withThreads(Effect.gen(function*() {
      const task = [Model.textPart("My cat is in this picture."), Model.imagePart({ data: pixel, mediaType: "image/png" })]
      yield* Agent.run(agent, task, { thread: { id: "a", recall } }).pipe(Effect.provide(ScriptedModel.layer(["Cute."])))
      expect(yield* HashedEmbeddingModel.calls).toEqual([["My cat is in this picture."], ["My cat is in this picture.", "Cute."]])
    })).pipe(Effect.provide(HashedEmbeddingModel.layer({ dimensions: 64 }))))

  it.effect("an embedding failure: skipped, the turn runs without recall and keeps its messages (without vectors); onError fail: the turn fails first, nothing kept", () =>
    withThreads(Effect.gen(function*() {
      yield* Threads.append("a", [user("My cat is called Tom.")])
      yield* Threads.storeVectors("a", "hashed-64", [{ index: 0, vector: hashed("My cat is called Tom.") }])
      const down = HashedEmbeddingModel.layer({ dimensions: 64, failWith: () => new ModelError.ServerError({ status: 503, message: "embeddings down" }) })
      const seen = yield* Effect.gen(function*() {
        const result = yield* Agent.run(agent, "What is my cat called?", { thread: { id: "b", recall } })
        return { result, messages: (yield* ScriptedModel.calls)[0]!.messages! }
      }).pipe(Effect.provide(ScriptedModel.layer(["I do not know."])), Effect.provide(down))
      expect(seen.result.output).toBe("I do not know.")
      expect(seen.messages.slice(1)).toEqual([user("What is my cat called?")])
      expect((yield* Threads.messages("b")).messages).toEqual([user("What is my cat called?"), assistant("I do not know.")])
      expect(yield* Threads.recall({ owner: "ada", model: "hashed-64", vector: hashed("What is my cat called?"), topK: 5, threadId: "b" })).toEqual([])
      const failed = yield* Effect.flip(Agent.run(agent, "Again?", { thread: { id: "b", recall: { ...recall, onError: "fail" } } }).pipe(
        Effect.provide(ScriptedModel.layer(["never"])),
        Effect.provide(down)
      ))
      expect(failed).toMatchObject({ _tag: "ServerError", message: "embeddings down" })
      expect((yield* Threads.messages("b")).total).toBe(2)
    })))

  it.effect("a turn whose keyed append was answered by an earlier one (a durable turn resumed after another turn appended) stores no vector on another turn's messages", () =>
    withThreads(Effect.gen(function*() {
      const threads = yield* Threads.Threads
      // The store as `Durable.durableThreads` makes it for run-1: the lease and the append keyed by the turn.
      const keyed: Threads.Service = {
        ...threads,
        acquire: (id, options) => threads.acquire(id, { ...options, turnKey: "run-1" }),
        append: (id, messages, options) => threads.append(id, messages, { ...options, turnKey: "run-1" })
      }
      // run-1's first execution appended its messages and died before storing their vectors; another turn then ran.
      yield* Threads.append("a", [user("My cat is called Tom."), assistant("Nice name.")], { turnKey: "run-1" })
      yield* Threads.append("a", [user("The invoice is due on Friday."), assistant("Noted.")])
      // run-1 resumed: its append is answered (nothing appended), the thread's count now 4.
      yield* Agent.run(agent, "My cat is called Tom.", { thread: { id: "a", recall } }).pipe(
        Effect.provide(ScriptedModel.layer(["Nice name."])),
        Effect.provideService(Threads.Threads, keyed)
      )
      expect((yield* Threads.messages("a")).total).toBe(4)
      // As the layer embeds (no stop words).
      const embed = (text: string) => HashedEmbeddingModel.vectorOf(text, 64)
      const query = embed("My cat is called Tom.")
      const found = yield* Threads.recall({ owner: "ada", model: "hashed-64", vector: query, topK: 5, threadId: "a" })
      // Every vector recalled is the vector of the message it is stored with: none of run-1's texts on messages 2, 3.
      for (const hit of found) expect(hit.score).toBeCloseTo(EmbeddingModel.cosineSimilarity(query, embed(Model.textOf(hit.message.content))), 5)
      expect(found.map((hit) => hit.index).filter((index) => index >= 2)).toEqual([])
    })).pipe(Effect.provide(HashedEmbeddingModel.layer({ dimensions: 64 }))))

  it.effect("recall without an EmbeddingModel is refused, saying what to provide; nothing kept", () =>
    withThreads(Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.run(agent, "Hi", { thread: { id: "a", recall } }).pipe(Effect.provide(ScriptedModel.layer(["x"]))))
      expect(error).toMatchObject({ _tag: "ThreadStoreError", threadId: "a" })
      expect(error.message).toContain("Threads: recall needs an EmbeddingModel")
      expect((yield* Threads.get("a")).messageCount).toBe(0)
    })))
})

describePostgres("Threads recall [postgres: vectors written before pgvector]", () => {
  it.effect("a store opened with pgvector fills in the column for the vectors a scan store wrote, and finds them", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      yield* Effect.gen(function*() {
        expect((yield* Threads.Threads).vectorSearch).toBe("scan")
        yield* Threads.create({ id: "old", owner: "ada" })
        yield* Threads.append("old", [user("my cat is called Tom"), user("the weather is sunny")])
        yield* Threads.storeVectors("old", "hashed-64", [{ index: 0, vector: hashed("my cat is called Tom") }, { index: 1, vector: hashed("the weather is sunny") }])
      }).pipe(Effect.provide(Threads.layerSqlWith({ vectorSearch: "scan" }).pipe(Layer.provide(schema.client()))))
      const found = yield* Threads.recall({ owner: "ada", model: "hashed-64", vector: hashed("what is my cat called"), topK: 1 }).pipe(
        Effect.provide(Threads.layerSql.pipe(Layer.provide(schema.client())))
      )
      expect(found.map((hit) => [hit.threadId, hit.index])).toEqual([["old", 0]])
    }).pipe(Effect.scoped))

  it.effect("vectors a scan store writes while a pgvector store is open are found by it, not taken for damaged rows", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema
      const auto = yield* Layer.build(Threads.layerSql.pipe(Layer.provide(schema.client())))
      const search = Effect.map(Threads.Threads, (threads) => threads.vectorSearch).pipe(Effect.provideContext(auto))
      // Only where the server has pgvector is there anything to check.
      if ((yield* search) !== "pgvector") return
      yield* Effect.gen(function*() {
        yield* Threads.create({ id: "late", owner: "ada" })
        yield* Threads.append("late", [user("my cat is called Tom"), user("the weather is sunny")])
        yield* Threads.storeVectors("late", "hashed-64", [{ index: 0, vector: hashed("my cat is called Tom") }, { index: 1, vector: hashed("the weather is sunny") }])
      }).pipe(Effect.provide(Threads.layerSqlWith({ vectorSearch: "scan" }).pipe(Layer.provide(schema.client()))))
      const found = yield* Threads.recall({ owner: "ada", model: "hashed-64", vector: hashed("what is my cat called"), topK: 1 }).pipe(Effect.provideContext(auto))
      expect(found.map((hit) => [hit.threadId, hit.index])).toEqual([["late", 0]])
    }).pipe(Effect.scoped))
})

/**
 * Threads over HTTP (`RunsApi`'s thread routes) on a loopback `Server.layerNode` with a thread store: create, turns
 * through `Runs` (the second turn's model reads the first), the owner from the app's function (never the body),
 * another owner's thread 403, a thread in a turn 409, paging, delete; and a server without a store answering 501.
 * The agents run on scripted models whose requests the tests read back.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Layer, Schema } from "effect"
import { HttpServerRequest } from "effect/http"
import { SqlClient } from "effect/sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Agent from "../../src/core/Agent.js"
import * as EmbeddingModel from "../../src/core/EmbeddingModel.js"
import * as HashedEmbeddingModel from "../../src/core/HashedEmbeddingModel.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Threads from "../../src/core/Threads.js"
import * as SqliteClient from "../../src/environment/SqliteClient.js"
import type * as Runs from "../../src/serve/Runs.js"
import * as RunsApi from "../../src/serve/RunsApi.js"
import type * as Server from "../../src/serve/Server.js"
import { serveAgents } from "../support/serve.js"

/** An agent on a scripted model (one script over all its runs) whose requests the test reads back. */
const inspected = (name: string, script: ScriptedModel.Script) => {
  const context = ScriptedModel.context(script)
  const agent = Agent.make({
    name,
    instructions: "Be brief.",
    model: Layer.succeed(Model.Model, Context.get(context, Model.Model))
  }) as Agent.Agent<never>
  return { agent, calls: ScriptedModel.calls.pipe(Effect.provide(context)) }
}

/** The app's auth: the owner is the `x-user` header; no header, no owner (401). */
const ownerFromHeader: RunsApi.OwnerOf = Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
  const user = request.headers["x-user"]
  return user === undefined || user === ""
    ? Effect.fail(new RunsApi.Unauthorized({ message: "sign in: no x-user header" }))
    : Effect.succeed(user)
})

/** The server with these agents and a memory thread store (none with `threads: false`), for the scope. */
const serve = (
  agents: ReadonlyArray<Agent.Agent<never>>,
  options: Server.Options & { readonly threads?: boolean | Layer.Layer<Threads.Threads> } = {}
) => {
  const { threads = true, ...rest } = options
  return serveAgents(agents, rest, threads === true ? Threads.layerMemory() : threads === false ? undefined : threads)
}

interface Reply {
  readonly status: number
  readonly body: any
}

const call = (method: string, url: string, options: { readonly body?: unknown; readonly user?: string } = {}) =>
  Effect.promise(async (): Promise<Reply> => {
    const response = await fetch(url, {
      method,
      headers: {
        ...(options.body !== undefined ? { "content-type": "application/json" } : {}),
        ...(options.user !== undefined ? { "x-user": options.user } : {})
      },
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {})
    })
    const text = await response.text()
    return { status: response.status, body: text === "" ? undefined : (text.startsWith("{") ? JSON.parse(text) : text) }
  })

/** Reads a run's event stream to its end (the run is over then). */
const finished = (url: string, runId: string, user?: string) =>
  Effect.promise(() => fetch(`${url}/runs/${runId}/events`, user !== undefined ? { headers: { "x-user": user } } : {}).then((r) => r.text()))

describe("RunsApi: threads over HTTP", () => {
  it.live("create → two runs on the thread → the second's model read the first; get pages the messages", () =>
    Effect.gen(function*() {
      const assistant = inspected("assistant", ["Hello, Ada.", "Your name is Ada."])
      const url = yield* serve([assistant.agent], { owner: ownerFromHeader })
      const created = yield* call("POST", `${url}/threads`, { user: "ada", body: { id: "chat-1", metadata: { title: "names" } } })
      expect(created.status).toBe(201)
      expect(created.body).toMatchObject({ id: "chat-1", owner: "ada", metadata: { title: "names" }, messageCount: 0 })

      const first = yield* call("POST", `${url}/threads/chat-1/runs`, { user: "ada", body: { agent: "assistant", input: "My name is Ada." } })
      expect(first.status).toBe(201)
      yield* finished(url, first.body.runId, "ada")
      const second = yield* call("POST", `${url}/threads/chat-1/runs`, { user: "ada", body: { agent: "assistant", input: "What is my name?" } })
      expect(second.status).toBe(201)
      const events = yield* finished(url, second.body.runId, "ada")
      expect(events).toContain("Your name is Ada.")

      const requests = yield* assistant.calls
      expect(requests[1]!.messages).toEqual([
        Model.system("Be brief."),
        Model.user("My name is Ada."),
        Model.assistant("Hello, Ada."),
        Model.user("What is my name?")
      ])
      const run = yield* call("GET", `${url}/runs/${second.body.runId}`, { user: "ada" })
      expect(run.body).toMatchObject({ threadId: "chat-1", status: "completed" })
      // Another owner sees nothing of Ada's runs: not in the list, not by id (an unknown run), not their events,
      // and cannot cancel them.
      const bob = (method: string, path: string) => call(method, `${url}${path}`, { user: "bob" })
      expect((yield* bob("GET", "/runs?full=true")).body.runs).toEqual([])
      expect((yield* bob("GET", `/runs/${second.body.runId}`)).status).toBe(404)
      expect((yield* bob("GET", `/runs/${second.body.runId}/events`)).status).toBe(404)
      expect((yield* bob("POST", `/runs/${second.body.runId}/cancel`)).status).toBe(404)
      expect((yield* call("GET", `${url}/runs`, { user: "ada" })).body.runs).toHaveLength(2)
      // Without an owner (no header), the runs routes are closed too.
      expect((yield* call("GET", `${url}/runs`)).status).toBe(401)

      // The whole thread, then a page: the last two, then the two before them.
      const whole = yield* call("GET", `${url}/threads/chat-1`, { user: "ada" })
      expect(whole.status).toBe(200)
      expect(whole.body.thread).toMatchObject({ id: "chat-1", messageCount: 4 })
      expect(whole.body.messages.messages.map((m: Model.Message) => m.content)).toEqual([
        "My name is Ada.",
        "Hello, Ada.",
        "What is my name?",
        "Your name is Ada."
      ])
      const last = yield* call("GET", `${url}/threads/chat-1?limit=2`, { user: "ada" })
      expect(last.body.messages).toMatchObject({ start: 2, total: 4 })
      expect(last.body.messages.messages.map((m: Model.Message) => m.content)).toEqual(["What is my name?", "Your name is Ada."])
      const before = yield* call("GET", `${url}/threads/chat-1?limit=2&before=2`, { user: "ada" })
      expect(before.body.messages.start).toBe(0)
      expect(before.body.messages.messages.map((m: Model.Message) => m.content)).toEqual(["My name is Ada.", "Hello, Ada."])
    }).pipe(Effect.scoped))

  it("the server's turn options leave out what is each turn's own: keepHistory, onBegun, the turn's key and count (type-checked)", () => {
    const own: ReadonlyArray<Runs.TurnDefaults> = [
      // @ts-expect-error keepHistory is a turn's own (the Responses facade's): as a default, every turn would keep its caller's history
      { keepHistory: true },
      // @ts-expect-error onBegun is the registry's: a default would be overridden without a word
      { onBegun: () => undefined },
      // @ts-expect-error one key for every turn would make every turn one
      { turnKey: "k" },
      // @ts-expect-error a count is one turn's
      { expectedCount: 0 }
    ]
    expect(own).toHaveLength(4)
  })

  it.live("the server's turn options (Runs' turns) hold for every turn: a shorter history, a working memory per owner", () =>
    Effect.gen(function*() {
      const assistant = inspected("assistant", ["One.", "Two.", "Three."])
      const url = yield* serve([assistant.agent], {
        owner: ownerFromHeader,
        turns: { historyLimit: 2, workingMemory: Threads.workingMemory(Schema.String, { initial: "Name: ?", scope: "owner" }) }
      })
      yield* call("POST", `${url}/threads`, { user: "ada", body: { id: "t" } })
      for (const input of ["a", "b", "c"]) {
        const started = yield* call("POST", `${url}/threads/t/runs`, { user: "ada", body: { agent: "assistant", input } })
        yield* finished(url, started.body.runId, "ada")
      }
      const third = (yield* assistant.calls)[2]!
      // The instructions, the working memory, the last two messages (the second turn), the task.
      expect((third.messages ?? []).map((message) => message.content)).toEqual([
        "Be brief.",
        `Your working memory (replace it with the update_working_memory tool when something worth remembering changes):\n"Name: ?"`,
        "b",
        "Two.",
        "c"
      ])
      expect(third.tools?.map((tool) => tool.name)).toEqual(["update_working_memory"])
    }).pipe(Effect.scoped))

  it.live("recall in the server's turn options: a new thread's turn is shown the owner's nearest past message, never another owner's", () =>
    Effect.gen(function*() {
      const assistant = inspected("assistant", ["Noted.", "Noted.", "Tom.", "I do not know."])
      const embedding = Context.get(yield* Layer.build(HashedEmbeddingModel.layer({ stopWords: ["my", "is", "the", "a", "what"] })), EmbeddingModel.EmbeddingModel)
      const url = yield* serve([assistant.agent], { owner: ownerFromHeader, turns: { recall: { embedding, topK: 1 } } })
      const turn = (user: string, thread: string, input: string) =>
        Effect.gen(function*() {
          const started = yield* call("POST", `${url}/threads/${thread}/runs`, { user, body: { agent: "assistant", input } })
          expect(started.status).toBe(201)
          yield* finished(url, started.body.runId, user)
        })
      yield* call("POST", `${url}/threads`, { user: "ada", body: { id: "old" } })
      yield* call("POST", `${url}/threads`, { user: "bob", body: { id: "bobs" } })
      yield* turn("ada", "old", "My cat is called Tom.")
      yield* turn("bob", "bobs", "My cat is called Rex.")
      yield* call("POST", `${url}/threads`, { user: "ada", body: { id: "new" } })
      yield* call("POST", `${url}/threads`, { user: "carol", body: { id: "carols" } })
      yield* turn("ada", "new", "What is my cat called?")
      yield* turn("carol", "carols", "What is my cat called?")
      const [, , adas, carols] = yield* assistant.calls
      const shown = (request: Model.Request | undefined) => (request?.messages ?? []).filter((message) => message.role === "system").map((message) => message.content)
      expect(shown(adas)).toEqual(["Be brief.", "Messages from earlier conversations that may be relevant (most relevant first):\n[user, thread old] My cat is called Tom."])
      // Carol has no past: nothing shown (not Ada's, not Bob's).
      expect(shown(carols)).toEqual(["Be brief."])
    }).pipe(Effect.scoped))

  it.live("the owner is the app's: another owner's thread is 403 on every route, no owner 401, a body's owner ignored", () =>
    Effect.gen(function*() {
      const assistant = inspected("assistant", ["Hi."])
      const url = yield* serve([assistant.agent], { owner: ownerFromHeader })
      // An `owner` in the body is not a field of the request: the thread is the header's user's.
      const created = yield* call("POST", `${url}/threads`, { user: "ada", body: { id: "t-ada", owner: "bob" } })
      expect(created.body.owner).toBe("ada")
      for (const [method, path, body] of [
        ["GET", "/threads/t-ada", undefined],
        ["DELETE", "/threads/t-ada", undefined],
        ["POST", "/threads/t-ada/runs", { agent: "assistant", input: "Hi" }],
        ["POST", "/threads/t-ada/runs/stream", { agent: "assistant", input: "Hi" }]
      ] as const) {
        const reply = yield* call(method, `${url}${path}`, { user: "bob", ...(body !== undefined ? { body } : {}) })
        expect([path, reply.status, reply.body._tag]).toEqual([path, 403, "ThreadForbidden"])
      }
      // Bob's listing does not show Ada's thread; without a user, 401 from the app's function.
      expect((yield* call("GET", `${url}/threads`, { user: "bob" })).body).toEqual({ threads: [] })
      const anonymous = yield* call("GET", `${url}/threads`)
      expect([anonymous.status, anonymous.body]).toEqual([401, { _tag: "Unauthorized", message: "sign in: no x-user header" }])
      // The model was never called for Bob.
      expect(yield* assistant.calls).toEqual([])
      // Unknown thread 404; a bad thread id 400 naming it; an existing id 409.
      const missing = yield* call("GET", `${url}/threads/nope`, { user: "ada" })
      expect([missing.status, missing.body._tag]).toEqual([404, "ThreadNotFound"])
      const bad = yield* call("POST", `${url}/threads`, { user: "ada", body: { id: "a b" } })
      expect(bad.status).toBe(400)
      expect(bad.body.message).toMatch(/^payload: .*id.*invalid thread id "a b"/)
      const again = yield* call("POST", `${url}/threads`, { user: "ada", body: { id: "t-ada" } })
      expect([again.status, again.body._tag]).toEqual([409, "ThreadExists"])
    }).pipe(Effect.scoped))

  it.live("an owner function that gives no owner (a plain-JS app's undefined, \"\") is 401, never an open door", () =>
    Effect.gen(function*() {
      const assistant = inspected("assistant", ["Hi."])
      // What a plain-JS app may write: the header, whatever it is, as the owner.
      const careless = Effect.map(Effect.service(HttpServerRequest.HttpServerRequest), (request) => request.headers["x-user"]) as unknown as RunsApi.OwnerOf
      const url = yield* serve([assistant.agent], { owner: careless })
      const created = yield* call("POST", `${url}/threads`, { user: "ada", body: { id: "t-ada" } })
      expect(created.status).toBe(201)
      for (const [method, path] of [["GET", "/threads/t-ada"], ["DELETE", "/threads/t-ada"], ["GET", "/threads"], ["GET", "/runs"]] as const) {
        expect((yield* call(method, `${url}${path}`)).status, `${method} ${path}`).toBe(401)
        expect((yield* call(method, `${url}${path}`, { user: "" })).status, `${method} ${path} with an empty owner`).toBe(401)
      }
      expect((yield* call("GET", `${url}/threads/t-ada`, { user: "ada" })).status).toBe(200)
    }).pipe(Effect.scoped), 30_000)

  it.live("a thread in a turn: a second run on it is 409 ThreadBusy (and kept nowhere); after the turn, it runs", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const assistant = inspected("assistant", (_request, index) =>
        index === 0 ? Effect.as(Deferred.await(gate), "first, at last") : Effect.succeed("second"))
      const url = yield* serve([assistant.agent])
      yield* call("POST", `${url}/threads`, { body: { id: "busy" } })
      const first = yield* call("POST", `${url}/threads/busy/runs`, { body: { agent: "assistant", input: "one" } })
      expect(first.status).toBe(201)
      const second = yield* call("POST", `${url}/threads/busy/runs`, { body: { agent: "assistant", input: "two" } })
      expect([second.status, second.body._tag]).toEqual([409, "ThreadBusy"])
      const streamed = yield* call("POST", `${url}/threads/busy/runs/stream`, { body: { agent: "assistant", input: "two" } })
      expect(streamed.status).toBe(409)
      // Only the first run is kept.
      expect((yield* call("GET", `${url}/runs`)).body.runs.map((run: { runId: string }) => run.runId)).toEqual([first.body.runId])
      yield* Deferred.succeed(gate, undefined)
      yield* finished(url, first.body.runId)
      const third = yield* call("POST", `${url}/threads/busy/runs/stream`, { body: { agent: "assistant", input: "three" } })
      expect(third.status).toBe(200)
      expect(third.body).toContain("second")
      const thread = yield* call("GET", `${url}/threads/busy`)
      expect(thread.body.thread.messageCount).toBe(4)
    }).pipe(Effect.scoped))

  it.live("list the owner's threads a page at a time; delete one; the default owner when the app gives none", () =>
    Effect.gen(function*() {
      const url = yield* serve([inspected("assistant", ["Hi."]).agent])
      for (const id of ["t1", "t2", "t3"]) yield* call("POST", `${url}/threads`, { body: { id } })
      const page1 = yield* call("GET", `${url}/threads?limit=2`)
      expect(page1.body.threads).toHaveLength(2)
      expect(page1.body.threads[0].owner).toBe(RunsApi.defaultOwner)
      const page2 = yield* call("GET", `${url}/threads?limit=2&cursor=${encodeURIComponent(page1.body.nextCursor)}`)
      expect(page2.body.nextCursor).toBeUndefined()
      const ids = [...page1.body.threads, ...page2.body.threads].map((thread: { id: string }) => thread.id)
      expect(ids.sort()).toEqual(["t1", "t2", "t3"])
      const badCursor = yield* call("GET", `${url}/threads?cursor=zzz`)
      expect([badCursor.status, badCursor.body.message]).toEqual([400, `query: cursor "zzz" is not one a page of threads gave`])
      const deleted = yield* call("DELETE", `${url}/threads/t2`)
      expect(deleted.status).toBe(204)
      expect((yield* call("GET", `${url}/threads/t2`)).status).toBe(404)
      expect((yield* call("GET", `${url}/threads`)).body.threads.map((thread: { id: string }) => thread.id).sort()).toEqual(["t1", "t3"])
      // A thread created without an id gets a new thr_ one.
      const fresh = yield* call("POST", `${url}/threads`, { body: {} })
      expect(fresh.body.id).toMatch(/^thr_/)
    }).pipe(Effect.scoped))

  it.live("a store that fails: 500 names the operation and the thread, never the driver's text (SQL, the file's path)", () =>
    Effect.gen(function*() {
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "valet-redact-"))),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      )
      const filename = join(dir, "threads.sqlite3")
      const store = Threads.layerSql.pipe(Layer.provide(SqliteClient.layer({ filename })), Layer.orDie)
      const url = yield* serve([inspected("assistant", ["Hi."]).agent], { threads: store })
      expect((yield* call("POST", `${url}/threads`, { body: { id: "t1" } })).status).toBe(201)
      // The messages' table gone under the server: every read of them fails in the driver.
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`DROP TABLE valet_thread_messages`
      }).pipe(Effect.provide(SqliteClient.layer({ filename })), Effect.orDie)
      const reply = yield* call("GET", `${url}/threads/t1`)
      expect(reply.status).toBe(500)
      expect(reply.body).toEqual({
        _tag: "ThreadStoreError",
        operation: "messages",
        threadId: "t1",
        message: "Threads.messages: the thread store failed (the server's log has the cause)"
      })
      // A turn on it fails the same way, and its run's error says no more.
      const turn = yield* call("POST", `${url}/threads/t1/runs`, { body: { agent: "assistant", input: "Hi" } })
      expect(turn.status).toBe(500)
      expect(JSON.stringify(turn.body)).not.toMatch(/valet_thread_messages|no such table|sqlite|valet-redact/i)
    }).pipe(Effect.scoped))

  it.live("a server without a thread store: the thread routes answer 501 ThreadsUnavailable, runs work as before", () =>
    Effect.gen(function*() {
      const url = yield* serve([inspected("assistant", ["Hi."]).agent], { threads: false })
      const reply = yield* call("POST", `${url}/threads/t1/runs`, { body: { agent: "assistant", input: "Hi" } })
      expect([reply.status, reply.body._tag]).toEqual([501, "ThreadsUnavailable"])
      expect(reply.body.message).toMatch(/keeps no threads/)
      expect((yield* call("GET", `${url}/threads`)).status).toBe(501)
      const run = yield* call("POST", `${url}/runs`, { body: { agent: "assistant", input: "Hi" } })
      expect(run.status).toBe(201)
    }).pipe(Effect.scoped))
})

/**
 * Durable runs on effect/workflow (in-memory engine): a run whose third model call fails is suspended; resumed, the
 * calls stored by the first execution are answered from storage, and only the failed one is sent again.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Fiber, Layer, Option, Schema, Stream } from "effect"
import { Workflow, WorkflowEngine } from "effect/workflow"
import { DatabaseSync } from "node:sqlite"
import * as Agent from "../../src/core/Agent.js"
import * as EmbeddingModel from "../../src/core/EmbeddingModel.js"
import * as HashedEmbeddingModel from "../../src/core/HashedEmbeddingModel.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Model from "../../src/core/Model.js"
import * as Threads from "../../src/core/Threads.js"
import * as Tool from "../../src/core/Tool.js"
import * as Sandbox from "../../src/environment/Sandbox.js"
import * as StateStore from "../../src/environment/StateStore.js"
import * as TrajectoryStore from "../../src/environment/TrajectoryStore.js"
import * as ActorLoop from "../../src/rollouts/ActorLoop.js"
import * as Durable from "../../src/rollouts/Durable.js"
import * as Engines from "../../src/rollouts/internal/durable/engines.js"
import * as SqliteClient from "../../src/environment/SqliteClient.js"
import { damageMiddlePages } from "../support/sqliteFiles.js"
import { linesUntilKilled as linesUntilKilledBy, testIsolation } from "../support/processes.js"
import { spawnSync } from "node:child_process"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as Evaluate from "../../src/rollouts/Evaluate.js"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const lookup = Tool.make({
  name: "lookup",
  description: "",
  parameters: Schema.Struct({ q: Schema.String }),
  handler: ({ q }) => Effect.succeed(`found ${q}`)
})
const agent = Agent.make({ name: "researcher", instructions: "", tools: [lookup] })

/**
 * Runs a test child process (`node --import tsx child ...args`) and answers the lines it printed, SIGKILLing it as
 * soon as it prints `killAt` (or when it exits on its own).
 */
const linesUntilKilled = (child: string, args: ReadonlyArray<string>, killAt: string): Promise<Array<string>> =>
  linesUntilKilledBy(child, args, (line) => line === killAt)

describe("Durable", () => {
  it.live("a failed call suspends the run; resumed, stored calls are not sent again", () =>
    Effect.gen(function*() {
      let sent = 0
      let failedOnce = false
      const model = ScriptedModel.layer((_request, index) => {
        sent++
        if (index === 0) return { toolCalls: [{ name: "lookup", arguments: { q: "a" } }] }
        if (index === 1) return { toolCalls: [{ name: "lookup", arguments: { q: "b" } }] }
        if (!failedOnce) {
          failedOnce = true
          return { error: new ModelError.ServerError({ status: 503, message: "down for a moment" }) }
        }
        return "a and b"
      })
      const program = Effect.gen(function*() {
        const executionId = yield* Durable.AgentRun.execute({ agent: "researcher", prompt: "Find a and b.", runId: "run-1" }, { discard: true })
        const poll = Durable.AgentRun.poll(executionId)
        // First execution: two calls stored, the third fails and suspends the run.
        for (let i = 0; i < 200 && sent < 3; i++) yield* Effect.sleep("5 millis")
        yield* Effect.sleep("20 millis")
        const suspended = yield* poll
        expect(Option.isSome(suspended) && suspended.value._tag).toBe("Suspended")
        expect(sent).toBe(3)
        yield* Durable.AgentRun.resume(executionId)
        let done = yield* poll
        for (let i = 0; i < 200 && !(Option.isSome(done) && done.value._tag === "Complete"); i++) {
          yield* Effect.sleep("5 millis")
          done = yield* poll
        }
        expect(Option.isSome(done) && done.value._tag).toBe("Complete")
        // Only the failed call was sent again.
        expect(sent).toBe(4)
        return done
      })
      const result = yield* program.pipe(
        Effect.provide(Durable.layer([agent]).pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provide(model)))
      )
      expect(Option.isSome(result)).toBe(true)
    }))

  it.live("a run with no failure: one execution, the same result as the run outside a workflow", () =>
    Effect.gen(function*() {
      const script = [{ toolCalls: [{ name: "lookup", arguments: { q: "a" } }] }, "found it"]
      const plain = yield* Agent.run(agent, "Find a.", { sessionId: "run-2" }).pipe(Effect.provide(ScriptedModel.layer(script)))
      const durable = yield* Effect.gen(function*() {
        yield* Durable.AgentRun.execute({ agent: "researcher", prompt: "Find a.", runId: "run-2" })
        return yield* Durable.AgentRun.execute({ agent: "researcher", prompt: "Find a.", runId: "run-2" })
      }).pipe(Effect.provide(Durable.layer([agent]).pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provide(ScriptedModel.layer(script)))))
      // The second execute of the same run id answers the stored result: the script's two turns are not asked again.
      expect({ ...durable, durationMs: 0 }).toEqual({ ...plain, durationMs: 0 })
    }))

  it.live("a prompt given as parts: the model is sent the image; a bad part is refused by the payload's schema, naming it", () =>
    Effect.gen(function*() {
      const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
      const seen: Array<Model.Message> = []
      const model = ScriptedModel.layer((request) => {
        seen.push(...(request.messages ?? []).filter((message) => message.role === "user"))
        return "a red square"
      })
      const prompt = [Model.textPart("What is this?"), Model.imagePart({ data: png, mediaType: "image/png" })]
      const layer = Durable.layer([agent]).pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provide(model))
      const result = yield* Durable.AgentRun.execute({ agent: "researcher", prompt, runId: "run-parts" }).pipe(Effect.provide(layer))
      expect(result.output).toBe("a red square")
      expect(seen).toEqual([{ role: "user", content: prompt }])
      // A part the schema refuses (an unknown media type) never starts the workflow.
      const refused = yield* Durable.AgentRun.execute({
        agent: "researcher",
        prompt: [Model.imagePart({ data: png, mediaType: "image/x-unknown" })],
        runId: "run-bad-part"
      }).pipe(Effect.provide(layer), Effect.exit)
      expect(refused._tag).toBe("Failure")
      // effect/workflow makes the payload with its schema: a refused one is a defect carrying the part's issue.
      expect(Cause.pretty((refused as { cause: Cause.Cause<unknown> }).cause)).toContain('unknown image media type \\"image/x-unknown\\"')
    }))

  it.live("SQLite: a process killed (SIGKILL) mid-run; started again, it finishes without resending stored model calls or rerunning tools", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-durable-"))
      const db = join(dir, "runs.db")
      const child = join(import.meta.dirname, "..", "support", "durableChild.ts")
      try {
        // Phase 1: two calls answered and stored; killed while the third waits.
        const first = yield* Effect.promise(() => linesUntilKilled(child, [db, "1"], "call react.turn_3"))
        expect(first).toEqual(["call react.turn_1", "tool a", "call react.turn_2", "tool b", "call react.turn_3"])
        // Phase 2: the same file; only the call in flight at the kill is sent again, and no tool runs again.
        const second = spawnSync(process.execPath, ["--import", "tsx", child, db, "2"], { encoding: "utf8", timeout: 60_000 })
        expect(second.stdout.trim().split("\n")).toEqual(["call react.turn_3", "result a and b"])
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }), 90_000)
})


describe("Durable DeepAgent (SQLite, a sandbox's kept workspace)", () => {
  it.live("killed (SIGKILL) after a write_file, an edit_file, commands and a task; resumed, none of them runs again and the plan is rebuilt", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-durable-deep-"))
      const child = join(import.meta.dirname, "..", "support", "durableDeepChild.ts")
      const workspace = join(dir, "sandbox", "kept", "deep")
      try {
        // Phase 1: every tool call done and stored; killed while the last model call waits.
        const first = yield* Effect.promise(() => linesUntilKilled(child, [dir, "1", testIsolation], "call run-1 react.turn_7"))
        expect(first).toEqual([
          ...[1, 2, 3, 4, 5].map((n) => `call run-1 react.turn_${n}`),
          "call run-1__task_1 react.turn_1",
          "call run-1__task_1 react.turn_2",
          "call run-1 react.turn_6",
          "call run-1 react.turn_7"
        ])
        expect(readFileSync(join(workspace, "log.txt"), "utf8")).toBe("main\nsub\n")
        // Phase 2: only the call in flight is sent; the edit, the commands (the task's too) and the write are answered
        // from storage — the files hold one of each — and write_todos, run again, rebuilds the plan.
        const second = spawnSync(process.execPath, ["--import", "tsx", child, dir, "2", testIsolation], { encoding: "utf8", timeout: 60_000 })
        const lines = second.stdout.trim().split("\n")
        expect(lines[0]).toBe("call run-1 react.turn_7")
        expect(JSON.parse(lines[1]!.replace(/^results /, ""))).toEqual([
          "Plan updated: 0 of 4 steps done. In progress: Write notes.txt",
          "Wrote 6 bytes to notes.txt (a new file).",
          "Edited counter.txt: 1 replacement.",
          "exit code 0\n--- changed files ---\nlog.txt",
          "Appended.",
          "Plan updated: 4 of 4 steps done."
        ])
        expect(lines[2]).toBe("result Done.")
        expect(JSON.parse(lines[3]!.replace(/^todos /, ""))).toEqual(
          ["Write notes.txt", "Double the a's of counter.txt", "Log a line", "Have a sub-agent log one"].map((content) => ({ content, status: "done" }))
        )
        expect(lines).toHaveLength(4)
        expect(readFileSync(join(workspace, "log.txt"), "utf8")).toBe("main\nsub\n")
        expect(readFileSync(join(workspace, "counter.txt"), "utf8")).toBe("aa\n")
        expect(readFileSync(join(workspace, "notes.txt"), "utf8")).toBe("notes\n")
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }), 90_000)
})

describe("Durable thread turns (one process, Durable.layerSqlite)", () => {
  const user = (content: string): Model.Message => ({ role: "user", content })
  const assistant = (content: string): Model.Message => ({ role: "assistant", content })
  const before = [user("My name is Ada."), assistant("Hello, Ada.")]
  const turn = [
    user("Find a."),
    { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "lookup", arguments: `{"q":"a"}` }] },
    { role: "tool", toolCallId: "c1", name: "lookup", content: "found a" },
    assistant("a is found")
  ] satisfies ReadonlyArray<Model.Message>

  /**
   * A turn of thread "t" (which holds `before`) as `AgentRun` "turn-1" on a SQLite engine and a SQLite thread store,
   * the store's `append` replaced by `append(inner)`, the model answering `answer(index)`. Each time the run
   * suspends, it is resumed; answers the polls it took to complete, the thread's messages and the requests sent.
   */
  const runTurn = (
    answer: (index: number) => ScriptedModel.Turn,
    append: (inner: Threads.Service) => Threads.Service["append"]
  ) =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-durable-turn-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const store = Threads.layerSql.pipe(Layer.provide(SqliteClient.layer({ filename: join(dir, "threads.db") })))
      const wrapped = Layer.effect(Threads.Threads, Effect.map(Effect.service(Threads.Threads), (inner): Threads.Service => ({ ...inner, append: append(inner) })))
        .pipe(Layer.provide(store))
      const sent: Array<Model.Request> = []
      const model = ScriptedModel.layer((request, index) => (sent.push(request), answer(index)))
      const engine = Durable.layer([agent]).pipe(
        Layer.provideMerge(Durable.layerSqlite(join(dir, "runs.db"))),
        Layer.provide(Layer.merge(model, wrapped))
      )
      return yield* Effect.gen(function*() {
        yield* Threads.create({ id: "t", owner: "ada" })
        yield* Threads.append("t", before)
        const executionId = yield* Durable.AgentRun.execute(
          { agent: "researcher", prompt: "Find a.", runId: "turn-1", thread: { id: "t", owner: "ada" } },
          { discard: true }
        )
        const suspensions: Array<ReadonlyArray<Model.Message>> = []
        for (let polls = 0; polls < 2000; polls++) {
          const result = yield* Durable.AgentRun.poll(executionId)
          if (Option.isSome(result) && result.value._tag === "Complete") break
          if (Option.isSome(result) && result.value._tag === "Suspended") {
            // What the thread held while the run was suspended.
            suspensions.push((yield* Threads.messages("t")).messages)
            yield* Durable.AgentRun.resume(executionId)
          }
          yield* Effect.sleep("5 millis")
        }
        const result = yield* Durable.AgentRun.execute({ agent: "researcher", prompt: "Find a.", runId: "turn-1", thread: { id: "t", owner: "ada" } })
        return { result, suspensions, messages: (yield* Threads.messages("t")).messages, sent }
      }).pipe(Effect.provide(Layer.merge(engine, store)))
    }).pipe(Effect.scoped)

  const answers = (index: number): ScriptedModel.Turn =>
    index === 0 ? { toolCalls: [{ id: "c1", name: "lookup", arguments: { q: "a" } }] } : "a is found"

  it.live("the append activity runs twice (its write landed, its result was lost): the thread holds the turn once, no model call sent again", () =>
    Effect.gen(function*() {
      let appends = 0
      const { messages, result, sent, suspensions } = yield* runTurn(answers, (inner) => (threadId, added, options) =>
        // The first append writes, then fails as a connection that drops before the reply would: the activity failed,
        // the write stands, the run suspends; resumed, the activity runs again.
        Effect.flatMap(inner.append(threadId, added, options), (thread) =>
          ++appends === 1
            ? Effect.fail(new Threads.ThreadStoreError({ operation: "append", threadId, message: "the connection dropped before the reply" }))
            : Effect.succeed(thread)))
      expect(appends).toBe(2)
      expect(suspensions).toEqual([[...before, ...turn]])
      expect(result.output).toBe("a is found")
      expect(messages).toEqual([...before, ...turn])
      // Two model calls, each sent once; the first saw the thread's history.
      expect(sent).toHaveLength(2)
      expect(sent[0]!.messages).toEqual([...before, user("Find a.")])
    }))

  it.live("a model call that fails suspends the turn with nothing appended; resumed, the turn is appended once, its stored call not sent again", () =>
    Effect.gen(function*() {
      const { messages, sent, suspensions } = yield* runTurn(
        (index) => index === 1 ? { error: new ModelError.ServerError({ status: 503, message: "down for a moment" }) } : answers(index === 0 ? 0 : 1),
        (inner) => inner.append
      )
      // Suspended, not ended: no note of a failed turn, which would stand for the turn once resumed.
      expect(suspensions).toEqual([before])
      expect(messages).toEqual([...before, ...turn])
      expect(sent).toHaveLength(3)
    }))

  it.live("recall on a durable turn: the runner's EmbeddingModel embeds the task; the owner's nearest past message is shown", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-durable-recall-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const store = Threads.layerSql.pipe(Layer.provide(SqliteClient.layer({ filename: join(dir, "threads.db") })))
      const embedding = HashedEmbeddingModel.layer({ stopWords: ["my", "is", "the", "what"] })
      const sent: Array<Model.Request> = []
      const model = ScriptedModel.layer((request) => (sent.push(request), "Tom."))
      const engine = Durable.layer([agent]).pipe(
        Layer.provideMerge(Durable.layerSqlite(join(dir, "runs.db"))),
        Layer.provide(Layer.mergeAll(model, store, embedding))
      )
      yield* Effect.gen(function*() {
        // A past thread of Ada's, its messages embedded as a turn with recall would have stored them.
        yield* Threads.create({ id: "old", owner: "ada" })
        const past = [user("My cat is called Tom."), assistant("Noted."), user("The invoice is due on Friday."), assistant("Noted.")]
        yield* Threads.append("old", past)
        const vectors = yield* EmbeddingModel.embed(past.map((message) => Model.textOf(message.content)))
        yield* Threads.Threads.use((threads) =>
          threads.storeVectors("old", "hashed-256", vectors.map((vector, index) => ({ index, vector: Array.from(vector) }))))
        yield* Threads.create({ id: "t", owner: "ada" })
        const result = yield* Durable.AgentRun.execute({
          agent: "researcher",
          prompt: "What is my cat called?",
          runId: "turn-r",
          thread: { id: "t", owner: "ada", recall: { topK: 1 } }
        })
        expect(result.output).toBe("Tom.")
      }).pipe(Effect.provide(Layer.mergeAll(engine, store, embedding)))
      expect(sent[0]!.messages).toEqual([
        { role: "system", content: "Messages from earlier conversations that may be relevant (most relevant first):\n[user, thread old] My cat is called Tom." },
        user("What is my cat called?")
      ])
    }).pipe(Effect.scoped))

  it.live("a turn on a runner without a thread store suspends with ThreadStoreError saying so", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-durable-turn-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
      const engine = Durable.layer([agent]).pipe(Layer.provideMerge(Durable.layerSqlite(join(dir, "runs.db"))), Layer.provide(ScriptedModel.layer(["x"])))
      const suspended = yield* Effect.gen(function*() {
        const executionId = yield* Durable.AgentRun.execute({ agent: "researcher", prompt: "Hi", runId: "turn-2", thread: { id: "t" } }, { discard: true })
        for (let polls = 0; polls < 2000; polls++) {
          const result = yield* Durable.AgentRun.poll(executionId)
          if (Option.isSome(result) && result.value._tag === "Suspended") return result.value
          yield* Effect.sleep("5 millis")
        }
        return undefined
      }).pipe(Effect.provide(engine))
      expect(suspended?.cause === undefined ? "" : Cause.pretty(suspended.cause)).toContain(
        `Durable: run "turn-2" is a turn of thread "t", but this runner has no thread store (provide Threads.layerSql to the runners)`
      )
    }).pipe(Effect.scoped))
})

describe("Durable on SQLite: a store that fails ends the work with one error naming the file", () => {
  it.effect("a damaged file, or one that is not SQLite, fails the engine's layer when it opens", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-durable-store-"))
      try {
        // A store a durable run wrote, then damaged in the middle.
        const file = join(dir, "runs.db")
        yield* Effect.provide(Effect.void, Durable.layerSqlite(file))
        const filler = new DatabaseSync(file)
        filler.exec("CREATE TABLE filler (body TEXT)")
        for (let i = 0; i < 200; i++) filler.prepare("INSERT INTO filler (body) VALUES (?)").run("x".repeat(1000))
        filler.exec("PRAGMA wal_checkpoint(TRUNCATE)")
        filler.close()
        damageMiddlePages(file)
        const damaged = yield* Effect.flip(Effect.provide(Effect.void, Durable.layerSqlite(file)))
        expect(damaged).toBeInstanceOf(Durable.DurableStoreError)
        expect(damaged.message).toMatch(
          new RegExp(`^sqlite ${file}: the database file is damaged \\(.+\\): restore it from a backup, or start again on a new file$`)
        )
        const text = join(dir, "results.jsonl")
        writeFileSync(text, `${JSON.stringify({ id: "a", answer: "x".repeat(200) })}\n`.repeat(50))
        const foreign = yield* Effect.flip(Effect.provide(Effect.void, Durable.layerSqlite(text)))
        expect(foreign.message).toBe(
          `sqlite ${text}: is not a SQLite database (file is not a database): name a new file, or one a durable run wrote`
        )
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }))

  it.effect("the store commits without a disk sync per commit (synchronous NORMAL, WAL) unless synchronous: \"full\" is asked", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-durable-store-"))
      try {
        // PRAGMA synchronous: 1 is NORMAL, 2 is FULL (SQLite's default). Read on the store's own connection.
        const mode = (synchronous?: Engines.SqliteSynchronous) =>
          Effect.flatMap(SqliteClient.SqliteClient, (sql) => sql.unsafe<{ readonly synchronous: number }>("PRAGMA synchronous")).pipe(
            Effect.map((rows) => rows[0]?.synchronous),
            Effect.provide(Engines.sqliteStore(join(dir, `runs-${synchronous ?? "default"}.db`), synchronous))
          )
        expect(yield* mode()).toBe(1)
        expect(yield* mode("normal")).toBe(1)
        expect(yield* mode("full")).toBe(2)
        // And the engine's layer: a file it made is in WAL mode (NORMAL keeps a killed process's commits only in WAL).
        const file = join(dir, "engine.db")
        yield* Effect.provide(Effect.void, Durable.layerSqlite(file))
        const check = new DatabaseSync(file)
        expect(check.prepare("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" })
        check.close()
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }))

  it.effect("a store that fails mid-run: the workflows awaited die with DurableStoreError at once, not after retries", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-durable-store-"))
      const file = join(dir, "runs.db")
      try {
        const Waits = Workflow.make("Waits", { payload: { id: Schema.String }, idempotencyKey: ({ id }) => id })
        const layer = Engines.endOnStoreFailure(file).pipe(
          Layer.provideMerge(Waits.toLayer(() => Effect.never).pipe(Layer.provideMerge(WorkflowEngine.layerMemory))),
          Layer.provideMerge(SqliteClient.layer({ filename: file }))
        )
        yield* Effect.gen(function*() {
          const sql = yield* SqliteClient.SqliteClient
          yield* sql`CREATE TABLE t (body TEXT)`
          yield* sql.withTransaction(Effect.forEach(Array.from({ length: 300 }, (_, i) => i), (i) =>
            sql`INSERT INTO t (body) VALUES (${`${i}`.padEnd(500, "x")})`, { discard: true }))
          yield* sql.unsafe("PRAGMA wal_checkpoint(TRUNCATE)")
          yield* sql.unsafe("PRAGMA cache_size = 1")
          const waiting = yield* Effect.forkChild(Waits.execute({ id: "a" }))
          yield* Effect.yieldNow
          damageMiddlePages(file, 20)
          // The next statement on the store reads a damaged page (in effect/cluster, its storage loop would).
          yield* Effect.ignore(sql`SELECT sum(length(body)) FROM t`)
          const ended = yield* Effect.flip(Effect.sandbox(Fiber.join(waiting)))
          const defect = Cause.squash(ended)
          expect(defect).toBeInstanceOf(Durable.DurableStoreError)
          expect((defect as Durable.DurableStoreError).message).toBe(
            `sqlite ${file}: the database file is damaged (database disk image is malformed): restore it from a backup, or start again on a new file`
          )
          // Later work on the engine ends at once too.
          const later = yield* Effect.flip(Effect.sandbox(Waits.execute({ id: "b" })))
          expect(Cause.squash(later)).toBe(defect)
        }).pipe(Effect.provide(layer))
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }))
})

describe("Durable.evaluate", () => {
  // A problem's run: "fail" fails for good (a request the server refuses), "loop" calls a tool until the budget
  // ends it, the others answer.
  const solver = Agent.make({ name: "solver", instructions: "", tools: [lookup] })
  const model = (sent: Array<string>) =>
    ScriptedModel.layer((request, index) => {
      const problem = Model.textOf(request.messages?.find((message) => message.role === "user")?.content ?? "")
      sent.push(problem)
      if (problem.includes("fail")) return { error: new ModelError.InvalidRequest({ status: 400, message: "refused" }) }
      if (problem.includes("loop")) return { toolCalls: [{ name: "lookup", arguments: { q: `more ${index}` } }] }
      return `FINAL: ${problem.length}`
    })
  const dataset = [
    { id: "a", problem: "answer", reference: "6" },
    { id: "b", problem: "fail now", reference: "1" },
    { id: "c", problem: "loop forever", reference: "2" }
  ].map((problem) => JSON.stringify(problem)).join("\n")
  const withoutLatency = (results: ReadonlyArray<Evaluate.ProblemResult>) => results.map(({ latencyMs: _, ...rest }) => rest)

  it.live("records equal Evaluate.run's: an answer, a failure for good with its reason, a run ended by its budget; a failed problem runs again as a new attempt", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-durable-eval-"))
      const file = join(dir, "problems.jsonl")
      writeFileSync(file, dataset)
      const options = { budget: { maxCalls: 3 }, concurrency: 2 }
      try {
        const plainSent: Array<string> = []
        const plain = yield* Evaluate.run(file, { ...options, agent: solver, out: join(dir, "plain.jsonl") }).pipe(
          Effect.provide(Layer.merge(model(plainSent), NodeFileSystem.layer))
        )
        const sent: Array<string> = []
        const engine = Durable.layer([solver]).pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provide(model(sent)))
        const out = join(dir, "durable.jsonl")
        const durable = yield* Effect.gen(function*() {
          const first = yield* Durable.evaluate(file, { ...options, agent: solver, out })
          const callsOfFirst = sent.length
          // Again on the same results file: only the failed problem runs, as attempt 1 (not the stored failure).
          const second = yield* Durable.evaluate(file, { ...options, agent: "solver", out })
          return { first, second, callsOfFirst }
        }).pipe(Effect.provide(Layer.merge(engine, NodeFileSystem.layer)))
        expect(withoutLatency(durable.first.results)).toEqual(withoutLatency(plain.results))
        expect(durable.first.results.map((result) => result.error ?? result.interruptionReason ?? result.answer)).toEqual([
          "6",
          "InvalidRequest: refused",
          "budget:max_calls"
        ])
        expect(durable.callsOfFirst).toBe(plainSent.length)
        expect(sent.slice(durable.callsOfFirst)).toEqual(["fail now"])
        expect(durable.second.summary.resumed).toBe(2)
        expect(readFileSync(out, "utf8").trim().split("\n")).toHaveLength(4)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }))

  it.effect("options it cannot use fail before anything runs, naming the field", () =>
    Effect.gen(function*() {
      const error = yield* Durable.evaluate("/nonexistent.jsonl", { agent: "solver", concurrency: 0 }).pipe(
        Effect.flip,
        Effect.provide(Layer.merge(WorkflowEngine.layerMemory, NodeFileSystem.layer))
      )
      expect(error._tag).toBe("InvalidOptions")
      expect(error.message).toContain("concurrency")
    }))
})

describe("Durable.actorLoop", () => {
  const output = [
    "<think>try it</think>",
    "<action>{\"command\": [\"python3\", \"-c\", \"print(1)\"]}</action>",
    "<state_update>{\"goals\": [\"g\"]}</state_update>"
  ].join("\n")
  const tasks = [
    { taskId: "t1", prompt: "First." },
    { taskId: "t2", prompt: "Second." },
    { taskId: "t1", prompt: "First, again." }
  ]
  const stable = (record: TrajectoryStore.TrajectoryRecord) => {
    const { createdAt: _c, sessionId: _s, metrics, ...rest } = record
    const { actorLatencySec: _l, sandboxDurationSec: _d, ...otherMetrics } = metrics
    return { ...rest, metrics: otherMetrics, sandboxResult: rest.sandboxResult === null ? null : { ...rest.sandboxResult, durationMs: 0 } }
  }

  it.live("steps as workflows: the records of ActorLoop.run; run again with the same loop key, nothing is sent, run or appended again", () =>
    Effect.gen(function*() {
      const plainRecords = yield* ActorLoop.run(Stream.fromIterable(tasks)).pipe(
        Stream.runCollect,
        Effect.map((outcomes) => outcomes.flatMap((outcome) => (outcome._tag === "Recorded" ? [outcome.record] : []))),
        Effect.provide(Layer.mergeAll(ScriptedModel.layer(() => output), Sandbox.layerTest(() => ({ stdout: "1\n" })), StateStore.layerMemory(), TrajectoryStore.layerMemory))
      )
      let calls = 0
      let commands = 0
      const services = Layer.mergeAll(
        ScriptedModel.layer(() => (calls++, output)),
        Sandbox.layerTest(() => (commands++, { stdout: "1\n" })),
        StateStore.layerMemory(),
        TrajectoryStore.layerMemory
      )
      const engine = Durable.layerActorLoop.pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provideMerge(services))
      const { first, second, stored } = yield* Effect.gen(function*() {
        const first = yield* Stream.runCollect(Durable.actorLoop(Stream.fromIterable(tasks), { loop: "loop-1" }))
        const second = yield* Stream.runCollect(Durable.actorLoop(Stream.fromIterable(tasks), { loop: "loop-1" }))
        const stored = yield* Stream.runCollect(TrajectoryStore.read("t1"))
        return { first, second, stored }
      }).pipe(Effect.provide(engine))
      const records = first.map((outcome) => (outcome._tag === "Recorded" ? outcome.record : undefined))
      expect(records.map((record) => record && stable(record))).toEqual(plainRecords.map(stable))
      expect(records.map((record) => record?.sessionId)).toEqual(["actor-0-t1", "actor-1-t2", "actor-2-t1"])
      // The second run answers the stored outcomes: no model call, no command, no record appended.
      expect(second).toEqual(first)
      expect({ calls, commands, t1Records: stored.length }).toEqual({ calls: 3, commands: 3, t1Records: 2 })
    }))

  it.live("SQLite: a process killed (SIGKILL) while its command runs; started again, the stored model call is not sent again and the record is appended once", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "valet-durable-actor-"))
      const child = join(import.meta.dirname, "..", "support", "durableActorChild.ts")
      try {
        const first = yield* Effect.promise(() => linesUntilKilled(child, [dir, "1"], "command"))
        expect(first).toEqual(["call", "command"])
        const second = spawnSync(process.execPath, ["--import", "tsx", child, dir, "2"], { encoding: "utf8", timeout: 60_000 })
        // Only the command in flight at the kill runs again; the model call was stored.
        expect(second.stdout.trim().split("\n")).toEqual(["command", "recorded 1"])
        expect(readFileSync(join(dir, "trajectories", "raw", "t1.jsonl"), "utf8").trim().split("\n")).toHaveLength(1)
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    }), 90_000)

  it.effect("a loop without a key fails before anything runs, naming the field", () =>
    Effect.gen(function*() {
      const error = yield* Stream.runCollect(Durable.actorLoop(Stream.fromIterable(tasks), { loop: "" })).pipe(
        Effect.flip,
        Effect.provide(WorkflowEngine.layerMemory)
      )
      expect(error._tag).toBe("InvalidOptions")
      expect(error.message).toContain("loop")
    }))
})

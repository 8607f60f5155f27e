/**
 * The run registry: runs go on in the background, any number of readers replay and follow them, a cancel keeps
 * the partial output, a failure is the run's typed error, limits refuse what is beyond them, and finished runs
 * are dropped by count and by age.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Result, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as SelfRefine from "../../src/architectures/SelfRefine.js"
import * as Agent from "../../src/core/Agent.js"
import * as HumanLoop from "../../src/core/HumanLoop.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Threads from "../../src/core/Threads.js"
import * as Tool from "../../src/core/Tool.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as Agents from "../../src/serve/Agents.js"
import * as Runs from "../../src/serve/Runs.js"
import { scriptedAgent } from "../support/serve.js"

const agent = scriptedAgent

const catalog = Agents.layer([
  agent("quick", ["Paris."]),
  agent("slow", [{ text: "Paris, eventually.", delay: "10 seconds" }]),
  agent("writer", ["draft", { text: "critique", delay: "10 seconds" }, "final"], SelfRefine.architecture),
  agent("broken", [{ error: new ModelError.RateLimited({ message: "slow down" }) }]),
  agent("crashing", () => Effect.die(new Error("boom"))),
  { ...Agents.make([agent("capped", ["a", "b"])]).list[0]!, budget: { maxCalls: 5 } }
])

const registry = (options?: Runs.Options) => Layer.provide(Runs.layer(options), catalog)

const collect = (stream: Stream.Stream<Runs.Indexed, Runs.RunFailed>) => Stream.runCollect(stream)

describe("Runs", () => {
  it.effect("a run goes on in the background; readers replay from the start or after an id, then follow it live", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const { runId, sessionId } = yield* runs.start({ agent: "slow", input: "Capital of France?", sessionId: "client-chosen" })
      expect(sessionId).toBe("client-chosen")
      expect((yield* runs.get(runId)).status).toBe("running")
      const early = yield* Effect.forkChild(collect(yield* runs.events(runId)))
      yield* TestClock.adjust("10 seconds")
      const all = yield* Fiber.join(early)
      expect(all.map((item) => item.seq)).toEqual(all.map((_, i) => i))
      expect(all.at(-1)!.event).toMatchObject({ _tag: "RunCompleted", result: { output: "Paris, eventually." } })
      // A late reader replays the same events; one with Last-Event-ID 1 gets those after it.
      expect(yield* collect(yield* runs.events(runId))).toEqual(all)
      expect((yield* collect(yield* runs.events(runId, { after: 1 }))).map((item) => item.seq)).toEqual(all.slice(2).map((item) => item.seq))
      const done = yield* runs.get(runId)
      expect(done).toMatchObject({ status: "completed", agent: "slow", result: { output: "Paris, eventually." } })
    }).pipe(Effect.provide(registry())))

  it.effect("a cancel stops the run at once and keeps its output: completed, interrupted, reason cancelled", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const { runId } = yield* runs.start({ agent: "writer", input: "Write." })
      const reader = yield* Effect.forkChild(collect(yield* runs.events(runId)))
      yield* TestClock.adjust("1 second")
      yield* runs.cancel(runId)
      const events = yield* Fiber.join(reader)
      const last = events.at(-1)!.event
      expect(last).toMatchObject({ _tag: "RunCompleted", result: { interrupted: true, interruptionReason: "cancelled", output: "draft" } })
      expect(yield* runs.get(runId)).toMatchObject({ status: "completed", result: { interruptionReason: "cancelled" } })
      expect(yield* runs.running).toBe(0)
    }).pipe(Effect.provide(registry())))

  it.effect("a failed run: readers' streams fail with its typed error, and get shows it", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const { runId } = yield* runs.start({ agent: "broken", input: "x" })
      const failure = yield* Effect.flip(collect(yield* runs.events(runId)))
      expect(failure).toMatchObject({ _tag: "RunFailed", runId, error: { _tag: "RateLimited", message: expect.stringContaining("slow down") } })
      expect(yield* runs.get(runId)).toMatchObject({ status: "failed", error: { _tag: "RateLimited" } })
    }).pipe(Effect.provide(registry())))

  it.effect("a run that dies (a defect, not a typed error) is a failed run too: readers learn it ended", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const { runId } = yield* runs.start({ agent: "crashing", input: "x" })
      const failure = yield* Effect.flip(collect(yield* runs.events(runId)))
      expect(failure).toMatchObject({ _tag: "RunFailed", error: { _tag: "Defect", message: expect.stringContaining("boom") } })
      expect(yield* runs.get(runId)).toMatchObject({ status: "failed", error: { _tag: "Defect" } })
    }).pipe(Effect.provide(registry())))

  it.effect("refusals: an unknown agent, a bad or taken session id, a budget beyond reason, more than maxConcurrentRuns", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      expect(yield* Effect.flip(runs.start({ agent: "nobody", input: "x" }))).toMatchObject({
        _tag: "UnknownAgent",
        message: 'no agent named "nobody"; agents: quick, slow, writer, broken, crashing, capped'
      })
      expect((yield* Effect.flip(runs.start({ agent: "quick", input: "x", sessionId: "a__b" }))).message).toMatch(/^sessionId: invalid session id/)
      yield* runs.start({ agent: "slow", input: "x", sessionId: "taken" })
      expect((yield* Effect.flip(runs.start({ agent: "quick", input: "x", sessionId: "taken" }))).message).toBe(
        'sessionId: "taken" is the session of another run'
      )
      yield* runs.start({ agent: "slow", input: "x" })
      expect(yield* Effect.flip(runs.start({ agent: "slow", input: "x" }))).toMatchObject({ _tag: "TooManyRuns", limit: 2, retryAfterSeconds: 1 })
      expect(yield* runs.running).toBe(2)
    }).pipe(Effect.provide(registry({ maxConcurrentRuns: 2 }))))

  it.effect("a run's budget is the agent's caps lowered by the request's", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const { runId } = yield* runs.start({ agent: "capped", input: "x", budget: { maxCalls: 0 } })
      yield* collect(yield* runs.events(runId))
      expect((yield* runs.get(runId)).result).toMatchObject({ interrupted: true, interruptionReason: "budget:max_calls", modelCalls: 0 })
    }).pipe(Effect.provide(registry())))

  it.effect("a run's budget in Budget's words (maxTotalTokens, maxDuration); maxTokens and maxWallMs, the deprecated names, still work", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const decode = Schema.decodeUnknownSync(Runs.RunRequest)
      for (const budget of [{ maxTotalTokens: 0 }, { maxTokens: 0 }]) {
        const { runId } = yield* runs.start(decode({ agent: "quick", input: "x", budget }))
        yield* collect(yield* runs.events(runId))
        expect({ budget, reason: (yield* runs.get(runId)).result?.interruptionReason }).toEqual({ budget, reason: "budget:max_total_tokens" })
      }
      expect(decode({ agent: "quick", input: "x", budget: { maxDuration: "30 seconds" } }).budget).toEqual({ maxDuration: "30 seconds" })
      expect(() => decode({ agent: "quick", input: "x", budget: { maxDuration: "soon" } })).toThrow(/a duration such as "30 seconds"/)
      expect(decode({ agent: "quick", input: "x", budget: { maxWallMs: 5 } }).budget).toEqual({ maxWallMs: 5 })
    }).pipe(Effect.provide(registry())))

  // `keepFinished` takes a duration; `keepFinishedMs`, its deprecated name, milliseconds.
  for (const [label, keep] of [["keepFinished: \"1 minute\"", { keepFinished: "1 minute" }], ["keepFinishedMs: 60000", { keepFinishedMs: 60_000 }]] as const) {
    it.effect(`finished runs are dropped beyond keepFinishedRuns, and after ${label}`, () =>
      Effect.gen(function*() {
        const runs = yield* Runs.Runs
        const ids: Array<string> = []
        for (let i = 0; i < 3; i++) {
          const { runId } = yield* runs.start({ agent: "quick", input: "x" })
          yield* collect(yield* runs.events(runId))
          ids.push(runId)
        }
        expect((yield* runs.list()).runs.map((run) => run.runId)).toEqual([ids[2], ids[1]])
        expect(yield* Effect.flip(runs.get(ids[0]!))).toMatchObject({ _tag: "RunNotFound" })
        yield* TestClock.adjust("61 seconds")
        expect(yield* runs.list()).toEqual({ runs: [] })
      }).pipe(Effect.provide(registry({ keepFinishedRuns: 2, ...keep }))))
  }

  it.effect("the listing is paged, newest first, summaries without inputs and results; a cursor walks every run once", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const ids: Array<string> = []
      for (let i = 0; i < 7; i++) {
        const { runId } = yield* runs.start({ agent: "quick", input: `question ${i} ${"x".repeat(200)}` })
        yield* collect(yield* runs.events(runId))
        ids.push(runId)
      }
      const first = yield* runs.list({ limit: 3 })
      expect(first.runs.map((run) => run.runId)).toEqual([ids[6], ids[5], ids[4]])
      expect(first.runs[0]).not.toHaveProperty("input")
      expect(first.runs[0]).not.toHaveProperty("result")
      expect(first.runs[0]!.inputPreview).toHaveLength(100)
      expect(first.runs[0]).toMatchObject({ status: "completed", interrupted: false })
      const second = yield* runs.list({ limit: 3, cursor: first.nextCursor })
      expect(second.runs.map((run) => run.runId)).toEqual([ids[3], ids[2], ids[1]])
      // A run started between two pages does not shift the next page.
      yield* runs.start({ agent: "quick", input: "late" })
      const third = yield* runs.list({ limit: 3, cursor: second.nextCursor })
      expect(third).toEqual({ runs: [expect.objectContaining({ runId: ids[0] })] })
    }).pipe(Effect.provide(registry())))
})

describe("Runs: decisions", () => {
  const refund = Tool.make({
    name: "refund",
    description: "Refunds an order",
    parameters: Schema.Struct({ order: Schema.String }),
    handler: ({ order }) => Effect.succeed(`refunded ${order}`),
    needsApproval: true
  })
  const approving = Agent.make({
    name: "approving",
    instructions: "",
    tools: [refund],
    model: Layer.orDie(ScriptedModel.layer([{ toolCalls: [{ id: "c1", name: "refund", arguments: { order: "7" } }] }, "Done."]))
  }) as Agent.Agent<never>
  // One HumanLoop shared by the registry and the test, as an app that provides its own.
  const withLoop = Layer.provideMerge(Runs.layer(), Layer.merge(Agents.layer([approving, agent("slow", [{ text: "Paris.", delay: "10 seconds" }])]), HumanLoop.layer))

  it.effect("an owner's run whose session is X decides nothing of another owner's run X_ (its sub-agent X___helper)", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const loop = yield* HumanLoop.HumanLoop
      const mine = yield* runs.start({ agent: "slow", input: "x", sessionId: "X" }, { owner: "a" })
      // A call of a sub-agent of owner b's run "X_", waiting in the same loop.
      const theirs = yield* Effect.forkChild(loop.wait(
        { sessionId: "X___helper", toolCallId: "c1", name: "refund", arguments: "{}", requestedAt: 0 },
        (value) => Result.succeed(JSON.stringify(value))
      ))
      yield* HumanLoop.awaitPending(1)
      expect(yield* Effect.flip(runs.decide(mine.runId, "c1", { approved: true }, { owner: "a" }))).toMatchObject({ _tag: "NotWaiting" })
      // The chat route passes the session named in the approval id.
      expect(yield* Effect.flip(runs.decide(mine.runId, "c1", { approved: true }, { owner: "a", sessionId: "X___helper" })))
        .toMatchObject({ _tag: "NotWaiting" })
      expect(yield* HumanLoop.pending()).toHaveLength(1)
      yield* Fiber.interrupt(theirs)
    }).pipe(Effect.provide(withLoop)))

  it.effect("a run cancelled while a call waits: get no longer lists the call as pending", () =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const { runId } = yield* runs.start({ agent: "approving", input: "Refund 7." })
      // The registry has read the request once its stream has it.
      yield* Stream.runDrain(Stream.takeUntil(yield* runs.events(runId), (item) => item.event._tag === "ApprovalRequested"))
      expect(yield* runs.get(runId)).toMatchObject({ status: "waiting", pending: [{ toolCallId: "c1" }] })
      yield* runs.cancel(runId)
      yield* collect(yield* runs.events(runId))
      const ended = yield* runs.get(runId)
      expect(ended.status).toBe("completed")
      expect(ended.pending).toBeUndefined()
      expect(yield* HumanLoop.pending()).toEqual([])
    }).pipe(Effect.provide(withLoop)))
})

describe("Runs: input as parts", () => {
  const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
  const parts = [Model.textPart("What is this?"), Model.imagePart({ data: png, mediaType: "image/png" })]

  it.effect("the model reads the parts as the last user message; the run's input shows their text", () =>
    Effect.gen(function*() {
      const context = ScriptedModel.context(["A pixel."])
      const looker = Agent.make({ name: "looker", instructions: "Look.", model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) })
      const program = Effect.gen(function*() {
        const runs = yield* Runs.Runs
        const { runId } = yield* runs.start({ agent: "looker", input: parts, history: [Model.user("Hi."), Model.assistant("Hello!")] })
        const events = yield* collect(yield* runs.events(runId))
        expect(events.at(-1)!.event).toMatchObject({ _tag: "RunCompleted", result: { output: "A pixel." } })
        expect((yield* runs.get(runId)).input).toBe("What is this?")
      })
      yield* program.pipe(Effect.provide(Layer.provide(Runs.layer(), Agents.layer([looker as Agent.Agent<never>]))))
      const calls = yield* ScriptedModel.calls.pipe(Effect.provide(context))
      expect(calls[0]!.messages).toEqual([Model.system("Look."), Model.user("Hi."), Model.assistant("Hello!"), Model.user(parts)])
    }))

  it.effect("a thread turn's input as parts: the turn runs on them and the thread keeps them (it was refused)", () =>
    Effect.gen(function*() {
      const context = ScriptedModel.context(["A pixel."])
      const looker = Agent.make({ name: "looker", instructions: "Look.", model: Layer.succeed(Model.Model, Context.get(context, Model.Model)) })
      const program = Effect.gen(function*() {
        yield* Threads.create({ id: "t1", owner: "ada" })
        const runs = yield* Runs.Runs
        const { runId } = yield* runs.startTurn({ agent: "looker", input: parts }, { id: "t1", owner: "ada" })
        const events = yield* collect(yield* runs.events(runId))
        expect(events.at(-1)!.event).toMatchObject({ _tag: "RunCompleted", result: { output: "A pixel." } })
        expect(events[0]!.event).toMatchObject({ _tag: "RunStarted", prompt: "What is this?" })
        expect((yield* Threads.messages("t1", { owner: "ada" })).messages).toEqual([Model.user(parts), Model.assistant("A pixel.")])
      })
      // One store: the registry's turns and the test's reads.
      yield* program.pipe(Effect.provide(Layer.provideMerge(Runs.layer(), Layer.merge(Agents.layer([looker as Agent.Agent<never>]), Threads.layerMemory()))))
      const calls = yield* ScriptedModel.calls.pipe(Effect.provide(context))
      expect(calls[0]!.messages).toEqual([Model.system("Look."), Model.user(parts)])
    }))

  it("a bad part in a POST /runs body is refused by the schema, naming it", () => {
    const decoded = Schema.decodeUnknownResult(Runs.RunRequest)({ agent: "a", input: [{ type: "image", url: "ftp://x/a.png" }] })
    expect(Result.isFailure(decoded)).toBe(true)
    expect(String(Result.isFailure(decoded) ? decoded.failure : "")).toContain("the URL scheme \"ftp:\" is not allowed")
  })
})

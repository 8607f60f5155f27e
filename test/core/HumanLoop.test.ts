/**
 * People in the loop, in process: tool calls that need approval wait for `HumanLoop.decide` — approved (with
 * arguments edited and checked by the tool's schema), rejected (the model reads why), timed out (TestClock), or
 * with nobody to ask; calls of one turn wait together and resume on their own decisions; a bad decision changes
 * nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Duration, Effect, Fiber, Result, Schema, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Agent from "../../src/core/Agent.js"
import * as Architecture from "../../src/core/Architecture.js"
import * as AgentEvent from "../../src/core/AgentEvent.js"
import * as HumanLoop from "../../src/core/HumanLoop.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

const makeRefund = (ran: Array<string>) =>
  Tool.make({
    name: "refund",
    description: "Refunds an order",
    parameters: Schema.Struct({ order: Schema.String, amount: Schema.Number }),
    handler: ({ order, amount }) => Effect.sync(() => (ran.push(`${order}:${amount}`), `refunded ${amount} on ${order}`)),
    needsApproval: ({ amount }) => Effect.succeed(amount > 100),
    approvalTimeout: "1 hour"
  })

const call = (id: string, order: string, amount: number) => ({ id, name: "refund", arguments: { order, amount } })

/** The run's events, the tool results the model read on its second call, and what the handler ran. */
const scenario = <A, E, R>(
  calls: ReadonlyArray<ReturnType<typeof call>>,
  person: Effect.Effect<A, E, R>,
  options: { readonly loop?: boolean } = {}
) =>
  Effect.gen(function*() {
    const ran: Array<string> = []
    const agent = Agent.make({ name: "support", instructions: "Help.", tools: [makeRefund(ran)] })
    const events: Array<AgentEvent.AgentEvent> = []
    const run = yield* Effect.forkChild(Stream.runForEach(Agent.stream(agent, "Refund."), (event) => Effect.sync(() => events.push(event))))
    const decided = options.loop === false ? undefined : yield* person
    yield* Fiber.join(run)
    const second = (yield* ScriptedModel.calls)[1]
    const results = (second?.messages ?? []).filter((message) => message.role === "tool").map((message) => message.content)
    return { events, results, ran, decided }
  }).pipe(Effect.provide(ScriptedModel.layer([{ toolCalls: calls }, "Done."])))

const tags = (events: ReadonlyArray<AgentEvent.AgentEvent>) =>
  events.filter((event) => event._tag.startsWith("Approval") || event._tag.startsWith("Tool")).map((event) => event._tag)

describe("HumanLoop: approvals in process", () => {
  it.effect("approved with edited arguments: the tool runs once with them (checked by its schema); the events say so in order", () =>
    Effect.gen(function*() {
      const { events, results, ran } = yield* scenario(
        [call("c1", "7", 250)],
        Effect.gen(function*() {
          const [waiting] = yield* HumanLoop.awaitPending(1)
          expect(waiting).toMatchObject({ toolCallId: "c1", name: "refund", arguments: `{"order":"7","amount":250}` })
          return yield* HumanLoop.decide("c1", { approved: true, arguments: { order: "7", amount: 200 } })
        })
      )
      expect(ran).toEqual(["7:200"])
      expect(results).toEqual(["refunded 200 on 7"])
      expect(tags(events)).toEqual(["ApprovalRequested", "ApprovalDecided", "ToolCalled", "ToolReturned"])
      expect(events.find((event) => event._tag === "ApprovalDecided")).toMatchObject({ approved: true, edited: true })
      expect(events.find((event) => event._tag === "ToolCalled")).toMatchObject({ arguments: `{"order":"7","amount":200}` })
      expect(yield* HumanLoop.pending()).toEqual([])
    }).pipe(Effect.provide(HumanLoop.layer)))

  it.effect("rejected: the tool never runs and the model reads the reason; a call under the threshold runs without asking", () =>
    Effect.gen(function*() {
      const { events, results, ran } = yield* scenario(
        [call("c1", "7", 250), call("c2", "8", 20)],
        Effect.gen(function*() {
          yield* HumanLoop.awaitPending(1)
          return yield* HumanLoop.decide("c1", { approved: false, reason: "over the limit" })
        })
      )
      expect(ran).toEqual(["8:20"])
      expect(results).toEqual(["ERROR: rejected: over the limit", "refunded 20 on 8"])
      expect(events.filter((event) => event._tag === "ApprovalRequested").map((event) => (event as { toolCallId: string }).toolCallId)).toEqual(["c1"])
      expect(events.find((event) => event._tag === "ApprovalDecided")).toMatchObject({ approved: false, reason: "over the limit" })
    }).pipe(Effect.provide(HumanLoop.layer)))

  it.effect("two calls of one turn wait together and resume on their own decisions, in the order decided", () =>
    Effect.gen(function*() {
      const { results, ran } = yield* scenario(
        [call("c1", "1", 300), call("c2", "2", 400)],
        Effect.gen(function*() {
          expect((yield* HumanLoop.awaitPending(2)).map((request) => request.toolCallId)).toEqual(["c1", "c2"])
          yield* HumanLoop.decide("c2", { approved: true })
          // The second ran while the first still waits.
          yield* Effect.yieldNow
          expect((yield* HumanLoop.pending()).map((request) => request.toolCallId)).toEqual(["c1"])
          yield* HumanLoop.decide("c1", { approved: true })
        })
      )
      expect(ran).toEqual(["2:400", "1:300"])
      expect(results).toEqual(["refunded 300 on 1", "refunded 400 on 2"])
    }).pipe(Effect.provide(HumanLoop.layer)))

  it.effect("a bad decision changes nothing: arguments the schema refuses, an unknown call, a second decision", () =>
    Effect.gen(function*() {
      const { ran } = yield* scenario(
        [call("c1", "7", 250)],
        Effect.gen(function*() {
          yield* HumanLoop.awaitPending(1)
          const refused = yield* Effect.flip(HumanLoop.decide("c1", { approved: true, arguments: { order: 7 } }))
          expect(refused).toBeInstanceOf(HumanLoop.InvalidDecision)
          expect(refused.message).toMatch(/^arguments: invalid arguments for tool "refund"/)
          // Still waiting, still decidable.
          expect((yield* HumanLoop.pending()).map((request) => request.toolCallId)).toEqual(["c1"])
          expect(yield* Effect.flip(HumanLoop.decide("c9", { approved: true }))).toMatchObject({ _tag: "NotWaiting", toolCallId: "c9" })
          yield* HumanLoop.decide("c1", { approved: true })
          expect(yield* Effect.flip(HumanLoop.decide("c1", { approved: false }))).toMatchObject({ _tag: "AlreadyDecided", toolCallId: "c1" })
        })
      )
      expect(ran).toEqual(["7:250"])
    }).pipe(Effect.provide(HumanLoop.layer)))

  it.effect("no decision within the tool's approvalTimeout: rejected, and no longer waiting", () =>
    Effect.gen(function*() {
      const { results, ran, events } = yield* scenario(
        [call("c1", "7", 250)],
        Effect.gen(function*() {
          yield* HumanLoop.awaitPending(1)
          yield* TestClock.adjust("59 minutes")
          expect(yield* HumanLoop.pending()).toHaveLength(1)
          yield* TestClock.adjust("1 minute")
        })
      )
      expect(ran).toEqual([])
      expect(results).toEqual(["ERROR: rejected: no decision within 1h"])
      expect(events.find((event) => event._tag === "ApprovalDecided")).toMatchObject({ approved: false, waitedMs: 3_600_000 })
      expect(yield* HumanLoop.pending()).toEqual([])
      expect(yield* Effect.flip(HumanLoop.decide("c1", { approved: true }))).toMatchObject({ _tag: "NotWaiting" })
    }).pipe(Effect.provide(HumanLoop.layer)))

  it.effect("without a HumanLoop nobody can approve: the call is rejected at once, the run goes on", () =>
    Effect.gen(function*() {
      const { results, ran } = yield* scenario([call("c1", "7", 250)], Effect.void, { loop: false })
      expect(ran).toEqual([])
      expect(results).toEqual(["ERROR: rejected: nobody can approve this call here (no HumanLoop in context)"])
    }))

  it.effect("a run interrupted while a call waits: the call no longer waits, and a decision finds nothing", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const agent = Agent.make({ name: "support", instructions: "Help.", tools: [makeRefund(ran)] })
      const run = yield* Effect.forkChild(Agent.run(agent, "Refund.").pipe(
        Effect.provide(ScriptedModel.layer([{ toolCalls: [call("c1", "7", 250)] }, "Done."]))
      ))
      yield* HumanLoop.awaitPending(1)
      yield* Fiber.interrupt(run)
      expect(yield* HumanLoop.pending()).toEqual([])
      expect(yield* Effect.flip(HumanLoop.decide("c1", { approved: true }))).toMatchObject({ _tag: "NotWaiting" })
      expect(ran).toEqual([])
    }).pipe(Effect.provide(HumanLoop.layer)))

  it.effect("Tool.withApproval on a tool defined elsewhere: every call waits; edits must be a JSON object", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const remote = Tool.fromDefinition({
        name: "remote",
        description: "A remote server's tool",
        parameters: { type: "object", properties: { x: { type: "number" } } },
        call: (text) => Effect.sync(() => (ran.push(text), { content: "ok", isError: false }))
      })
      const agent = Agent.make({ name: "a", instructions: "", tools: [Tool.withApproval(remote)] })
      const run = yield* Effect.forkChild(Agent.run(agent, "Go.").pipe(
        Effect.provide(ScriptedModel.layer([{ toolCalls: [{ id: "r1", name: "remote", arguments: { x: 1 } }] }, "Done."]))
      ))
      yield* HumanLoop.awaitPending(1)
      expect(yield* Effect.flip(HumanLoop.decide("r1", { approved: true, arguments: [1] }))).toMatchObject({
        _tag: "InvalidDecision",
        message: `arguments: the arguments of tool "remote" must be a JSON object`
      })
      yield* HumanLoop.decide("r1", { approved: true, arguments: { x: 2 } })
      yield* Fiber.join(run)
      expect(ran).toEqual([`{"x":2}`])
    }).pipe(Effect.provide(HumanLoop.layer)))

  it.effect("a run's session narrows decide to it and its sub-agents, not to another root that begins the same (X vs X_)", () =>
    Effect.gen(function*() {
      const loop = yield* HumanLoop.HumanLoop
      // A call of a sub-agent of the run whose session is "X_" (`X___helper`): not of the run "X".
      const request = { sessionId: "X___helper", toolCallId: "c1", name: "refund", arguments: "{}", requestedAt: 0 }
      const waiting = yield* Effect.forkChild(loop.wait(request, (value) => Result.succeed(JSON.stringify(value))))
      yield* HumanLoop.awaitPending(1)
      expect(yield* HumanLoop.pending({ sessionId: "X" })).toEqual([])
      expect(yield* Effect.flip(HumanLoop.decide("c1", { approved: true }, { sessionId: "X" }))).toMatchObject({ _tag: "NotWaiting" })
      // Its own run's session, and a real sub-agent of "X", still reach it or theirs.
      expect(yield* HumanLoop.pending({ sessionId: "X_" })).toHaveLength(1)
      yield* HumanLoop.decide("c1", { approved: false, reason: "no" }, { sessionId: "X_" })
      expect(yield* Fiber.join(waiting)).toMatchObject({ approved: false, reason: "no" })
      expect(AgentEvent.isWithinSession("X__helper__critic_1", "X")).toBe(true)
      expect(AgentEvent.isWithinSession("X___helper", "X")).toBe(false)
      expect(AgentEvent.isWithinSession("X__", "X")).toBe(false)
    }).pipe(Effect.provide(HumanLoop.layer)))

  it.effect("edited arguments nested deeper than 100 levels: InvalidDecision naming it, not a stack overflow; the call still waits", () =>
    Effect.gen(function*() {
      let deep: unknown = 1
      for (let i = 0; i < 50_000; i++) deep = [deep]
      const { results, ran } = yield* scenario(
        [call("c1", "7", 250)],
        Effect.gen(function*() {
          yield* HumanLoop.awaitPending(1)
          expect(yield* Effect.flip(HumanLoop.decide("c1", { approved: true, arguments: { order: deep, amount: 1 } }))).toMatchObject({
            _tag: "InvalidDecision",
            message: `arguments: the arguments of tool "refund" nest deeper than 100 levels`
          })
          return yield* HumanLoop.decide("c1", { approved: false, reason: "no" })
        })
      )
      expect([results, ran]).toEqual([["ERROR: rejected: no"], []])
    }).pipe(Effect.provide(HumanLoop.layer)))

  it.effect("two calls of a step waiting at once under one id (a model repeating ids): the second is rejected at once, the first waits, is listed and decided", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const agent = Agent.make({ name: "support", instructions: "Help.", tools: [makeRefund(ran)] })
      const events: Array<AgentEvent.AgentEvent> = []
      const run = yield* Effect.forkChild(Stream.runForEach(Agent.stream(agent, "Refund."), (event) => Effect.sync(() => events.push(event))))
      const rejection = `ERROR: rejected: another call of this step waits for a decision under the same id "c1"`
      // Both calls have asked: the second was answered (before the fix it replaced the first, which waited unseen).
      yield* Effect.suspend(function loop(): Effect.Effect<void> {
        return events.some((event) => event._tag === "ToolReturned" && event.content === rejection) ? Effect.void : Effect.andThen(Effect.yieldNow, loop)
      })
      const waiting = yield* HumanLoop.pending()
      expect(waiting).toMatchObject([{ toolCallId: "c1", arguments: `{"order":"7","amount":250}` }])
      yield* HumanLoop.decide("c1", { approved: true })
      yield* Fiber.join(run)
      const second = (yield* ScriptedModel.calls)[1]!
      expect(ran).toEqual(["7:250"])
      expect((second.messages ?? []).filter((message) => message.role === "tool").map((message) => message.content))
        .toEqual(["refunded 250 on 7", rejection])
    }).pipe(
      Effect.provide(HumanLoop.layer),
      Effect.provide(ScriptedModel.layer([{ toolCalls: [call("c1", "7", 250), call("c1", "8", 300)] }, "Done."]))
    ), 10_000)
})

describe("HumanLoop: questions", () => {
  /** An architecture that asks which plan, then answers with it. */
  const planner = (timeout?: Duration.Input) =>
    Agent.make({
      name: "planner",
      instructions: "",
      architecture: Architecture.make({
        name: "asks",
        program: () =>
          Effect.gen(function*() {
            const plan = yield* Architecture.ask("Which plan?", Schema.Literals(["fast", "careful"]), { timeout })
            return { output: `going ${plan}` }
          })
      })
    })

  it.effect("Architecture.ask: the answer is decoded by its schema; a refused answer changes nothing; events in order", () =>
    Effect.gen(function*() {
      const events: Array<AgentEvent.AgentEvent> = []
      const run = yield* Effect.forkChild(Stream.runForEach(Agent.stream(planner(), "Go."), (event) => Effect.sync(() => events.push(event))))
      const [question] = yield* HumanLoop.awaitQuestions(1)
      expect(question).toMatchObject({ questionId: "q1", question: "Which plan?", schema: { type: "string", enum: ["fast", "careful"] } })
      const refused = yield* Effect.flip(HumanLoop.answer("q1", "slow"))
      expect(refused).toMatchObject({ _tag: "InvalidDecision" })
      expect(refused.message).toMatch(/^answer: the answer does not fit/)
      yield* HumanLoop.answer("q1", "careful")
      yield* Fiber.join(run)
      expect(events.filter((event) => event._tag.startsWith("Question")).map((event) => event._tag)).toEqual(["QuestionAsked", "QuestionAnswered"])
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "going careful" } })
      expect(yield* Effect.flip(HumanLoop.answer("q1", "fast"))).toMatchObject({ _tag: "AlreadyDecided" })
    }).pipe(Effect.provide(HumanLoop.layer), Effect.provide(ScriptedModel.layer([]))))

  it.effect("no answer within the timeout, or nobody to ask: the run fails with Unanswered naming the question and why", () =>
    Effect.gen(function*() {
      const run = yield* Effect.forkChild(Effect.flip(Agent.run(planner("10 minutes"), "Go.")))
      yield* HumanLoop.awaitQuestions(1)
      yield* TestClock.adjust("10 minutes")
      const error = yield* Fiber.join(run)
      expect(error).toMatchObject({ _tag: "Unanswered", questionId: "q1", question: "Which plan?", reason: "no answer within 10m" })
      expect(yield* HumanLoop.questions()).toEqual([])
    }).pipe(Effect.provide(HumanLoop.layer), Effect.provide(ScriptedModel.layer([]))))

  it.effect("a person declines (dismiss): the run gets Unanswered with their reason; a second dismissal is AlreadyDecided", () =>
    Effect.gen(function*() {
      const run = yield* Effect.forkChild(Effect.flip(Agent.run(planner(), "Go.")))
      yield* HumanLoop.awaitQuestions(1)
      yield* HumanLoop.dismiss("q1", "not my call")
      expect(yield* Fiber.join(run)).toMatchObject({ _tag: "Unanswered", reason: "not my call" })
      expect(yield* Effect.flip(HumanLoop.dismiss("q1", "again"))).toMatchObject({ _tag: "AlreadyDecided" })
    }).pipe(Effect.provide(HumanLoop.layer), Effect.provide(ScriptedModel.layer([]))))

  it.effect("an answer nested deeper than 100 levels: InvalidDecision naming it, not a stack overflow; the question still waits", () =>
    Effect.gen(function*() {
      let deep: unknown = "fast"
      for (let i = 0; i < 50_000; i++) deep = [deep]
      const run = yield* Effect.forkChild(Agent.run(planner(), "Go."))
      yield* HumanLoop.awaitQuestions(1)
      expect(yield* Effect.flip(HumanLoop.answer("q1", deep))).toMatchObject({
        _tag: "InvalidDecision",
        message: "answer: the answer nests deeper than 100 levels"
      })
      yield* HumanLoop.answer("q1", "fast")
      expect((yield* Fiber.join(run)).output).toBe("going fast")
    }).pipe(Effect.provide(HumanLoop.layer), Effect.provide(ScriptedModel.layer([]))))

  it.effect("nobody to ask (no HumanLoop): Unanswered at once", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.run(planner(), "Go."))
      expect(error).toMatchObject({ _tag: "Unanswered", reason: "nobody can answer it here (no HumanLoop in context)" })
    }).pipe(Effect.provide(ScriptedModel.layer([]))))

  it.effect("the ask_human tool: the model's question waits for a person's text answer, which the model reads", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "a", instructions: "", tools: [HumanLoop.askTool()] })
      const run = yield* Effect.forkChild(Agent.run(agent, "Book a table."))
      const [question] = yield* HumanLoop.awaitQuestions(1)
      expect(question!.question).toBe("For how many people?")
      yield* HumanLoop.answer(question!.questionId, "Four.")
      const result = yield* Fiber.join(run)
      expect(result.output).toBe("Booked for four.")
      const second = (yield* ScriptedModel.calls)[1]!
      expect(second.messages?.at(-1)).toMatchObject({ role: "tool", content: "Four." })
    }).pipe(
      Effect.provide(HumanLoop.layer),
      Effect.provide(ScriptedModel.layer([{ toolCalls: [{ id: "a1", name: "ask_human", arguments: { question: "For how many people?" } }] }, "Booked for four."]))
    ))
})

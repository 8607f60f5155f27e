/**
 * Compaction across thread turns: a turn whose run summarised its history keeps the summary with the thread, and the
 * next turn is given the summary and only the messages after it — so a long conversation summarises once every few
 * turns, not on every turn past the threshold. The thread's messages are never changed.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema, Stream } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as Budget from "../../src/core/Budget.js"
import * as Compaction from "../../src/core/Compaction.js"
import type * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Threads from "../../src/core/Threads.js"
import * as Tool from "../../src/core/Tool.js"

const user = (content: string): Model.Message => ({ role: "user", content })
const assistant = (content: string): Model.Message => ({ role: "assistant", content })

const add = Tool.make({
  name: "add",
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a + b)
})

const isSummaryCall = (request: Model.Request) => request.messages?.[0]?.content === Compaction.defaultPolicy.summaryInstructions

/** 20 messages of about 60 estimated tokens each. */
const older = Array.from({ length: 20 }, (_, i) =>
  i % 2 === 0 ? user(`question ${i}: ${"what about the plan ".repeat(10)}`) : assistant(`answer ${i}: ${"we keep the outline ".repeat(10)}`))

/** A model that answers each task with `A<n>` and each summary call with a short summary, recording the requests. */
const recording = () => {
  const requests: Array<Model.Request> = []
  let answers = 0
  let summaries = 0
  const script: ScriptedModel.Script = (request) => {
    requests.push(request)
    if (isSummaryCall(request)) return `Summary ${++summaries}: the plan was discussed.`
    return `A${++answers}`
  }
  return { requests, script, summaries: () => summaries }
}

const withThread = <A, E, R>(program: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    yield* Threads.create({ id: "t", owner: "ada" })
    return yield* program
  }).pipe(Effect.provide(Threads.layerMemory()))

describe("A thread keeps its summary across turns", () => {
  const agent = Agent.make({ name: "assistant", instructions: "Be brief." })
  const policy = Compaction.layer({ contextWindow: 800, keepLastMessages: 4 })

  it.effect("the next turn is given the summary and the messages after it, and does not summarise again", () =>
    withThread(Effect.gen(function*() {
      yield* Threads.append("t", older)
      const model = recording()
      yield* Effect.gen(function*() {
        expect((yield* Agent.run(agent, "Q1", { thread: "t" })).output).toBe("A1")
        expect(model.summaries()).toBe(1)
        // The run kept system, the last 3 older messages and the task whole: the summary stands for the first 17.
        const summary = yield* Threads.summary("t")
        expect(summary).toEqual({ content: "[Summary of 17 earlier messages]\nSummary 1: the plan was discussed.", through: 17 })
        expect((yield* Agent.run(agent, "Q2", { thread: "t" })).output).toBe("A2")
      }).pipe(Effect.provide(ScriptedModel.layer(model.script)), Effect.provide(policy))
      // One summary for both turns: the second read the summary, then only what came after it.
      expect(model.summaries()).toBe(1)
      expect(model.requests.at(-1)!.messages).toEqual([
        { role: "system", content: "Be brief." },
        user("[Summary of 17 earlier messages]\nSummary 1: the plan was discussed."),
        ...older.slice(17),
        user("Q1"),
        assistant("A1"),
        user("Q2")
      ])
      // The thread's messages are all there, unchanged.
      const page = yield* Threads.messages("t", { limit: 1000 })
      expect(page.messages).toEqual([...older, user("Q1"), assistant("A1"), user("Q2"), assistant("A2")])
    })))

  it.effect("with a working memory in front and a page that starts after index 0, the summary's end is the thread's index", () =>
    withThread(Effect.gen(function*() {
      // 30 older messages, a page of 20: the run is given indexes 10..29, after the working memory's system message.
      const many = Array.from({ length: 30 }, (_, i) => older[i % 20]!)
      yield* Threads.append("t", many)
      const memory = Threads.workingMemory(Schema.Struct({ likes: Schema.Array(Schema.String) }), { initial: { likes: ["tea"] } })
      const model = recording()
      yield* Effect.gen(function*() {
        // A streamed turn keeps it too.
        yield* Stream.runDrain(Agent.stream(agent, "Q1", { thread: { id: "t", historyLimit: 20, workingMemory: memory } }))
        // Given [system, memory, m10..m29, Q1]: head 2, the last 4 kept (m27, m28, m29, Q1): the summary stands for m10..m26.
        expect(yield* Threads.summary("t")).toMatchObject({ through: 27, content: expect.stringMatching(/^\[Summary of 17 earlier messages\]/) })
        yield* Agent.run(agent, "Q2", { thread: { id: "t", historyLimit: 20, workingMemory: memory } })
      }).pipe(Effect.provide(ScriptedModel.layer(model.script)), Effect.provide(policy))
      expect(model.summaries()).toBe(1)
      const sent = model.requests.at(-1)!.messages!
      expect(sent[1]!.role).toBe("system")
      expect(sent[2]!.content).toMatch(/^\[Summary of 17 earlier messages\]/)
      expect(sent.slice(3)).toEqual([...many.slice(27), user("Q1"), assistant("A1"), user("Q2")])
    })))

  it.effect("a summary that stands for the turn's own tool loop is not kept; a fork before the summary's end starts without it", () =>
    withThread(Effect.gen(function*() {
      const calc = Agent.make({ name: "calc", instructions: "Use add.", tools: [add] })
      yield* Threads.append("t", [user("Hi."), assistant("Hello.")])
      const requests: Array<Model.Request> = []
      const script: ScriptedModel.Script = (request) => {
        requests.push(request)
        if (isSummaryCall(request)) return "Sums were made."
        const tools = request.messages!.filter((message) => message.role === "tool").length
        return tools < 8 ? { toolCalls: [{ name: "add", arguments: { a: tools, b: 1 } }], text: `Adding ${"step by step ".repeat(15)}` } : "Done."
      }
      yield* Agent.run(calc, "Add eight times.", { thread: "t" }).pipe(
        Effect.provide(ScriptedModel.layer(script)),
        Effect.provide(Compaction.layer({ contextWindow: 600, keepLastMessages: 2 }))
      )
      // The run summarised the thread's two messages and its own calls (the task kept whole between them): not a
      // summary of the thread's messages alone, so not kept.
      const summaryCall = requests.find(isSummaryCall)!
      expect(summaryCall.messages![1]!.content).toMatch(/^user: Hi\.\n\nassistant: Hello\.\n\nassistant: Adding/)
      expect(yield* Threads.summary("t")).toBeUndefined()
      // A summary kept, then a fork before its end: the fork has none, and its turn is given its messages.
      yield* Threads.create({ id: "u", owner: "ada" })
      yield* Threads.append("u", older)
      const model = recording()
      yield* Agent.run(agent, "Q1", { thread: "u" }).pipe(Effect.provide(ScriptedModel.layer(model.script)), Effect.provide(policy))
      expect(yield* Threads.summary("u")).toMatchObject({ through: 17 })
      yield* Threads.fork("u", { at: 10, id: "v" })
      expect(yield* Threads.summary("v")).toBeUndefined()
      yield* Threads.fork("u", { at: 18, id: "w" })
      expect(yield* Threads.summary("w")).toMatchObject({ through: 17 })
    })))
})

describe("A long conversation on a thread under a small window", () => {
  it.effect("60 turns: no request over the window, and a summary every several turns, not every turn", () =>
    withThread(Effect.gen(function*() {
      const window = 2000
      const calc = Agent.make({ name: "assistant", instructions: "Answer the question; use add for sums.", tools: [add] })
      let largest = 0
      let summaries = 0
      let turn = 0
      const script: ScriptedModel.Script = (request) => {
        largest = Math.max(largest, Budget.estimateInputTokens(request))
        if (isSummaryCall(request)) {
          summaries++
          return `So far: ${"the user asked about the plan and its numbers; ".repeat(6)}`
        }
        const last = request.messages!.at(-1)!
        // Every fifth turn calls the tool once, then answers.
        if (last.role === "user" && turn % 5 === 0) return { toolCalls: [{ name: "add", arguments: { a: turn, b: 1 } }] }
        return `Answer ${turn}: ${"keep the outline, move the table after the timeline; ".repeat(5)}`
      }
      const turns = 60
      yield* Effect.gen(function*() {
        for (turn = 1; turn <= turns; turn++) {
          const result = yield* Agent.run(calc, `Question ${turn}: ${"what should change in the plan, and why? ".repeat(4)}`, { thread: "t" })
          expect(result.output.startsWith(`Answer ${turn}:`)).toBe(true)
        }
      }).pipe(Effect.provide(ScriptedModel.layer(script)), Effect.provide(Compaction.layer({ contextWindow: window, keepLastMessages: 4 })))
      // Every request, summaries' included, within the window.
      expect(largest).toBeLessThanOrEqual(window)
      // The conversation (about 30,000 estimated tokens) needed summaries, but one every several turns: a turn past
      // the threshold that re-summarised its whole page would make about 50 of them.
      expect(summaries).toBeGreaterThan(0)
      expect(summaries).toBeLessThanOrEqual(turns / 6)
      const page = yield* Threads.messages("t", { limit: 1000 })
      expect(page.total).toBe(turns * 2 + 2 * (turns / 5))
    })))
})

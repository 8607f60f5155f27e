/**
 * Compaction in the runtime: every model call of every architecture is checked against its model's window; old
 * tool results are cut first, then old messages summarised with a counted call; a run reuses its summary; a
 * server's ContextLengthExceeded compacts once and sends again.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schema, Stream } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as Budget from "../../src/core/Budget.js"
import type * as AgentEvent from "../../src/core/AgentEvent.js"
import * as Compaction from "../../src/core/Compaction.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"

/** A tool whose result is long: 1,200 characters of a page. */
const read = Tool.make({
  name: "read",
  description: "Reads a page",
  parameters: Schema.Struct({ page: Schema.Number }),
  handler: ({ page }) => Effect.succeed(`page ${page}: ${"lorem ipsum ".repeat(100)}`)
})

const reader = Agent.make({ name: "reader", instructions: "Read the pages asked for.", tools: [read] })

const readPage = (page: number): ScriptedModel.Turn => ({ toolCalls: [{ name: "read", arguments: { page } }] })

const eventsOf = <E, R>(stream: Stream.Stream<AgentEvent.AgentEvent, E, R>) =>
  Effect.map(Stream.runCollect(stream), (events) => Array.from(events))

describe("Compaction", () => {
  it("the kept tail never starts inside a tool exchange; the head is the system messages; the task is the last user message", () => {
    const messages: ReadonlyArray<Model.Message> = [
      { role: "system", content: "s" },
      { role: "user", content: "an older question" },
      { role: "assistant", content: "an older answer" },
      { role: "user", content: "task" },
      { role: "assistant", content: "", toolCalls: [{ id: "a", name: "read", arguments: "{}" }, { id: "b", name: "read", arguments: "{}" }] },
      { role: "tool", toolCallId: "a", name: "read", content: "1" },
      { role: "tool", toolCallId: "b", name: "read", content: "2" },
      { role: "assistant", content: "done" }
    ]
    expect(Compaction.headEnd(messages)).toBe(1)
    // Keeping 2 would start at the second tool result: moved back to the assistant message that asked.
    expect(Compaction.tailStart(messages, 2)).toBe(4)
    expect(Compaction.tailStart(messages, 1)).toBe(7)
    expect(Compaction.taskIndex(messages)).toBe(3)
    expect(Compaction.taskIndex([...messages, { role: "user", content: "[Summary of 3 earlier messages]\n…" }])).toBe(3)
  })

  it.effect("old tool results are cut first: no model call when that is enough", () =>
    Effect.gen(function*() {
      const events = yield* eventsOf(Agent.stream(reader, "Read pages 1 to 3.")).pipe(
        Effect.provide(ScriptedModel.layer([readPage(1), readPage(2), readPage(3), "Read."])),
        Effect.provide(Compaction.layer({ contextWindow: 1000, keepLastMessages: 2, maxToolResultChars: 100 }))
      )
      const compacted = events.filter((event) => event._tag === "ContextCompacted")
      expect(compacted.length).toBeGreaterThan(0)
      expect(compacted.every((event) => event.strategy === "tool_results" && event.tokensAfter < event.tokensBefore)).toBe(true)
      // Four model calls, the answer's included: none to summarise.
      expect(events.filter((event) => event._tag === "ModelCalled")).toHaveLength(4)
      expect(events.at(-1)).toMatchObject({ _tag: "RunCompleted", result: { output: "Read." } })
    }))

  it.effect("then the oldest messages are summarised with a counted call; the run reuses the summary on its next call", () =>
    Effect.gen(function*() {
      const requests: Array<Model.Request> = []
      const script: ScriptedModel.Script = (request) => {
        requests.push(request)
        if (request.messages?.[0]?.content === Compaction.defaultPolicy.summaryInstructions) return "Pages 1 and 2 were read: lorem ipsum."
        const turn = requests.filter((r) => r.messages?.[0]?.content !== Compaction.defaultPolicy.summaryInstructions).length
        return turn <= 6 ? readPage(turn) : "All read."
      }
      const events = yield* eventsOf(Agent.stream(reader, "Read pages 1 to 6.", { budget: { maxCalls: 20 } })).pipe(
        Effect.provide(ScriptedModel.layer(script)),
        Effect.provide(Compaction.layer({ contextWindow: 840, keepLastMessages: 2, maxToolResultChars: 400 }))
      )
      const summaries = events.filter((event) => event._tag === "ContextCompacted" && event.strategy === "summary")
      expect(summaries.length).toBeGreaterThan(0)
      // One summary in all: the calls after it start from the run's compacted messages (fewer tokens than the
      // summarised ones), not from the whole conversation, so they do not summarise again.
      expect(summaries).toHaveLength(1)
      const after = events.slice(events.indexOf(summaries[0]!) + 1).filter((event) => event._tag === "ContextCompacted")
      expect(after.length).toBeGreaterThan(0)
      for (const event of after) expect((event as AgentEvent.Of<"ContextCompacted">).tokensBefore).toBeLessThan((summaries[0] as AgentEvent.Of<"ContextCompacted">).tokensBefore)
      // The summarising call is a call of the run, counted, but silent: no events of its own, no text of the answer.
      const steps = events.flatMap((event) => event._tag === "ModelCalled" ? [event.step] : [])
      expect(steps.some((step) => step.startsWith("context."))).toBe(false)
      const completed = events.at(-1) as AgentEvent.Of<"RunCompleted">
      expect(completed.result.output).toBe("All read.")
      expect(completed.result.modelCalls).toBe(steps.length + summaries.length)
      expect(events.some((event) => event._tag === "TextDelta" && event.text.includes("Pages 1 and 2"))).toBe(false)
      // After a summary, calls keep the task and read the summary, not the summarised pages.
      const last = requests.at(-1)!.messages!
      expect(last[1]).toEqual({ role: "user", content: "Read pages 1 to 6." })
      expect(Model.textOf(last[2]!.content).startsWith("[Summary of ")).toBe(true)
      expect(last.some((message) => Model.textOf(message.content).startsWith("[Summary of "))).toBe(true)
      expect(last.some((message) => message.role === "tool" && Model.textOf(message.content).startsWith("page 1:"))).toBe(false)
      // Every call sent stayed under the threshold of the window.
      for (const request of requests) expect(Compaction.defaultPolicy.threshold * 840 >= Budget.estimateInputTokens(request)).toBe(true)
    }))

  it.effect("a server's ContextLengthExceeded compacts once and sends again; a second refusal is the run's error", () =>
    Effect.gen(function*() {
      // The model's own window is large, so nothing is compacted before the call; the server refuses long requests.
      let refusals = 0
      const refusing = (limit: number): ScriptedModel.Script => (request) => {
        if (request.messages?.[0]?.content === Compaction.defaultPolicy.summaryInstructions) return "Summary."
        if (estimate(request) > limit) {
          refusals++
          return Effect.fail(new ModelError.ContextLengthExceeded({ message: "maximum context length is 600 tokens" }))
        }
        return request.messages!.some((message) => message.role === "tool") && request.messages!.filter((m) => m.role === "tool").length >= 3
          ? "Done."
          : readPage(request.messages!.filter((m) => m.role === "tool").length + 1)
      }
      const result = yield* Agent.run(reader, "Read three pages.").pipe(
        Effect.provide(ScriptedModel.layer(refusing(600))),
        Effect.provide(Compaction.layer({ contextWindow: 1200, keepLastMessages: 2, maxToolResultChars: 200 }))
      )
      expect(result.output).toBe("Done.")
      expect(refusals).toBeGreaterThan(0)
      // A server that refuses whatever is sent: one compaction, then its error.
      const error = yield* Effect.flip(Agent.run(reader, "Read three pages.").pipe(
        Effect.provide(ScriptedModel.layer(refusing(0))),
        Effect.provide(Compaction.layer({ contextWindow: 1200 }))
      ))
      expect(error._tag).toBe("ContextLengthExceeded")
    }))

  it.effect("the model's own window wins over the policy's; compaction off sends the messages as they are", () =>
    Effect.gen(function*() {
      const small = Layer.effect(Model.Model, Effect.map(Effect.service(Model.Model), (model) => ({ ...model, contextWindow: 1000 })))
        .pipe(Layer.provide(ScriptedModel.layer([readPage(1), readPage(2), readPage(3), "Read."])))
      const events = yield* eventsOf(Agent.stream(reader, "Read pages 1 to 3.")).pipe(
        Effect.provide(small),
        Effect.provide(Compaction.layer({ keepLastMessages: 2, maxToolResultChars: 100 }))
      )
      expect(events.filter((event) => event._tag === "ContextCompacted").every((event) => event.contextWindow === 1000)).toBe(true)
      expect(events.some((event) => event._tag === "ContextCompacted")).toBe(true)
      const off = yield* eventsOf(Agent.stream(reader, "Read pages 1 to 3.")).pipe(
        Effect.provide(ScriptedModel.layer([readPage(1), readPage(2), readPage(3), "Read."])),
        Effect.provide(Compaction.layer({ contextWindow: 1000, enabled: false }))
      )
      expect(off.some((event) => event._tag === "ContextCompacted")).toBe(false)
    }))
})

const estimate = (request: Model.Request) => Math.ceil(
  (request.messages ?? []).reduce((sum, message) => sum + message.content.length / 4 + 4, 0)
)

describe("Compaction's limits", () => {
  it.effect("the task of a run given history (a thread's turn) is never summarised", () =>
    Effect.gen(function*() {
      const requests: Array<Model.Request> = []
      const script: ScriptedModel.Script = (request) => {
        requests.push(request)
        return request.messages?.[0]?.content === Compaction.defaultPolicy.summaryInstructions ? "Earlier: pages were read." : "Done."
      }
      const history: Array<Model.Message> = Array.from({ length: 12 }, (_, i): Model.Message =>
        i % 2 === 0 ? { role: "user", content: `old question ${i}: ${"x".repeat(300)}` } : { role: "assistant", content: `old answer ${i}: ${"y".repeat(300)}` }
      )
      const result = yield* Agent.run(reader, "THE TASK", { history }).pipe(
        Effect.provide(ScriptedModel.layer(script)),
        Effect.provide(Compaction.layer({ contextWindow: 800, keepLastMessages: 2 }))
      )
      expect(result.output).toBe("Done.")
      const sent = requests.at(-1)!.messages!
      // The oldest history became one summary; the last answer before the task and the task itself are whole.
      expect(sent.map((message) => message.role)).toEqual(["system", "user", "assistant", "user"])
      expect(Model.textOf(sent[1]!.content).startsWith("[Summary of 11 earlier messages]")).toBe(true)
      expect(sent.at(-1)).toEqual({ role: "user", content: "THE TASK" })
    }))

  it.effect("messages still over the window after compaction: ContextLengthExceeded naming the sizes, nothing sent", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.run(reader, `Read this: ${"z".repeat(6000)}`).pipe(
        Effect.provide(ScriptedModel.layer(["never sent"])),
        Effect.provide(Compaction.layer({ contextWindow: 500 }))
      ))
      expect(error._tag).toBe("ContextLengthExceeded")
      expect(error.message).toMatch(/^the messages are about \d+ tokens after compaction \(\d+ before\) and the tool definitions \d+, over the model's context window of 500$/)
    }))

  it.effect("a policy out of range is InvalidOptions naming the setting", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Layer.build(Compaction.layer({ keepLastMessages: 0 })))
      expect(error).toMatchObject({ _tag: "InvalidOptions", message: "Compaction: keepLastMessages must be an integer >= 1, got 0" })
      const threshold = yield* Effect.flip(Layer.build(Compaction.layer({ threshold: 0 })))
      expect(threshold.message).toBe("Compaction: threshold must be in (0, 1], got 0")
    }).pipe(Effect.scoped))
})

describe("Compaction: images and other parts", () => {
  // A real 1×1 PNG: 70 bytes, estimated as Budget.estimatedImageTokens (765) like any image.
  const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
  const screenshot = Tool.fromDefinition({
    name: "screenshot",
    description: "Takes a screenshot",
    parameters: { type: "object", properties: {} },
    call: () => Effect.succeed({ content: "[image image/png: attached]", isError: false, parts: [Model.imagePart({ data: png, mediaType: "image/png" })] })
  })
  const looker = Agent.make({ name: "looker", instructions: "Look.", tools: [screenshot] })
  // A new argument each time: the same call three times in a row would end the run as repeated.
  const look = (n: number): ScriptedModel.Turn => ({ toolCalls: [{ name: "screenshot", arguments: { n } }] })

  it.effect("screenshots count as the budget estimates them: past the window, old results' images are dropped and named (they counted as nothing)", () =>
    Effect.gen(function*() {
      const requests: Array<Model.Request> = []
      const script: ScriptedModel.Script = (request) => {
        requests.push(request)
        return requests.length <= 5 ? look(requests.length) : "Seen."
      }
      const events = yield* eventsOf(Agent.stream(looker, "Take five screenshots.")).pipe(
        Effect.provide(ScriptedModel.layer(script)),
        Effect.provide(Compaction.layer({ contextWindow: 3000, keepLastMessages: 2 }))
      )
      const compacted = events.filter((event): event is AgentEvent.Of<"ContextCompacted"> => event._tag === "ContextCompacted")
      expect(compacted.length).toBeGreaterThan(0)
      expect(compacted[0]!.strategy).toBe("tool_results")
      expect(compacted[0]!.tokensBefore).toBeGreaterThan(0.75 * 3000)
      const last = requests.at(-1)!.messages!
      const tools = last.filter((message): message is Model.ToolMessage => message.role === "tool")
      expect(tools).toHaveLength(5)
      // The kept tail's result keeps its image; the older ones are named where they were.
      expect(tools.at(-1)!.parts).toHaveLength(1)
      for (const tool of tools.slice(0, -1)) {
        expect(tool.parts).toBeUndefined()
        expect(tool.content).toBe("[image image/png: attached]\n[image image/png, 70 bytes] (dropped by compaction)")
      }
    }))

  it.effect("a summary request carries no image bytes: the summarised messages' images are named in its transcript", () =>
    Effect.gen(function*() {
      const requests: Array<Model.Request> = []
      const script: ScriptedModel.Script = (request) => {
        requests.push(request)
        return request.messages?.[0]?.content === Compaction.defaultPolicy.summaryInstructions ? "A picture was shown." : "Fine."
      }
      const long = "lorem ipsum ".repeat(150)
      const history: ReadonlyArray<Model.Message> = [
        Model.user([Model.textPart("Look at this."), Model.imagePart({ data: png, mediaType: "image/png" })]),
        Model.assistant(long),
        Model.user("And now?"),
        Model.assistant(long)
      ]
      yield* Agent.run(Agent.make({ name: "chat", instructions: "Chat." }), "Go on.", { history }).pipe(
        Effect.provide(ScriptedModel.layer(script)),
        Effect.provide(Compaction.layer({ contextWindow: 1200, keepLastMessages: 1 }))
      )
      const summary = requests.find((request) => request.messages?.[0]?.content === Compaction.defaultPolicy.summaryInstructions)!
      expect(summary.messages).toHaveLength(2)
      const transcript = summary.messages![1]!.content as string
      expect(typeof transcript).toBe("string")
      expect(transcript.startsWith("user: Look at this.\n[image image/png, 70 bytes]\n\nassistant: lorem ipsum")).toBe(true)
      expect(transcript).not.toContain(png.slice(0, 20))
    }))
})

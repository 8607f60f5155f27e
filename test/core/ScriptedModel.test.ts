import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Stream } from "effect"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import { adjustWhenSleeping } from "../support/clock.js"

const ask = (content: string, extra: Partial<Model.Request> = {}) =>
  Model.generate({ messages: [Model.user(content)], ...extra })

describe("ScriptedModel", () => {
  it.effect("answers turns in call order and fails with ScriptExhausted when they run out", () =>
    Effect.gen(function*() {
      expect(Model.text(yield* ask("one"))).toBe("first")
      expect(Model.text(yield* ask("two"))).toBe("second")
      const error = yield* Effect.flip(ask("three"))
      expect(error).toBeInstanceOf(ModelError.ScriptExhausted)
      expect(error.message).toBe("ScriptedModel: call #3 has no turn left (the script has 2 turns)")
      expect(error.retryable).toBe(false)
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer(["first", "second"]))))

  it.effect("a test can assert the whole script was consumed", () =>
    Effect.gen(function*() {
      yield* ask("one")
      const error = yield* Effect.flip(ScriptedModel.assertConsumed)
      expect(error).toBeInstanceOf(ScriptedModel.ScriptNotConsumed)
      expect(error.message).toBe("ScriptedModel: 1 of 2 turns were never used")
      expect(yield* ScriptedModel.remaining).toBe(1)
    }).pipe(Effect.provide(ScriptedModel.layer(["first", "second"]))))

  it.effect("the function form sees each request and its index", () =>
    Effect.gen(function*() {
      expect(Model.text(yield* ask("hello"))).toBe("0: hello")
      expect(Model.text(yield* ask("world"))).toBe("1: world")
      const calls = yield* ScriptedModel.calls
      expect(calls.map((call) => call.messages?.[0]?.content)).toEqual(["hello", "world"])
      expect(yield* ScriptedModel.remaining).toBeUndefined()
    }).pipe(
      Effect.provide(ScriptedModel.layer((request, index) => `${index}: ${request.messages?.at(-1)?.content}`))
    ))

  it.effect("input tokens count the whole request, whether it extends the last one, reuses its array or replaces a message", () =>
    Effect.gen(function*() {
      const tokensOf = (messages: ReadonlyArray<Model.Message>) =>
        Effect.map(Model.generate({ messages }), (response) => response.usage.inputTokens)
      const a = Model.user("a".repeat(40)) // 10 tokens
      const b = Model.assistant("b".repeat(80)) // 20 tokens
      const c = Model.user("c".repeat(400)) // 100 tokens
      const conversation: Array<Model.Message> = [a]
      expect(yield* tokensOf(conversation)).toBe(10)
      conversation.push(b) // the same array, grown in place
      expect(yield* tokensOf(conversation)).toBe(30)
      expect(yield* tokensOf([a, b, c])).toBe(130)
      conversation[1] = c // a message replaced in place
      expect(yield* tokensOf(conversation)).toBe(110)
      expect(yield* tokensOf([c])).toBe(100)
      expect(yield* tokensOf([a, b])).toBe(30)
    }).pipe(Effect.provide(ScriptedModel.layer(() => ""))))

  it.effect("tool calls, reasoning, usage and scripted errors", () =>
    Effect.gen(function*() {
      const response = yield* ask("go")
      expect(response.choices[0]).toEqual({
        index: 0,
        text: "",
        toolCalls: [{ id: "call_1_0_0", name: "lookup", arguments: '{"q":"x"}' }],
        reasoning: "need data",
        finishReason: "tool_calls"
      })
      // About four characters a token: "go" → 1; "lookup" + {"q":"x"} (15 characters) → 4.
      expect(response.usage).toEqual({ inputTokens: 1, outputTokens: 4, totalTokens: 5 })
      const error = yield* Effect.flip(ask("again"))
      expect(error).toBeInstanceOf(ModelError.RateLimited)
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "lookup", arguments: { q: "x" } }], reasoning: "need data" },
        { error: new ModelError.RateLimited({ message: "slow down", retryAfterMs: 100 }) }
      ]))
    ))

  it.effect("n > 1 consumes one turn per choice", () =>
    Effect.gen(function*() {
      const response = yield* ask("go", { n: 3 })
      expect(response.choices.map((choice) => [choice.index, choice.text])).toEqual([[0, "a"], [1, "b"], [2, "c"]])
      yield* ScriptedModel.assertConsumed
    }).pipe(Effect.provide(ScriptedModel.layer(["a", "b", "c"]))))

  it.effect("stream sends word-sized deltas that accumulate to the same response as generate", () =>
    Effect.gen(function*() {
      const request: Model.Request = { messages: [Model.user("go")] }
      const chunks = yield* Model.stream(request).pipe(Stream.runCollect)
      const deltas = chunks.flatMap((chunk) => (chunk._tag === "TextDelta" ? [chunk.text] : []))
      expect(deltas).toEqual(["The", " quick", "  brown", "\nfox."])
      const streamed = yield* Model.accumulate(Stream.fromIterable(chunks))
      const generated = yield* Model.generate(request)
      expect({ ...streamed, id: "" }).toEqual({ ...generated, id: "" })
    }).pipe(Effect.provide(ScriptedModel.layer(["The quick  brown\nfox.", "The quick  brown\nfox."]))))

  it.effect("a delayed turn waits on the Clock (TestClock)", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(ask("go"))
      yield* adjustWhenSleeping("1 second")
      expect(fiber.pollUnsafe()).toBeUndefined()
      yield* adjustWhenSleeping("1 second")
      expect(Model.text(yield* Fiber.join(fiber))).toBe("late")
    }).pipe(Effect.provide(ScriptedModel.layer([{ text: "late", delay: "2 seconds" }]))))
})

/**
 * Issue 12, item 3: token and cost budgets overshot 20× under concurrency (200 concurrent 100-token calls under
 * `maxTotalTokens: 1000` all went through), because only call slots were reserved. Every call now reserves its
 * worst case before it is sent and settles its real usage after.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as Agent from "../../src/core/Agent.js"
import * as Architecture from "../../src/core/Architecture.js"
import * as Budget from "../../src/core/Budget.js"
import * as Model from "../../src/core/Model.js"
import * as ModelError from "../../src/core/ModelError.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"

/** 200 ASCII characters: an estimated 50 tokens, plus 4 for the message. */
const prompt = "x".repeat(200)

/**
 * A server that honours `maxTokens`: it writes 50 output tokens (fewer when capped) for 54 input tokens, after
 * yielding a few times so that concurrent calls overlap.
 */
const honest = (output = 50) =>
  ScriptedModel.layer((request) =>
    Effect.gen(function*() {
      for (let i = 0; i < 5; i++) yield* Effect.yieldNow
      const outputTokens = Math.min(output, request.maxTokens ?? Infinity)
      return { text: "ok", usage: { inputTokens: 54, outputTokens } }
    })
  )

/** `width` concurrent calls; refusals are counted. */
const fanOut = (width: number, maxTokens: number | undefined) =>
  Architecture.make({
    name: "fan-out",
    program: () =>
      Effect.gen(function*() {
        const outcomes = yield* Effect.forEach(
          Array.from({ length: width }, (_, i) => i),
          (i) =>
            Architecture.generate(
              { messages: [Model.user(prompt)], ...(maxTokens !== undefined ? { maxTokens } : {}) },
              { step: `fan_${i}` }
            ).pipe(
              Effect.as("sent" as const),
              Effect.catchTag("BudgetExhausted", () => Effect.succeed("refused" as const)),
              Effect.orElseSucceed(() => "failed" as const)
            ),
          { concurrency: "unbounded" }
        )
        return { output: "done", metadata: { sent: outcomes.filter((o) => o === "sent").length } }
      })
  })

const run = (limits: Budget.Limits, maxTokens: number | undefined, width = 200) =>
  Agent.run(Agent.make({ name: "fan", instructions: "", architecture: fanOut(width, maxTokens) }), "go", { budget: limits })

describe("reliability: budgets under 200-way fan-out", () => {
  it.effect("maxTotalTokens: 1000 with 200 concurrent 104-token calls ends at or under 1000", () =>
    Effect.gen(function*() {
      const result = yield* run({ maxTotalTokens: 1000 }, 50)
      expect(result.usage.totalTokens).toBeLessThanOrEqual(1000)
      // Not starved either: nine fit at once, and a tenth with its maxTokens lowered to what was left.
      // 9 × 104 = 936; the tenth has 64 left: 54 of input and maxTokens 10.
      expect(result.modelCalls).toBe(10)
      expect(result.usage.totalTokens).toBe(1000)
      const requests = yield* ScriptedModel.calls
      expect(requests.filter((r) => r.maxTokens === 10)).toHaveLength(1)
    }).pipe(Effect.provide(honest())))

  it.effect("maxCost with pricing ends at or under the limit", () =>
    Effect.gen(function*() {
      // $1 per 1,000 tokens either way: 104 tokens cost $0.104; the limit buys 1,000 tokens.
      const result = yield* run({ maxCost: 1, pricing: { inputPerMillion: 1_000, outputPerMillion: 1_000 } }, 50)
      const cost = (result.usage.inputTokens + result.usage.outputTokens) / 1_000
      expect(cost).toBeLessThanOrEqual(1 + 1e-9)
      expect(result.modelCalls).toBeGreaterThanOrEqual(9)
    }).pipe(Effect.provide(honest())))

  it.effect("maxOutputTokens and maxInputTokens hold too", () =>
    Effect.gen(function*() {
      const output = yield* run({ maxOutputTokens: 500 }, 50)
      expect(output.usage.outputTokens).toBeLessThanOrEqual(500)
      expect(output.modelCalls).toBe(10)
      const input = yield* run({ maxInputTokens: 540 }, 50)
      expect(input.usage.inputTokens).toBeLessThanOrEqual(540)
      expect(input.modelCalls).toBe(10)
    }).pipe(Effect.provide(honest())))

  it.effect("requests without maxTokens reserve reserveOutputTokens and are capped at what is left", () =>
    Effect.gen(function*() {
      // The server would write 400 tokens; the default reservation (4,096) does not fit, so each call is sent
      // with maxTokens lowered to what is left, and the calls go one after another.
      const result = yield* run({ maxTotalTokens: 1000 }, undefined, 20).pipe(Effect.provide(honest(400)))
      expect(result.usage.totalTokens).toBeLessThanOrEqual(1000)
      const requests = yield* ScriptedModel.calls.pipe(Effect.provide(honest(400)))
      expect(requests).toHaveLength(0) // a fresh layer: the run above used its own
      const small = yield* run({ maxTotalTokens: 1000, reserveOutputTokens: 100 }, undefined).pipe(
        Effect.provide(honest(100))
      )
      // Six calls of 154 at once (924), then a seventh with the 76 left: 54 of input and maxTokens 22.
      expect(small.usage.totalTokens).toBe(1000)
      expect(small.modelCalls).toBe(7)
    }))

  it.effect("a call that fails gives its reservation back", () =>
    Effect.gen(function*() {
      // Two calls reserve 104 each of 208; the first fails, so the third fits.
      const result = yield* run({ maxTotalTokens: 208 }, 50, 3)
      expect(result.metadata).toEqual({ sent: 2 })
      expect(result.usage.totalTokens).toBe(208)
    }).pipe(
      Effect.provide(ScriptedModel.layer((_request, index) =>
        index === 0
          ? { error: new ModelError.ServerError({ status: 500, message: "boom" }) }
          : { text: "ok", usage: { inputTokens: 54, outputTokens: 50 } }
      ))
    ))

  it.effect("an interrupted call gives its reservation back", () =>
    Effect.gen(function*() {
      const tracker = yield* Budget.make({ maxTotalTokens: 104 })
      const held = yield* tracker.reserve({ messages: [Model.user(prompt)], maxTokens: 50 })
      // The budget is held: a second caller waits for it rather than being refused.
      const waiting = yield* Effect.forkChild(tracker.reserve({ messages: [Model.user(prompt)], maxTokens: 50 }))
      yield* Effect.yieldNow
      expect(waiting.pollUnsafe()).toBeUndefined()
      held.release()
      const second = yield* Fiber.join(waiting)
      expect(second.request.maxTokens).toBe(50)
      // Settled with its real usage: nothing is left, and with nothing in flight the next call is refused.
      second.settle({ inputTokens: 54, outputTokens: 50, totalTokens: 104 })
      const refused = yield* Effect.flip(tracker.reserve({ messages: [Model.user(prompt)], maxTokens: 50 }))
      expect(refused.limit).toBe("max_total_tokens")
    }))

  it.effect("the input estimate counts ASCII at four characters a token and other characters at one", () =>
    Effect.sync(() => {
      expect(Budget.estimateInputTokens({ messages: [Model.user("x".repeat(200))] })).toBe(54)
      expect(Budget.estimateInputTokens({ prompt: "日本語のテキスト" })).toBe(8)
    }))

  it.effect("waiting callers still stop at the wall clock", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.forkChild(
        run({ maxTotalTokens: 104, maxDuration: 1_000 }, 50, 2).pipe(
          Effect.provide(ScriptedModel.layer([{ text: "slow", delay: "10 seconds" }, "never"]))
        )
      )
      yield* TestClock.adjust("2 seconds")
      const result = yield* Fiber.join(fiber)
      expect(result.interrupted).toBe(true)
      expect(result.interruptionReason).toBe("budget:wall_clock")
    }))
})

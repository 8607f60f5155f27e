import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Schema, Stream } from "effect"
import * as Agent from "../../src/core/Agent.js"
import * as AgentError from "../../src/core/AgentError.js"
import * as Architecture from "../../src/core/Architecture.js"
import * as Budget from "../../src/core/Budget.js"
import * as Model from "../../src/core/Model.js"
import * as ScriptedModel from "../../src/core/ScriptedModel.js"
import * as Tool from "../../src/core/Tool.js"
import { adjustWhenSleeping } from "../support/clock.js"

/** A model that answers after yielding to other fibers a few times, so that concurrent calls overlap. */
const slowEcho = ScriptedModel.layer((_request, index) =>
  Effect.gen(function*() {
    for (let i = 0; i < 5; i++) yield* Effect.yieldNow
    return `answer ${index + 1}`
  })
)

/** Fans out `width` concurrent model calls; calls refused by the budget are counted, not fatal. */
const fanOut = (width: number) =>
  Architecture.make({
    name: "fan-out",
    program: (input) =>
      Effect.gen(function*() {
        const outcomes = yield* Effect.forEach(
          Array.from({ length: width }, (_, i) => i),
          (i) =>
            Architecture.generate({ messages: [Model.user(`${input.prompt} ${i}`)] }, { step: `fan_${i}` }).pipe(
              Effect.as("sent" as const),
              Effect.catchTag("BudgetExhausted", () => Effect.succeed("refused" as const))
            ),
          { concurrency: "unbounded" }
        )
        return {
          output: "fanned out",
          metadata: { sent: outcomes.filter((o) => o === "sent").length, refused: outcomes.filter((o) => o === "refused").length }
        }
      })
  })

const add = Tool.make({
  name: "add",
  description: "Adds",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.succeed(a + b)
})

describe("Budget", () => {
  it.effect("50 concurrent callers under maxCalls: 7 make exactly 7 calls", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "fan", instructions: "", architecture: fanOut(50) })
      const result = yield* Agent.run(agent, "q", { budget: { maxCalls: 7 } })
      expect(yield* ScriptedModel.calls).toHaveLength(7)
      expect(result.modelCalls).toBe(7)
      expect(result.metadata).toEqual({ sent: 7, refused: 43 })
    }).pipe(Effect.provide(slowEcho)))

  it.effect("exhaustion mid-run: an interrupted result with the best output so far, not an error", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "calc", instructions: "", tools: [add] })
      const result = yield* Agent.run(agent, "go", { budget: { maxCalls: 2 } })
      expect(result.interrupted).toBe(true)
      expect(result.interruptionReason).toBe("budget:max_calls")
      expect(result.output).toBe("partial: 3 so far")
      expect(result.modelCalls).toBe(2)
      expect(yield* ScriptedModel.remaining).toBe(1)
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { text: "let me add", toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] },
        { text: "partial: 3 so far", toolCalls: [{ name: "add", arguments: { a: 3, b: 4 } }] },
        "final: 7"
      ]))
    ))

  it.effect("a warning event when a limit reaches 80 %", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "calc", instructions: "", tools: [add] })
      const events = yield* Agent.stream(agent, "go", { budget: { maxCalls: 5 } }).pipe(
        Stream.runCollect
      )
      const warnings = events.filter((event) => event._tag === "BudgetWarning")
      expect(warnings.map((w) => [w.limit, w.used, w.max])).toEqual([["max_calls", 4, 5]])
      // The warning comes before the fourth call is sent.
      const tags = events.map((event) => event._tag)
      expect(tags.indexOf("BudgetWarning")).toBeLessThan(tags.lastIndexOf("ModelCalled"))
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }] },
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] },
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 3 } }] },
        "done"
      ]))
    ))

  it.effect("token limits: the call that crosses the limit completes, the next is refused", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "calc", instructions: "", tools: [add] })
      const result = yield* Agent.run(agent, "go", { budget: { maxOutputTokens: 100 } })
      expect(result.interruptionReason).toBe("budget:max_output_tokens")
      expect(result.modelCalls).toBe(2)
      expect(result.usage.outputTokens).toBe(120)
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }], usage: { inputTokens: 10, outputTokens: 60 } },
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }], usage: { inputTokens: 10, outputTokens: 60 } },
        "never sent"
      ]))
    ))

  it.effect("each ModelReplied carries the call's cost when the budget has pricing (and none without)", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "calc", instructions: "", tools: [add] })
      const replies = (budget?: Budget.Limits) =>
        Agent.stream(agent, "go", budget === undefined ? {} : { budget }).pipe(
          Stream.filter((event) => event._tag === "ModelReplied"),
          Stream.map((event) => (event._tag === "ModelReplied" ? event.cost : undefined)),
          Stream.runCollect
        )
      // 50 in at 2 per million and 50 out at 8 per million; then 20 in and 10 out.
      expect(yield* replies({ pricing: { inputPerMillion: 2, outputPerMillion: 8 } })).toEqual([0.0005, 0.00012])
      expect(yield* replies()).toEqual([undefined, undefined])
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }], usage: { inputTokens: 50, outputTokens: 50 } },
        { text: "2", usage: { inputTokens: 20, outputTokens: 10 } },
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }], usage: { inputTokens: 50, outputTokens: 50 } },
        { text: "2", usage: { inputTokens: 20, outputTokens: 10 } }
      ]))
    ))

  it.effect("cost limits use the pricing", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "calc", instructions: "", tools: [add] })
      const result = yield* Agent.run(agent, "go", {
        budget: { maxCost: 0.1, pricing: { inputPerMillion: 1_000, outputPerMillion: 1_000 } }
      })
      // 100 tokens at $1,000 per million = $0.1: the second call is refused.
      expect(result.interruptionReason).toBe("budget:max_cost")
      expect(result.modelCalls).toBe(1)
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }], usage: { inputTokens: 50, outputTokens: 50 } },
        "never sent"
      ]))
    ))

  it.effect("the wall clock interrupts work in flight and keeps the best output (TestClock)", () =>
    Effect.gen(function*() {
      let finalized = false
      const slow = Tool.make({
        name: "slow",
        description: "",
        parameters: Schema.Struct({}),
        timeout: "1 hour",
        handler: () => Effect.sleep("10 minutes").pipe(Effect.onInterrupt(() => Effect.sync(() => { finalized = true })))
      })
      const agent = Agent.make({ name: "slowpoke", instructions: "", tools: [slow] })
      // `maxDuration` takes a Duration.Input; `maxDurationMs`, its deprecated name, still works.
      for (const budget of [{ maxDuration: "60 seconds" }, { maxDurationMs: 60_000 }] as const) {
        finalized = false
        const script = ScriptedModel.layer([{ text: "working on it", toolCalls: [{ name: "slow" }] }, "late"])
        const fiber = yield* Effect.forkChild(Agent.run(agent, "go", { budget }).pipe(Effect.provide(script)))
        yield* adjustWhenSleeping("61 seconds")
        const result = yield* Fiber.join(fiber)
        expect(result.interrupted).toBe(true)
        expect(result.interruptionReason).toBe("budget:wall_clock")
        expect(result.output).toBe("working on it")
        expect(finalized).toBe(true)
      }
    }))

  it.effect("sub-agents share their parent's budget", () =>
    Effect.gen(function*() {
      const helper = Agent.make({ name: "helper", instructions: "", architecture: fanOut(4) })
      const parent = Agent.make({
        name: "parent",
        instructions: "",
        architecture: Architecture.make({
          name: "two-helpers",
          program: (input) =>
            Effect.gen(function*() {
              const a = yield* Agent.runChild(helper, input.prompt, { role: "helper", index: 1 })
              const b = yield* Agent.runChild(helper, input.prompt, { role: "helper", index: 2 })
              return { output: "done", metadata: { a: a.metadata, b: b.metadata } }
            })
        })
      })
      const result = yield* Agent.run(parent, "q", { budget: { maxCalls: 6 } })
      expect(result.modelCalls).toBe(6)
      expect(result.metadata).toEqual({ a: { sent: 4, refused: 0 }, b: { sent: 2, refused: 2 } })
    }).pipe(Effect.provide(slowEcho)))

  it.effect("a Budget layer is shared by every run that finds it in context", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "echo", instructions: "" })
      const first = yield* Agent.run(agent, "1")
      const second = yield* Agent.run(agent, "2")
      const third = yield* Agent.run(agent, "3")
      expect([first.interrupted, second.interrupted, third.interrupted]).toEqual([false, false, true])
      expect(third.interruptionReason).toBe("budget:max_calls")
      expect((yield* Budget.Budget).limits.maxCalls).toBe(2)
    }).pipe(Effect.provide(slowEcho), Effect.provide(Budget.layer({ maxCalls: 2 }))))

  it.effect("invalid limits fail with InvalidOptions naming the problem", () =>
    Effect.gen(function*() {
      const negative = yield* Effect.flip(Budget.make({ maxCalls: -1 }))
      expect(negative).toBeInstanceOf(AgentError.InvalidOptions)
      expect(negative.message).toContain("maxCalls")
      const costless = yield* Effect.flip(Budget.make({ maxCost: 1 }))
      expect(costless.message).toContain("pricing")
    }))
})

describe("Budget: prompt-cache pricing", () => {
  it("costOf bills cached input and cache writes at their rates, each the input rate when unset", () => {
    const usage: Model.Usage = { inputTokens: 1_000, outputTokens: 100, totalTokens: 1_100, cachedInputTokens: 800 }
    // 200 uncached at 2, 800 cached at 0.5, 100 out at 8 (per million).
    expect(Budget.costOf({ inputPerMillion: 2, outputPerMillion: 8, cachedInputPerMillion: 0.5 }, usage)).toBeCloseTo(0.0016, 12)
    // No cached rate: the cached tokens cost what input costs.
    expect(Budget.costOf({ inputPerMillion: 2, outputPerMillion: 8 }, usage)).toBeCloseTo(0.0028, 12)
    // 600 uncached at 3, 400 written at 3.75.
    const written: Model.Usage = { inputTokens: 1_000, outputTokens: 0, totalTokens: 1_000, cacheWriteTokens: 400 }
    expect(Budget.costOf({ inputPerMillion: 3, outputPerMillion: 15, cacheWritePerMillion: 3.75 }, written)).toBeCloseTo(0.0033, 12)
  })

  it.effect("ModelReplied.cost, max_cost, RunResult.usage and spent all count the cached tokens the model reported", () =>
    Effect.gen(function*() {
      const agent = Agent.make({ name: "calc", instructions: "", tools: [add] })
      const pricing = { inputPerMillion: 2, outputPerMillion: 8, cachedInputPerMillion: 0.5 }
      const tracker = yield* Budget.make({ maxCost: 1, pricing })
      const events = yield* Agent.stream(agent, "go").pipe(Stream.runCollect, Effect.provideService(Budget.Budget, tracker))
      const costs = events.flatMap((event) => (event._tag === "ModelReplied" ? [event.cost] : []))
      // (200 × 2 + 800 × 0.5 + 100 × 8) / 1e6, then (100 × 2 + 900 × 0.5 + 10 × 8) / 1e6.
      expect(costs.map((cost) => +cost!.toFixed(9))).toEqual([0.0016, 0.00073])
      const done = events.find((event) => event._tag === "RunCompleted")
      expect(done?._tag === "RunCompleted" ? done.result.usage : undefined).toMatchObject({
        inputTokens: 2_000,
        cachedInputTokens: 1_700
      })
      const spent = yield* tracker.spent
      expect([spent.cachedInputTokens, spent.cacheWriteTokens, +spent.cost.toFixed(9)]).toEqual([1_700, 0, 0.00233])
    }).pipe(
      Effect.provide(ScriptedModel.layer([
        {
          toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }],
          usage: { inputTokens: 1_000, outputTokens: 100, cachedInputTokens: 800 }
        },
        { text: "2", usage: { inputTokens: 1_000, outputTokens: 10, cachedInputTokens: 900 } }
      ]))
    ))

  it.effect("pricing with a negative cached rate is refused, naming it", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Budget.make({ pricing: { inputPerMillion: 1, outputPerMillion: 1, cachedInputPerMillion: -1 } }))
      expect(error.message).toContain("cachedInputPerMillion")
    }))
})

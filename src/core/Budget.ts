/**
 * Budgets cap what a run may spend: model calls, input / output / total tokens, wall-clock time and cost. A
 * call *reserves* its slot before it is sent, so concurrent fan-out never overshoots `maxCalls`. Tokens and cost
 * are only known after a call: the call that crosses such a limit completes, and the next one is refused.
 *
 * A run gets its tracker from `Agent.run(..., { budget })`, else from a `Budget` layer in context (which several
 * runs then share, e.g. a whole evaluation), else it is unlimited. Sub-agents share their parent's tracker.
 *
 * @since 0.1.0
 */
import { Clock, Context, Effect, Layer, Schema } from "effect"
import { BudgetExhausted, type InvalidOptions } from "./AgentError.js"
import * as Decode from "./internal/decode.js"
import type * as Model from "./Model.js"

const NonNegative = Schema.Number.check(Schema.isGreaterThanOrEqualTo(0))

/** The limits of a budget; every one is optional. */
export const Limits = Schema.Struct({
  maxCalls: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  maxInputTokens: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  maxOutputTokens: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  maxTotalTokens: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  /** Wall-clock time of the run, in milliseconds. In-flight work is interrupted when it is up. */
  maxDurationMs: Schema.optional(NonNegative),
  /** Cost in the unit of `pricing`. Requires `pricing`. */
  maxCost: Schema.optional(NonNegative),
  pricing: Schema.optional(Schema.Struct({ inputPerMillion: NonNegative, outputPerMillion: NonNegative })),
  /** The fraction of a limit at which a `BudgetWarning` is emitted (default 0.8). */
  warnAt: Schema.optional(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 1 })))
}).check(
  Schema.makeFilter((limits) =>
    limits.maxCost === undefined || limits.pricing !== undefined ||
    { path: ["maxCost"], issue: "maxCost needs pricing to compute a cost" }
  )
)
/** The limits of a budget. */
export type Limits = typeof Limits.Type

/** The name of a limit, as it appears in `budget:<limit>` interruption reasons. */
export type Limit =
  | "max_calls"
  | "max_input_tokens"
  | "max_output_tokens"
  | "max_total_tokens"
  | "max_cost"
  | "wall_clock"

/** A limit that crossed its warning fraction. */
export interface Warning {
  readonly limit: Limit
  readonly used: number
  readonly max: number
}

/** What has been spent so far. */
export interface Spent {
  readonly calls: number
  readonly inputTokens: number
  readonly outputTokens: number
  readonly totalTokens: number
  readonly cost: number
  readonly elapsedMs: number
}

/** A budget in use. */
export interface Tracker {
  readonly limits: Limits
  /** Epoch milliseconds after which no call may start, if there is a wall-clock limit. */
  readonly deadline: number | undefined
  /** Takes one call slot, or fails when a limit is reached; answers the warnings this reservation crossed. */
  readonly reserve: Effect.Effect<ReadonlyArray<Warning>, BudgetExhausted>
  /** Adds a finished call's tokens (and cost); answers the warnings this crossed. */
  readonly record: (usage: Model.Usage) => ReadonlyArray<Warning>
  readonly spent: Effect.Effect<Spent>
}

/** The budget service: a tracker shared by every run that finds it in context. */
export class Budget extends Context.Service<Budget, Tracker>()("valet/Budget") {}

const none: ReadonlyArray<Warning> = []

/** Starts a tracker for `limits`; the wall clock starts now. */
export const make = (limits: Limits): Effect.Effect<Tracker, InvalidOptions> =>
  Effect.gen(function*() {
    const valid = yield* Decode.decode("Budget", Limits, limits)
    const startedAt = yield* Clock.currentTimeMillis
    return makeTracker(valid, startedAt)
  })

/** A tracker with no limits. */
export const unlimited: Tracker = {
  limits: {},
  deadline: undefined,
  reserve: Effect.succeed(none),
  record: () => none,
  spent: Effect.succeed({ calls: 0, inputTokens: 0, outputTokens: 0, totalTokens: 0, cost: 0, elapsedMs: 0 })
}

/** A `Budget` layer: every run that finds it in context shares this one tracker. */
export const layer = (limits: Limits): Layer.Layer<Budget, InvalidOptions> => Layer.effect(Budget, make(limits))

const makeTracker = (limits: Limits, startedAt: number): Tracker => {
  const warnAt = limits.warnAt ?? 0.8
  const deadline = limits.maxDurationMs !== undefined ? startedAt + limits.maxDurationMs : undefined
  // Plain counters: JavaScript runs one fiber step at a time, so a check-and-increment inside one synchronous
  // step is atomic. That is what makes 50 concurrent reservations under maxCalls: 7 take exactly 7 slots.
  let calls = 0
  let inputTokens = 0
  let outputTokens = 0
  let totalTokens = 0
  let cost = 0
  const warned = new Set<Limit>()

  const warnIfCrossed = (out: Array<Warning> | undefined, limit: Limit, used: number, max: number | undefined) => {
    if (max === undefined || max === 0 || warned.has(limit) || used < warnAt * max) return out
    warned.add(limit)
    const list = out ?? []
    list.push({ limit, used, max })
    return list
  }

  const exhausted = (now: number): BudgetExhausted | undefined => {
    if (limits.maxCalls !== undefined && calls >= limits.maxCalls) {
      return new BudgetExhausted({ limit: "max_calls", used: calls, max: limits.maxCalls })
    }
    if (limits.maxInputTokens !== undefined && inputTokens >= limits.maxInputTokens) {
      return new BudgetExhausted({ limit: "max_input_tokens", used: inputTokens, max: limits.maxInputTokens })
    }
    if (limits.maxOutputTokens !== undefined && outputTokens >= limits.maxOutputTokens) {
      return new BudgetExhausted({ limit: "max_output_tokens", used: outputTokens, max: limits.maxOutputTokens })
    }
    if (limits.maxTotalTokens !== undefined && totalTokens >= limits.maxTotalTokens) {
      return new BudgetExhausted({ limit: "max_total_tokens", used: totalTokens, max: limits.maxTotalTokens })
    }
    if (limits.maxCost !== undefined && cost >= limits.maxCost) {
      return new BudgetExhausted({ limit: "max_cost", used: cost, max: limits.maxCost })
    }
    if (deadline !== undefined && now >= deadline) {
      return new BudgetExhausted({ limit: "wall_clock", used: now - startedAt, max: limits.maxDurationMs! })
    }
    return undefined
  }

  const reserve = Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const error = exhausted(now)
    if (error !== undefined) return Effect.fail(error)
    calls++
    let out = warnIfCrossed(undefined, "max_calls", calls, limits.maxCalls)
    if (deadline !== undefined) out = warnIfCrossed(out, "wall_clock", now - startedAt, limits.maxDurationMs)
    return Effect.succeed(out ?? none)
  })

  const record = (usage: Model.Usage): ReadonlyArray<Warning> => {
    inputTokens += usage.inputTokens
    outputTokens += usage.outputTokens
    totalTokens += usage.totalTokens
    if (limits.pricing !== undefined) {
      cost += (usage.inputTokens * limits.pricing.inputPerMillion + usage.outputTokens * limits.pricing.outputPerMillion) /
        1_000_000
    }
    let out = warnIfCrossed(undefined, "max_input_tokens", inputTokens, limits.maxInputTokens)
    out = warnIfCrossed(out, "max_output_tokens", outputTokens, limits.maxOutputTokens)
    out = warnIfCrossed(out, "max_total_tokens", totalTokens, limits.maxTotalTokens)
    out = warnIfCrossed(out, "max_cost", cost, limits.maxCost)
    return out ?? none
  }

  const spent = Effect.map(Clock.currentTimeMillis, (now): Spent => ({
    calls,
    inputTokens,
    outputTokens,
    totalTokens,
    cost,
    elapsedMs: now - startedAt
  }))

  return { limits, deadline, reserve, record, spent }
}

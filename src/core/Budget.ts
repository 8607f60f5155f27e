/**
 * Budgets cap what a run may spend: model calls, input / output / total tokens, wall-clock time and cost.
 *
 * Every call *reserves* its worst case before it is sent and *settles* what it really used after, so concurrent
 * fan-out cannot overshoot a limit by racing past it:
 * - a call takes one call slot (`maxCalls` is exact);
 * - with a token or cost limit, it also reserves an estimate of its input tokens (see `estimateInputTokens`)
 *   and its output worst case: `maxTokens × n`, or `reserveOutputTokens × n` (default 4,096) for a request with
 *   no `maxTokens`. When the budget has less left than that, the request is sent with `maxTokens` lowered to what
 *   is left; when it has not even one output token left, the call waits for calls in flight to settle (their
 *   unused reservations come back) and is refused with `BudgetExhausted` only when nothing is in flight;
 * - the reservation is replaced by the server's real usage when the call returns, and given back when it fails
 *   or is interrupted.
 *
 * So the spend ends above a token or cost limit only by what the estimates miss: input tokens beyond the
 * estimate, and output of a server that ignores `maxTokens` or of a request without `maxTokens` that writes more
 * than `reserveOutputTokens` (set `maxTokens` on requests, or a larger `reserveOutputTokens`, to close that gap).
 * In-flight work is interrupted when the wall-clock limit is up.
 *
 * A run gets its tracker from `Agent.run(..., { budget })`, else from a `Budget` layer in context (which several
 * runs then share, e.g. a whole evaluation), else it is unlimited. Sub-agents share their parent's tracker.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Agent, Budget, ScriptedModel, Tool } from "valet"
 *
 * const search = Tool.make({
 *   name: "search", description: "Searches the news", parameters: Schema.Struct({ query: Schema.String }),
 *   handler: ({ query }) => Effect.succeed(`nothing found for ${query}`)
 * })
 * const agent = Agent.make({ name: "researcher", instructions: "Search until you are sure.", tools: [search] })
 *
 * // Two model calls at most: the third is refused, and the run ends interrupted (not failed), keeping its output.
 * const reason = Agent.run(agent, "Who won?", { budget: { maxCalls: 2 } }).pipe(
 *   Effect.map((result) => result.interruptionReason), // "budget:max_calls"
 *   Effect.provide(ScriptedModel.layer([
 *     { toolCalls: [{ name: "search", arguments: { query: "winner" } }] },
 *     { toolCalls: [{ name: "search", arguments: { query: "final score" } }] },
 *     "Nobody knows yet."
 *   ]))
 * )
 *
 * // One tracker shared by every run that finds it in context, e.g. a whole evaluation.
 * const shared = Budget.layer({ maxTotalTokens: 1_000_000, maxDuration: "10 minutes" })
 * ```
 *
 * @since 0.1.0
 */
import { Clock, Context, Deferred, Duration, Effect, Layer, Schema } from "effect"
import { BudgetExhausted, type InvalidOptions } from "./AgentError.js"
import * as Decode from "./internal/decode.js"
import { base64Bytes } from "./internal/modelSchema.js"
import type * as Model from "./Model.js"

const NonNegative = Schema.Number.check(Schema.isGreaterThanOrEqualTo(0))
const Count = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

/**
 * Prices per million tokens, in any one unit (the unit of `maxCost`). Cached input (read from the server's prompt
 * cache) is billed at `cachedInputPerMillion` and input written to the cache at `cacheWritePerMillion`, each the
 * input rate when not set; the rest of the input at `inputPerMillion`.
 *
 * @since 0.2.0
 * @category models
 */
export const Pricing = Schema.Struct({
  inputPerMillion: NonNegative,
  outputPerMillion: NonNegative,
  cachedInputPerMillion: Schema.optional(NonNegative),
  cacheWritePerMillion: Schema.optional(NonNegative)
})
/**
 * Prices per million tokens.
 *
 * @since 0.2.0
 * @category models
 */
export type Pricing = typeof Pricing.Type

/**
 * The cost of `usage` at `pricing`: the one formula for the budget's `max_cost` and the `cost` on `ModelReplied`.
 *
 * @since 0.2.0
 * @category utils
 */
export const costOf = (pricing: Pricing, usage: Model.Usage): number => {
  const cached = usage.cachedInputTokens ?? 0
  const written = usage.cacheWriteTokens ?? 0
  // A server that reports more cached than input tokens (none should) is not billed a negative remainder.
  const uncached = Math.max(0, usage.inputTokens - cached - written)
  return (
    uncached * pricing.inputPerMillion +
    cached * (pricing.cachedInputPerMillion ?? pricing.inputPerMillion) +
    written * (pricing.cacheWritePerMillion ?? pricing.inputPerMillion) +
    usage.outputTokens * pricing.outputPerMillion
  ) / 1_000_000
}

/**
 * The limits of a budget; every one is optional.
 *
 * @since 0.1.0
 * @category models
 */
export const Limits = Schema.Struct({
  maxCalls: Schema.optional(Count),
  maxInputTokens: Schema.optional(Count),
  maxOutputTokens: Schema.optional(Count),
  maxTotalTokens: Schema.optional(Count),
  /** Wall-clock time of the run (`"30 seconds"`, milliseconds, a `Duration`). In-flight work is interrupted when it is up. */
  // Data, not a declared type: limits cross processes (durable workflows) and files (valet.yaml) as JSON.
  maxDuration: Schema.optional(Schema.Union([Decode.WireDuration, Schema.Duration])),
  /** @deprecated use `maxDuration` (valet 0.x reads both): wall-clock time in milliseconds. */
  maxDurationMs: Schema.optional(NonNegative),
  /** Cost in the unit of `pricing`. Requires `pricing`. */
  maxCost: Schema.optional(NonNegative),
  pricing: Schema.optional(Pricing),
  /**
   * The output tokens reserved for a request that sets no `maxTokens` (per choice; default 4,096). Only used
   * when a token or cost limit is set.
   */
  reserveOutputTokens: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  /** The fraction of a limit at which a `BudgetWarning` is emitted (default 0.8). */
  warnAt: Schema.optional(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 1 })))
}).check(
  Schema.makeFilter((limits) =>
    limits.maxCost === undefined || limits.pricing !== undefined ||
    { path: ["maxCost"], issue: "maxCost needs pricing to compute a cost" }
  )
)
/**
 * The limits of a budget.
 *
 * @since 0.1.0
 * @category models
 */
export type Limits = typeof Limits.Type

/**
 * The name of a limit, as it appears in `budget:<limit>` interruption reasons.
 *
 * @since 0.1.0
 * @category models
 */
export type Limit =
  | "max_calls"
  | "max_input_tokens"
  | "max_output_tokens"
  | "max_total_tokens"
  | "max_cost"
  | "wall_clock"

/**
 * A limit that crossed its warning fraction.
 *
 * @since 0.1.0
 * @category models
 */
export interface Warning {
  readonly limit: Limit
  readonly used: number
  readonly max: number
}

/**
 * What has been spent so far (settled calls; reservations of calls in flight are not included).
 *
 * @since 0.1.0
 * @category models
 */
export interface Spent {
  readonly calls: number
  readonly inputTokens: number
  readonly outputTokens: number
  readonly totalTokens: number
  /** The part of `inputTokens` read from a prompt cache (0 when no server reported any). @since 0.2.0 */
  readonly cachedInputTokens: number
  /** The part of `inputTokens` written to a prompt cache. @since 0.2.0 */
  readonly cacheWriteTokens: number
  readonly cost: number
  readonly elapsedMs: number
}

/**
 * A call's hold on the budget, from before it is sent until it returns.
 *
 * @since 0.2.0
 * @category models
 */
export interface Reservation {
  /** The request to send: the caller's, with `maxTokens` lowered when the budget has less left than it asks. */
  readonly request: Model.Request
  /** The warnings taking this reservation crossed. */
  readonly warnings: ReadonlyArray<Warning>
  /** Replaces the reservation with what the call really used; answers the warnings this crossed. */
  readonly settle: (usage: Model.Usage) => ReadonlyArray<Warning>
  /** Gives the reservation back (the call failed or was interrupted). A no-op once settled. */
  readonly release: () => void
}

/**
 * A budget in use.
 *
 * @since 0.1.0
 * @category models
 */
export interface Tracker {
  readonly limits: Limits
  /** Epoch milliseconds after which no call may start, if there is a wall-clock limit. */
  readonly deadline: number | undefined
  /**
   * Reserves one call of `request` (see the module doc): waits while only calls in flight hold what it needs,
   * fails with `BudgetExhausted` when a limit is reached.
   */
  readonly reserve: (request: Model.Request) => Effect.Effect<Reservation, BudgetExhausted>
  readonly spent: Effect.Effect<Spent>
}

/**
 * The budget service: a tracker shared by every run that finds it in context.
 *
 * @since 0.1.0
 * @category services
 */
export class Budget extends Context.Service<Budget, Tracker>()("valet/Budget") {}

const none: ReadonlyArray<Warning> = []

/**
 * The wall-clock limit of `limits` in milliseconds (`maxDuration`, or the deprecated `maxDurationMs`).
 *
 * @since 0.2.0
 * @category utils
 */
export const durationMsOf = (limits: Limits): number | undefined =>
  limits.maxDuration !== undefined ? Duration.toMillis(limits.maxDuration as Duration.Input) : limits.maxDurationMs

let saidDurationMs = false

/**
 * Starts a tracker for `limits`; the wall clock starts now.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (limits: Limits): Effect.Effect<Tracker, InvalidOptions> =>
  Effect.gen(function*() {
    const valid = yield* Decode.decode("Budget", Limits, limits)
    if (valid.maxDurationMs !== undefined && !saidDurationMs) {
      saidDurationMs = true
      yield* Effect.logWarning("Budget: the limit maxDurationMs is deprecated, use maxDuration (valet 0.x reads both)")
    }
    const startedAt = yield* Clock.currentTimeMillis
    return makeTracker(valid, startedAt)
  })

/**
 * A tracker with no limits. Its reservations change nothing, so callers may skip them (`generate` does).
 *
 * @since 0.1.0
 * @category constructors
 */
export const unlimited: Tracker = {
  limits: {},
  deadline: undefined,
  reserve: (request) => Effect.succeed({ request, warnings: none, settle: () => none, release: () => {} }),
  spent: Effect.succeed({
    calls: 0,
    inputTokens: 0,
    outputTokens: 0,
    totalTokens: 0,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    cost: 0,
    elapsedMs: 0
  })
}

/**
 * A `Budget` layer: every run that finds it in context shares this one tracker.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (limits: Limits): Layer.Layer<Budget, InvalidOptions> => Layer.effect(Budget, make(limits))

/**
 * The default output reservation of a request without `maxTokens`, per choice.
 *
 * @since 0.2.0
 * @category constants
 */
export const defaultReserveOutputTokens = 4_096

/**
 * The estimated input tokens of one image part: 765, what OpenAI counts for a 1024×1024 image at high detail (85
 * base + 170 per 512-pixel tile, 4 tiles). Smaller images cost less, larger ones are scaled down to about this.
 *
 * @since 0.2.0
 * @category constants
 */
export const estimatedImageTokens = 765

/**
 * The estimated input tokens per kilobyte of a file or audio part's bytes: 64 (a PDF's text layer is about a
 * token per 16 bytes; audio is priced per second, and a second of 16 kHz speech is a few kilobytes). A coarse figure
 * on purpose: it errs on the large side, which only makes a reservation larger.
 *
 * @since 0.2.0
 * @category constants
 */
export const estimatedTokensPerKilobyte = 64

/**
 * The estimated input tokens of one part that is not text: `estimatedImageTokens` for an image (or a file by URL,
 * whose size is unknown), `estimatedTokensPerKilobyte` of a file's or audio's bytes. The one estimate of media:
 * budgets and compaction both count with it. A text part is its text's tokens (see `estimateInputTokens`).
 *
 * @since 0.2.0
 * @category utils
 */
export const estimatedPartTokens = (part: Model.Part): number => {
  if (part.type === "text") return estimateInputTokens({ prompt: part.text })
  if (part.type === "image" || part.data === undefined) return estimatedImageTokens
  return Math.ceil((base64Bytes(part.data) / 1024) * estimatedTokensPerKilobyte)
}

/**
 * An estimate of a request's input tokens, made before it is sent: a token per 4 ASCII characters and one per
 * other character (CJK text is about one token per character; accented Latin text is over-estimated, which only
 * makes a reservation larger), plus 4 per message for the chat template, over the messages, the prompt and the
 * tool definitions. A message's parts (a user's content, a tool result's `parts`) count as their text, and the
 * rest as `estimatedPartTokens` says: `estimatedImageTokens` per image, `estimatedTokensPerKilobyte` of a file's or
 * audio's bytes (a file by URL counts as an image).
 *
 * @since 0.2.0
 * @category utils
 */
export const estimateInputTokens = (request: Model.Request): number => {
  let ascii = 0
  let other = 0
  const count = (text: string) => {
    for (let i = 0; i < text.length; i++) {
      if (text.charCodeAt(i) < 128) ascii++
      else other++
    }
  }
  let overhead = 0
  if (request.prompt !== undefined) count(request.prompt)
  for (const message of request.messages ?? []) {
    overhead += 4
    const content = message.content
    if (typeof content === "string") count(content)
    else {
      for (const part of content) {
        if (part.type === "text") count(part.text)
        else overhead += estimatedPartTokens(part)
      }
    }
    if (message.role === "tool" && message.parts !== undefined) {
      for (const part of message.parts) {
        if (part.type === "text") count(part.text)
        else overhead += estimatedPartTokens(part)
      }
    }
    if (message.role === "assistant" && message.toolCalls !== undefined) count(JSON.stringify(message.toolCalls))
  }
  if (request.tools !== undefined) count(JSON.stringify(request.tools))
  return Math.ceil(ascii / 4) + other + overhead
}

const makeTracker = (limits: Limits, startedAt: number): Tracker => {
  const warnAt = limits.warnAt ?? 0.8
  const durationMs = durationMsOf(limits)
  const deadline = durationMs !== undefined ? startedAt + durationMs : undefined
  const reserveOutput = limits.reserveOutputTokens ?? defaultReserveOutputTokens
  const inputPrice = (limits.pricing?.inputPerMillion ?? 0) / 1_000_000
  const outputPrice = (limits.pricing?.outputPerMillion ?? 0) / 1_000_000
  const limitsTokens = limits.maxInputTokens !== undefined || limits.maxOutputTokens !== undefined ||
    limits.maxTotalTokens !== undefined || limits.maxCost !== undefined
  // Plain counters: JavaScript runs one fiber step at a time, so a check-and-reserve inside one synchronous step
  // is atomic. That is what makes 50 concurrent reservations under maxCalls: 7 take exactly 7 slots.
  let calls = 0
  let inputTokens = 0
  let outputTokens = 0
  let totalTokens = 0
  let cachedInputTokens = 0
  let cacheWriteTokens = 0
  let cost = 0
  // What calls in flight hold.
  let inFlight = 0
  let heldInput = 0
  let heldOutput = 0
  let heldCost = 0
  // Callers waiting for a call in flight to give back what it did not use.
  let waiters: Array<Deferred.Deferred<void>> = []
  const warned = new Set<Limit>()

  const wake = () => {
    if (waiters.length === 0) return
    const woken = waiters
    waiters = []
    for (const waiter of woken) Deferred.doneUnsafe(waiter, Effect.void)
  }

  const warnIfCrossed = (out: Array<Warning> | undefined, limit: Limit, used: number, max: number | undefined) => {
    if (max === undefined || max === 0 || warned.has(limit) || used < warnAt * max) return out
    warned.add(limit)
    const list = out ?? []
    list.push({ limit, used, max })
    return list
  }

  const refusal = (limit: Limit, used: number, max: number) => new BudgetExhausted({ limit, used, max })

  /** A reservation, or the limit in the way (`wait` when calls in flight may free what is missing). */
  const tryReserve = (
    request: Model.Request,
    now: number
  ): Reservation | { readonly refused: BudgetExhausted; readonly wait: boolean } => {
    if (limits.maxCalls !== undefined && calls >= limits.maxCalls) {
      return { refused: refusal("max_calls", calls, limits.maxCalls), wait: false }
    }
    if (deadline !== undefined && now >= deadline) {
      return { refused: refusal("wall_clock", now - startedAt, durationMs!), wait: false }
    }
    let input = 0
    let output = 0
    let callCost = 0
    let sent = request
    if (limitsTokens) {
      const wait = inFlight > 0
      input = estimateInputTokens(request)
      if (limits.maxInputTokens !== undefined && inputTokens + heldInput + input > limits.maxInputTokens) {
        return { refused: refusal("max_input_tokens", inputTokens + heldInput, limits.maxInputTokens), wait }
      }
      const choices = request.n ?? 1
      const wanted = request.maxTokens ?? reserveOutput
      // Output tokens left under each limit, after this call's input.
      let left = wanted * choices
      let tightest: Limit | undefined
      const bound = (limit: Limit, room: number) => {
        if (room < left) {
          left = room
          tightest = limit
        }
      }
      if (limits.maxOutputTokens !== undefined) {
        bound("max_output_tokens", limits.maxOutputTokens - outputTokens - heldOutput)
      }
      if (limits.maxTotalTokens !== undefined) {
        bound("max_total_tokens", limits.maxTotalTokens - totalTokens - heldInput - heldOutput - input)
      }
      if (limits.maxCost !== undefined) {
        const room = limits.maxCost - cost - heldCost - input * inputPrice
        bound("max_cost", room < 0 ? -1 : outputPrice > 0 ? Math.floor(room / outputPrice + 1e-9) : Infinity)
      }
      const perChoice = Math.floor(left / choices)
      if (perChoice < 1) {
        const limit = tightest ?? "max_output_tokens"
        const [used, max] = limit === "max_cost"
          ? [cost + heldCost, limits.maxCost!]
          : limit === "max_total_tokens"
          ? [totalTokens + heldInput + heldOutput, limits.maxTotalTokens!]
          : [outputTokens + heldOutput, limits.maxOutputTokens!]
        return { refused: refusal(limit, used, max), wait }
      }
      if (perChoice < wanted) sent = { ...request, maxTokens: perChoice }
      output = perChoice * choices
      callCost = input * inputPrice + output * outputPrice
      inFlight++
      heldInput += input
      heldOutput += output
      heldCost += callCost
    }
    calls++
    let warnings = warnIfCrossed(undefined, "max_calls", calls, limits.maxCalls)
    if (deadline !== undefined) warnings = warnIfCrossed(warnings, "wall_clock", now - startedAt, durationMs)

    let open = limitsTokens
    const giveBack = () => {
      open = false
      inFlight--
      heldInput -= input
      heldOutput -= output
      heldCost -= callCost
    }
    return {
      request: sent,
      warnings: warnings ?? none,
      settle: (usage) => {
        if (open) giveBack()
        inputTokens += usage.inputTokens
        outputTokens += usage.outputTokens
        totalTokens += usage.totalTokens
        cachedInputTokens += usage.cachedInputTokens ?? 0
        cacheWriteTokens += usage.cacheWriteTokens ?? 0
        if (limits.pricing !== undefined) cost += costOf(limits.pricing, usage)
        wake()
        let out = warnIfCrossed(undefined, "max_input_tokens", inputTokens, limits.maxInputTokens)
        out = warnIfCrossed(out, "max_output_tokens", outputTokens, limits.maxOutputTokens)
        out = warnIfCrossed(out, "max_total_tokens", totalTokens, limits.maxTotalTokens)
        out = warnIfCrossed(out, "max_cost", cost, limits.maxCost)
        return out ?? none
      },
      release: () => {
        if (!open) return
        giveBack()
        wake()
      }
    }
  }

  const reserve = (request: Model.Request): Effect.Effect<Reservation, BudgetExhausted> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const outcome = tryReserve(request, now)
      if (!("refused" in outcome)) return Effect.succeed(outcome)
      if (!outcome.wait) return Effect.fail(outcome.refused)
      // Only calls in flight hold what this one needs: try again when one of them settles.
      return Effect.flatMap(Deferred.make<void>(), (settled) => {
        waiters.push(settled)
        return Effect.andThen(Deferred.await(settled), Effect.suspend(() => reserve(request)))
      })
    })

  const spent = Effect.map(Clock.currentTimeMillis, (now): Spent => ({
    calls,
    inputTokens,
    outputTokens,
    totalTokens,
    cachedInputTokens,
    cacheWriteTokens,
    cost,
    elapsedMs: now - startedAt
  }))

  return { limits, deadline, reserve, spent }
}

/**
 * Context that never overflows (DESIGN §14): before every model call of every architecture, the runtime checks the
 * request's estimated input against its model's context window (`Model.Service.contextWindow`, else the policy's
 * `contextWindow`, else `assumedContextWindow`); above `threshold` of it, the policy's strategy compacts the messages. The default strategy
 * first cuts old tool results down to `maxToolResultChars`, then, if that is not enough, summarises the oldest
 * messages with a model call (step `context.compact_<n>`, counted in the budget and silent: no events of its own, no
 * text streamed), keeping the system messages, the task (the last user message and what followed it) and the last
 * `keepLastMessages` whole, and never splitting a tool exchange; as a last resort it cuts the kept tool results too.
 * The tool definitions sent with the call take their part of the window: the messages come down to what they leave.
 * Each compaction is a `ContextCompacted` event with the tokens before and after. A run remembers its compaction:
 * the next call, which resends the same messages and more, starts from it, and another summary is asked for only once
 * the conversation has grown by `keepLastMessages`. Messages still over a known window (the model's or the policy's)
 * after compaction are a `ContextLengthExceeded` naming the sizes; over the assumed one, they are sent. A server's `ContextLengthExceeded` compacts once more (to half the
 * window) and the call is sent again.
 *
 * Tokens are counted by `effect/ai`'s `Tokenizer` when one is in context (`valet/GptTokenizer` offers one on OpenAI's
 * encodings; any `Tokenizer.make({ tokenize })` works), else estimated (`Budget.estimateInputTokens`, about four
 * characters a token). Either way a call is first checked by its characters alone, which costs a sum of lengths;
 * only a call that may be over is counted, each message once.
 *
 * On a thread (`Agent.run(agent, task, { thread })`), the summary outlives the turn: the thread keeps it beside its
 * messages (`Threads.summary`), and the next turn starts from it and the messages after it, so a long conversation
 * pays a summary once every few turns rather than on every turn past the threshold.
 *
 * The policy is a `Context.Reference`: `Compaction.layer({ … })` changes it for what it is provided to; a strategy is
 * any function from messages to messages (swap it, or wrap the default).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, Compaction, ScriptedModel } from "valet"
 *
 * const agent = Agent.make({ name: "assistant", instructions: "Be brief." })
 *
 * // A small window for a small model: compaction starts at 80 % of 4,096 tokens, keeping the last 6 messages whole.
 * const program = Agent.run(agent, "Hello").pipe(
 *   Effect.provide(Compaction.layer({ contextWindow: 4096, keepLastMessages: 6 })),
 *   Effect.provide(ScriptedModel.layer(["Hi!"]))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Context, Effect, Layer } from "effect"
import { type BudgetExhausted, InvalidOptions } from "./AgentError.js"
import { describePart, type Message, textOf } from "./internal/modelSchema.js"
import type { ModelError } from "./ModelError.js"

/**
 * What a strategy is given: the messages of the request, how many tokens they must come down to, and a way to
 * summarise some of them with a model call (counted in the budget, its own step).
 *
 * @since 0.2.0
 * @category models
 */
export interface StrategyInput {
  readonly messages: ReadonlyArray<Message>
  /**
   * The tokens the messages should come down to (as `measure` counts them): the threshold's share of the window less
   * the request's tool definitions, which go with every call and are not compacted.
   */
  readonly target: number
  readonly policy: Policy
  /**
   * The tokens of messages: by the `Tokenizer` of `effect/ai` when one is in context, else estimated with
   * `Budget.estimateInputTokens`.
   */
  readonly measure: (messages: ReadonlyArray<Message>) => Effect.Effect<number>
  readonly summarize: (messages: ReadonlyArray<Message>) => Effect.Effect<string, ModelError | BudgetExhausted>
  /**
   * Whether a summary may be asked for now: false when the run summarised and the conversation has not grown by
   * `keepLastMessages` since (a strategy then does what it can without a model call).
   */
  readonly mayCallModel: boolean
}

/**
 * A strategy's answer: the messages to send, and a word naming what it did (`tool_results`, `summary`).
 *
 * @since 0.2.0
 * @category models
 */
export interface StrategyOutput {
  readonly messages: ReadonlyArray<Message>
  readonly strategy: string
}

/**
 * A compaction strategy.
 *
 * @since 0.2.0
 * @category models
 */
export type Strategy = (input: StrategyInput) => Effect.Effect<StrategyOutput, ModelError | BudgetExhausted>

/**
 * The compaction policy.
 *
 * @since 0.2.0
 * @category models
 */
export interface Policy {
  /**
   * The window of a model that does not say its own (`Model.Service.contextWindow`), in tokens. Unset (the
   * default), compaction measures against `assumedContextWindow` but never refuses a call on its own estimate:
   * the server, which knows its window, decides.
   */
  readonly contextWindow?: number | undefined
  /** Compact when a call's estimated input exceeds this share of the window (default 0.8). */
  readonly threshold: number
  /** The last messages kept whole (default 8; moved back so that no tool exchange is split). */
  readonly keepLastMessages: number
  /** Older tool results longer than this are cut to it (default 2,000 characters). */
  readonly maxToolResultChars: number
  /** The instructions of the summarising call. */
  readonly summaryInstructions: string
  readonly strategy: Strategy
  /** Off: no check before calls (a server's `ContextLengthExceeded` then fails the run). */
  readonly enabled: boolean
}

/**
 * The index where the kept tail starts: `keep` messages from the end, moved back so that it does not start with a
 * tool result (which belongs with the assistant message that asked for it).
 *
 * @since 0.2.0
 * @category strategies
 */
export const tailStart = (messages: ReadonlyArray<Message>, keep: number): number => {
  let start = Math.max(0, messages.length - Math.max(1, keep))
  // A tool result belongs with the assistant message that asked for it: start before them.
  while (start > 0 && start < messages.length && messages[start]!.role === "tool") start--
  return start
}

/**
 * The task: the last user message that is not a summary. It is never summarised (the model must see what it is
 * doing), wherever it is.
 *
 * @since 0.2.0
 * @category strategies
 */
export const taskIndex = (messages: ReadonlyArray<Message>): number => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i]!
    if (message.role === "user" && !textOf(message.content).startsWith(summaryPrefix)) return i
  }
  return -1
}

/**
 * Where the head ends: the leading system messages, never compacted. (The task, the last user message, is kept too:
 * see `taskIndex`.)
 *
 * @since 0.2.0
 * @category strategies
 */
export const headEnd = (messages: ReadonlyArray<Message>): number => {
  let end = 0
  while (end < messages.length && messages[end]!.role === "system") end++
  return end
}

/**
 * How the default strategy's summary message starts (`[Summary of 12 earlier messages]`): the task is the last user
 * message that does not.
 *
 * @since 0.2.0
 * @category strategies
 */
export const summaryPrefix = "[Summary of "

/**
 * The default strategy: cut old tool results (long texts cut, images and other parts dropped and named), then
 * summarise the oldest messages between the head (system messages, the task) and the kept tail into one message.
 *
 * @since 0.2.0
 * @category strategies
 */
export const defaultStrategy: Strategy = (input) =>
  Effect.gen(function*() {
    const { messages, policy, target } = input
    const head = headEnd(messages)
    const tail = Math.max(head, tailStart(messages, policy.keepLastMessages))
    const cutBefore = (messages: ReadonlyArray<Message>, end: number) =>
      messages.map((message, i): Message => {
        if (i < head || i >= end || message.role !== "tool") return message
        const long = message.content.length > policy.maxToolResultChars
        // An old result's images are the heaviest thing in it (a screenshot a step): dropped, named in its text.
        if (message.parts === undefined && !long) return message
        const content = long
          ? `${message.content.slice(0, policy.maxToolResultChars)}\n[… ${message.content.length - policy.maxToolResultChars} characters cut]`
          : message.content
        if (message.parts === undefined) return { ...message, content }
        const dropped = message.parts.map((part) => `${describePart(part)} (dropped by compaction)`).join("\n")
        return { role: "tool", toolCallId: message.toolCallId, name: message.name, content: `${content}\n${dropped}` }
      })
    // Old tool results first; then the oldest messages summarised; last, the kept tail's tool results too.
    const cut = cutBefore(messages, tail)
    if ((yield* input.measure(cut)) <= target) return { messages: cut, strategy: "tool_results" }
    let out = cut
    let strategy = "tool_results"
    // The task stays where the model reads it, before the summary of what came before it and after it.
    const task = taskIndex(cut)
    const pinned = task >= head && task < tail
    const middle = cut.slice(head, tail).filter((_, i) => !pinned || head + i !== task)
    if (input.mayCallModel && middle.length > 1) {
      const summary = yield* input.summarize(middle)
      const summarized: Message = { role: "user", content: `${summaryPrefix}${middle.length} earlier messages]\n${summary}` }
      out = [...cut.slice(0, head), ...(pinned ? [cut[task]!] : []), summarized, ...cut.slice(tail)]
      strategy = "summary"
      if ((yield* input.measure(out)) <= target) return { messages: out, strategy }
    }
    return { messages: cutBefore(out, out.length), strategy }
  })

/**
 * The window compaction measures against when neither the model nor the policy says one: 128,000 tokens.
 *
 * @since 0.2.0
 * @category constants
 */
export const assumedContextWindow = 128_000

/**
 * The default policy.
 *
 * @since 0.2.0
 * @category constants
 */
export const defaultPolicy: Policy = {
  threshold: 0.8,
  keepLastMessages: 8,
  maxToolResultChars: 2_000,
  summaryInstructions:
    "Summarise the conversation below for yourself, to go on with it later: the facts, decisions, tool results and " +
    "open questions that matter, in a few short paragraphs. Write only the summary.",
  strategy: defaultStrategy,
  enabled: true
}

/**
 * The policy in context (`defaultPolicy` unless a `layer` says otherwise).
 *
 * @since 0.2.0
 * @category services
 */
export const CurrentPolicy = Context.Reference<Policy>("valet/Compaction/CurrentPolicy", { defaultValue: () => defaultPolicy })

/**
 * The policy with some settings changed, for what the layer is provided to; a setting out of range is
 * `InvalidOptions` naming it.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (policy: Partial<Policy>): Layer.Layer<never, InvalidOptions> => {
  const problem = policyProblem({ ...defaultPolicy, ...policy })
  return problem === undefined
    ? Layer.succeed(CurrentPolicy, { ...defaultPolicy, ...policy })
    : Layer.effectDiscard(Effect.fail(new InvalidOptions({ module: "Compaction", message: `Compaction: ${problem}` })))
}

const policyProblem = (policy: Policy): string | undefined => {
  if (policy.contextWindow !== undefined && (!Number.isInteger(policy.contextWindow) || policy.contextWindow < 1)) {
    return `contextWindow must be an integer >= 1, got ${policy.contextWindow}`
  }
  if (!(policy.threshold > 0 && policy.threshold <= 1)) return `threshold must be in (0, 1], got ${policy.threshold}`
  if (!Number.isInteger(policy.keepLastMessages) || policy.keepLastMessages < 1) return `keepLastMessages must be an integer >= 1, got ${policy.keepLastMessages}`
  if (!Number.isInteger(policy.maxToolResultChars) || policy.maxToolResultChars < 0) return `maxToolResultChars must be an integer >= 0, got ${policy.maxToolResultChars}`
  return undefined
}

/**
 * Compaction inside the runtime (`Compaction` says the rules): the check before a call, the run's memory of what it
 * compacted (so a call that resends the same messages and more reuses the summary), the summarising call, the
 * tokens counted by a tokenizer when one is in context, and who is told of a root run's compactions (a thread turn,
 * which keeps the summary with the thread).
 */
import { Context, Effect } from "effect"
import type { BudgetExhausted } from "../AgentError.js"
import * as Budget from "../Budget.js"
import * as Compaction from "../Compaction.js"
import type { ModelError } from "../ModelError.js"
import { describePart, type Message, type Request, type Response, textOf } from "./modelSchema.js"

/** What a run compacted: the messages it was sent (`length` of them, by their ends) and what went instead. */
export interface Compacted {
  readonly length: number
  readonly first: Message
  readonly last: Message
  readonly replacement: ReadonlyArray<Message>
  /** Whether the replacement holds a summary (another is asked for only once the conversation has grown). */
  readonly summarized: boolean
  /** How many compactions the run made, this one included (the summary calls' step numbers). */
  readonly count: number
}

/** Whether a message is a compaction's summary. */
export const isSummary = (message: Message): boolean => message.role === "user" && typeof message.content === "string" &&
  message.content.startsWith(Compaction.summaryPrefix)

/**
 * The estimated tokens of a message's parts that are not text (its content's and a tool result's), by
 * `Budget.estimatedPartTokens`, the budget's own estimate of media: 0 for text content, the common case.
 */
const mediaTokens = (message: Message): number => {
  let tokens = 0
  const content = message.content
  if (typeof content !== "string") {
    for (const part of content) if (part.type !== "text") tokens += Budget.estimatedPartTokens(part)
  }
  if (message.role === "tool" && message.parts !== undefined) {
    for (const part of message.parts) tokens += Budget.estimatedPartTokens(part)
  }
  return tokens
}

/** The characters of a message's text: its content's (a parts list: its text parts'), a tool result's text parts'. */
const textLength = (message: Message): number => {
  const content = message.content
  if (typeof content === "string" && message.role !== "tool") return content.length
  let length = typeof content === "string" ? content.length : 0
  if (typeof content !== "string") for (const part of content) if (part.type === "text") length += part.text.length
  if (message.role === "tool" && message.parts !== undefined) {
    for (const part of message.parts) if (part.type === "text") length += part.text.length
  }
  return length
}

const toolCallsLength = (message: Message): number => {
  if (message.role !== "assistant" || message.toolCalls === undefined) return 0
  let length = 0
  for (const call of message.toolCalls) length += call.arguments.length + call.name.length
  return length
}

/**
 * The messages with the run's compaction put in place of the messages it replaced, when these messages start with
 * those: the same objects (the tool loops resend them), or equal ones. A system message first that changed since
 * (DeepAgent shows its plan there, rewritten when the plan changes) is the current one in the replacement, which
 * kept the head as it was: the compaction still holds. Without this, the first plan update after a summary resent
 * the whole conversation, summarised it all again (a summary request growing with the run), or — within
 * `keepLastMessages` of the summary, when no new one may be asked for — failed the run with `ContextLengthExceeded`.
 */
export const withCompacted = (messages: ReadonlyArray<Message>, entry: Compacted | undefined): ReadonlyArray<Message> => {
  if (entry === undefined || messages.length < entry.length) return messages
  const first = messages[0]!
  // The head is kept whole by compaction (the same object at the replacement's start), so a rewritten system message
  // can take its place; a strategy that rewrote the head does not get that. The rest must be the very messages
  // compacted (the tool loop resends the same objects), not merely equal ones: this is the same conversation.
  const systemRewritten = first !== entry.first && first.role === "system" && entry.first.role === "system" &&
    entry.replacement[0] === entry.first && messages[entry.length - 1] === entry.last
  if ((first !== entry.first && !systemRewritten) || messages[entry.length - 1] !== entry.last) {
    // Not the same objects: equal all the way, or not the conversation compacted.
    if (!systemRewritten && (first.role !== entry.first.role || first.content !== entry.first.content)) return messages
    if (messages[entry.length - 1]!.content !== entry.last.content || toolCallsLength(messages[entry.length - 1]!) !== toolCallsLength(entry.last)) return messages
  }
  const replacement = systemRewritten ? [first, ...entry.replacement.slice(1)] : entry.replacement
  return entry.length === messages.length ? replacement : [...replacement, ...messages.slice(entry.length)]
}

/** The characters of a request's tool definitions, measured once per tools array. */
const toolsChars = new WeakMap<object, number>()
const toolsLength = (request: Request): number => {
  const tools = request.tools
  if (tools === undefined || tools.length === 0) return 0
  let length = toolsChars.get(tools)
  if (length === undefined) {
    length = JSON.stringify(tools).length
    toolsChars.set(tools, length)
  }
  return length
}

/**
 * Whether a request with these messages may not fit under `limit` tokens. Its characters first — contents, tool
 * calls' arguments, tool definitions (an estimate never exceeds one token per character, plus 4 a message): most
 * calls are far under, and this costs a sum of lengths, not a scan.
 */
export const mayExceed = (
  request: Request,
  messages: ReadonlyArray<Message>,
  limit: number,
  cache: { measured: Measured | undefined }
): boolean => charsOf(request, messages, cache) > limit && Budget.estimateInputTokens({ ...request, messages }) > limit

/**
 * `mayExceed` by a tokenizer's count. The characters first too, but three tokens a character: a byte-level BPE never
 * makes more tokens than the text has UTF-8 bytes, and a UTF-16 unit is at most 3 of them; only a request past that
 * is tokenized (each message once: the counts are kept by message).
 */
export const exceedsCounted = (
  request: Request,
  messages: ReadonlyArray<Message>,
  limit: number,
  cache: { measured: Measured | undefined },
  counter: Counter
): Effect.Effect<boolean> =>
  charsOf(request, messages, cache) * 3 <= limit
    ? Effect.succeed(false)
    : Effect.map(Effect.zipWith(counter.messages(messages), counter.tools(request), (a, b) => a + b), (tokens) => tokens > limit)

/** The characters of a request (contents, tool calls, tool definitions, 4 a message), measuring only new messages. */
const charsOf = (
  request: Request,
  messages: ReadonlyArray<Message>,
  cache: { measured: Measured | undefined }
): number => {
  // The tool loops resend the same messages and a few more each call: only the new ones are measured, so a run of
  // n calls costs n measurements, not n² (the first version measured every message on every call: 2× the step).
  const known = cache.measured
  let from = 0
  let chars = 0
  // The first message too: a loop that rewrites its system message each call (DeepAgent's plan) is measured again.
  if (
    known !== undefined && messages.length >= known.length && known.length > 0 && messages[known.length - 1] === known.last &&
    messages[0] === known.first
  ) {
    from = known.length
    chars = known.chars
  }
  for (let i = from; i < messages.length; i++) {
    const message = messages[i]!
    // An image counts its estimated tokens here: a list of parts' `length` is its count of parts, and an image of
    // 765 estimated tokens counted as 1 let a request of images pass this check far over the window.
    chars += (typeof message.content === "string" && message.role !== "tool" ? message.content.length : textLength(message) + mediaTokens(message)) +
      toolCallsLength(message) + 4
  }
  if (messages.length > 0) cache.measured = { length: messages.length, first: messages[0]!, last: messages[messages.length - 1]!, chars }
  return chars + toolsLength(request)
}

/** The characters of a run's messages measured so far, by the last message measured. */
export interface Measured {
  readonly length: number
  readonly first: Message
  readonly last: Message
  readonly chars: number
}

/**
 * The transcript a summarising call reads: text only. An image, a file or audio is named where it was (its kind,
 * media type, size), never sent again: the summary request carries no bytes, so it costs text tokens only, and a
 * summary says that there was a picture, not what it showed.
 */
const transcriptOf = (messages: ReadonlyArray<Message>): string =>
  messages.map((message) => {
    switch (message.role) {
      case "tool": {
        const parts = message.parts === undefined ? "" : `\n${message.parts.map(describePart).join("\n")}`
        return `tool result (${message.name}): ${message.content}${parts}`
      }
      case "assistant": {
        const calls = (message.toolCalls ?? []).map((call) => `${call.name}(${call.arguments})`).join(", ")
        return `assistant: ${message.content}${calls !== "" ? `${message.content !== "" ? "\n" : ""}assistant called: ${calls}` : ""}`
      }
      default:
        return `${message.role}: ${typeof message.content === "string" ? message.content : message.content.map(describePart).join("\n")}`
    }
  }).join("\n\n")

/** The strategy's summarise: one model call on the transcript, through `generate` (budget, events, step). */
export const summarizer = (
  policy: Compaction.Policy,
  generate: (request: Request) => Effect.Effect<Response, ModelError | BudgetExhausted>
) =>
(messages: ReadonlyArray<Message>): Effect.Effect<string, ModelError | BudgetExhausted> =>
  Effect.map(
    generate({ messages: [{ role: "system", content: policy.summaryInstructions }, { role: "user", content: transcriptOf(messages) }] }),
    (response) => response.choices[0]?.text ?? ""
  )

/** The budget's estimate of messages' tokens (no tokenizer in context). */
export const estimate = (messages: ReadonlyArray<Message>): number => Budget.estimateInputTokens({ messages })

// ---------------------------------------------------------------------------------------------------------
// Tokens by a tokenizer
// ---------------------------------------------------------------------------------------------------------

/**
 * What compaction uses of `effect/ai`'s `Tokenizer.Service`: `tokenize` on a text (its input takes strings). Said
 * here rather than imported: nothing the root entry loads imports `effect/ai`, not even its types.
 */
export interface TokenizerService {
  readonly tokenize: (input: string) => Effect.Effect<Array<number>, unknown>
}

/**
 * `effect/ai`'s `Tokenizer`, by its key: a service's key string is its identity in a context, so core finds a
 * tokenizer a user provided without loading `effect/ai` (the root entry never does).
 */
export const Tokenizer = Context.Service<TokenizerService>("effect/ai/Tokenizer")

/** Tokens of messages (and of a request's tool definitions) by a tokenizer; the budget's estimate without one. */
export interface Counter {
  readonly messages: (messages: ReadonlyArray<Message>) => Effect.Effect<number>
  readonly tools: (request: Request) => Effect.Effect<number>
}

const estimating: Counter = {
  messages: (messages) => Effect.succeed(estimate(messages)),
  tools: (request) => Effect.succeed(request.tools === undefined || request.tools.length === 0 ? 0 : Budget.estimateInputTokens({ tools: request.tools }))
}

/**
 * Token counts kept for each tokenizer: by message object (a run's calls resend the same messages), and by text (a
 * thread's next turn loads the same messages again as new objects; counted once, not on every turn). The texts are
 * dropped together once they hold more than `keptChars` characters: memory stays bounded.
 */
interface Counts {
  readonly messages: WeakMap<object, number>
  readonly texts: Map<string, number>
  chars: number
}
const counts = new WeakMap<TokenizerService, Counts>()
const keptChars = 4_000_000

/**
 * The counter of a tokenizer (`undefined`: the budget's estimate). A message is its content's tokens, its tool calls'
 * (as JSON) and 4 for the chat template, as the estimate counts it; a text the tokenizer fails on is estimated.
 */
export const counterOf = (tokenizer: TokenizerService | undefined): Counter => {
  if (tokenizer === undefined) return estimating
  let known = counts.get(tokenizer)
  if (known === undefined) {
    known = { messages: new WeakMap(), texts: new Map(), chars: 0 }
    counts.set(tokenizer, known)
  }
  const cache = known
  const text = (text: string): Effect.Effect<number> => {
    if (text === "") return Effect.succeed(0)
    const cached = cache.texts.get(text)
    if (cached !== undefined) return Effect.succeed(cached)
    return Effect.map(
      Effect.orElseSucceed(Effect.map(tokenizer.tokenize(text), (tokens) => tokens.length), () => Budget.estimateInputTokens({ prompt: text })),
      (tokens) => {
        if (cache.chars + text.length > keptChars) {
          cache.texts.clear()
          cache.chars = 0
        }
        cache.texts.set(text, tokens)
        cache.chars += text.length
        return tokens
      }
    )
  }
  const message = (message: Message): Effect.Effect<number> => {
    const cached = cache.messages.get(message)
    if (cached !== undefined) return Effect.succeed(cached)
    const calls = message.role === "assistant" && message.toolCalls !== undefined ? JSON.stringify(message.toolCalls) : ""
    // A tokenizer counts text; images, files and audio count as the budget estimates them.
    const media = mediaTokens(message)
    return Effect.map(Effect.zipWith(text(textOf(message.content)), text(calls), (a, b) => a + b + 4 + media), (tokens) => {
      cache.messages.set(message, tokens)
      return tokens
    })
  }
  return {
    messages: (messages) =>
      Effect.map(Effect.forEach(messages, message), (each) => {
        let sum = 0
        for (const tokens of each) sum += tokens
        return sum
      }),
    tools: (request) => {
      const tools = request.tools
      if (tools === undefined || tools.length === 0) return Effect.succeed(0)
      const cached = cache.messages.get(tools)
      return cached !== undefined ? Effect.succeed(cached) : Effect.tap(text(JSON.stringify(tools)), (tokens) => Effect.sync(() => cache.messages.set(tools, tokens)))
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Who is told of a root run's compactions
// ---------------------------------------------------------------------------------------------------------

/**
 * Told of each compaction of a root run: the messages of the call (all of them, as the architecture sent them) and
 * what the run sends instead. A thread turn listens, to keep the summary with the thread.
 */
export type Observer = (original: ReadonlyArray<Message>, replacement: ReadonlyArray<Message>) => void

/** The observer in context (none by default). */
export const CurrentObserver = Context.Reference<Observer | undefined>("valet/Compaction/CurrentObserver", { defaultValue: () => undefined })

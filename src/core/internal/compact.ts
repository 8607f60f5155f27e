/**
 * Compaction inside the runtime (`Compaction` says the rules): the check before a call, the run's memory of what it
 * compacted (so a call that resends the same messages and more reuses the summary), and the summarising call.
 */
import { Effect } from "effect"
import type { BudgetExhausted } from "../AgentError.js"
import * as Budget from "../Budget.js"
import type * as Compaction from "../Compaction.js"
import type { ModelError } from "../ModelError.js"
import type { Message, Request, Response } from "./modelSchema.js"

/** What a run compacted: the messages it was sent (`length` of them, by their ends) and what went instead. */
export interface Compacted {
  readonly length: number
  readonly first: Message
  readonly last: Message
  readonly replacement: ReadonlyArray<Message>
}

const same = (a: Message, b: Message): boolean => a === b || (a.role === b.role && a.content === b.content)

/** The messages with the run's latest compaction that they start with put in its place. */
export const withCompacted = (messages: ReadonlyArray<Message>, done: ReadonlyArray<Compacted> | undefined): ReadonlyArray<Message> => {
  if (done === undefined) return messages
  for (let i = done.length - 1; i >= 0; i--) {
    const entry = done[i]!
    if (messages.length >= entry.length && same(messages[0]!, entry.first) && same(messages[entry.length - 1]!, entry.last)) {
      return entry.length === messages.length ? entry.replacement : [...entry.replacement, ...messages.slice(entry.length)]
    }
  }
  return messages
}

/**
 * Whether the messages may not fit under `limit` tokens. Their characters first (an estimate never exceeds one
 * token per character, plus 4 a message): most calls are far under, and this costs a sum of lengths, not a scan.
 */
export const mayExceed = (messages: ReadonlyArray<Message>, limit: number): boolean => {
  let chars = 0
  for (const message of messages) chars += message.content.length + 4
  return chars > limit && Budget.estimateInputTokens({ messages }) > limit
}

/** The transcript a summarising call reads. */
const transcriptOf = (messages: ReadonlyArray<Message>): string =>
  messages.map((message) => {
    switch (message.role) {
      case "tool":
        return `tool result (${message.name}): ${message.content}`
      case "assistant": {
        const calls = (message.toolCalls ?? []).map((call) => `${call.name}(${call.arguments})`).join(", ")
        return `assistant: ${message.content}${calls !== "" ? `${message.content !== "" ? "\n" : ""}assistant called: ${calls}` : ""}`
      }
      default:
        return `${message.role}: ${message.content}`
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

export const estimate = (messages: ReadonlyArray<Message>): number => Budget.estimateInputTokens({ messages })

/**
 * A thread's summary across turns (`Threads`, `Compaction`): what a turn loads when the thread keeps a summary (the
 * summary, then only the messages after it), and which of the run's compactions is kept for the next turn — the
 * latest whose summary stands for the thread's own messages, from the first the turn was given up to some index, and
 * for nothing else (not the turn's task, not its tool loop, not messages the caller added).
 *
 * The run's messages are mapped back to the thread by identity: the history given to the run is the same message
 * objects the architecture sends (`Architecture.conversation`), and the compaction keeps the head (system messages:
 * instructions, working memory) and the task as the same objects too. A compaction that cannot be mapped so is not
 * kept: the next turn then summarises again, as it did before summaries were kept; a thread message is never lost.
 */
import { Effect } from "effect"
import * as Compact from "../compact.js"
import { type Message, textOf } from "../modelSchema.js"
import type { Lease, Service, Summary, ThreadError } from "./model.js"

/** What a turn loaded, and how it keeps the summary its run makes. */
export interface Loaded {
  /** The summary as a message (when the thread keeps one), then the page of messages after it. */
  readonly messages: ReadonlyArray<Message>
  /**
   * The thread index of the first message of the page given (the page's start, or after the summary's end): the
   * messages before it reach the model only through the summary, if at all.
   */
  readonly start: number
  /** The thread's message count when it was read (under the turn's lease: where the turn's messages will go). */
  readonly total: number
  /**
   * The observer of the run's compactions, given the thread's messages as the run receives them (`messages`, cut to
   * the first user message): it keeps the latest summary that stands for the first of them up to some index.
   */
  readonly observer: (given: ReadonlyArray<Message>) => Compact.Observer
  /** Writes the summary kept, if the run made one standing for more than the loaded one, while the lease holds. */
  readonly save: (lease: Lease) => Effect.Effect<void>
}

/**
 * Loads the thread's summary and the page after it: the last `limit` messages, from the summary's end when it is
 * within them. (A page that starts after it — more than `limit` messages since — follows the summary from its first
 * user message: the messages in between were never in a turn's view, with or without a summary.)
 */
export const load = (threads: Service, threadId: string, owner: string | undefined, limit: number): Effect.Effect<Loaded, ThreadError> =>
  Effect.gen(function*() {
    const summary = yield* threads.summary(threadId, { owner })
    const page = yield* threads.messages(threadId, { owner, limit })
    let messages: ReadonlyArray<Message> = page.messages
    // The thread index just after each message: a summary stands for [0, through).
    let ends = page.messages.map((_, i) => page.start + i + 1)
    let made: Message | undefined
    let start = page.start
    if (summary !== undefined && summary.through <= page.total) {
      made = { role: "user", content: summary.content }
      let from = Math.max(page.start, summary.through)
      let rest = page.messages.slice(from - page.start)
      // After the summary, the page starts where a compaction's kept tail began (never a tool result), or — when it
      // starts after the summary's end — at its first user message: never inside a tool exchange.
      const first = from > summary.through
        ? rest.findIndex((message) => message.role === "user")
        : rest.findIndex((message) => message.role !== "tool")
      rest = first === -1 ? [] : rest.slice(first)
      from += first === -1 ? 0 : first
      messages = [made, ...rest]
      ends = [summary.through, ...rest.map((_, i) => from + i + 1)]
      start = from
    }
    const loadedThrough = made !== undefined && summary !== undefined ? summary.through : 0
    let latest: Summary | undefined
    return {
      messages,
      start,
      total: page.total,
      observer: (given) => {
        // The given messages are a run of these (cut to the first user message): where they start.
        const offset = given.length === 0 ? -1 : messages.indexOf(given[0]!)
        return (original, replacement) => {
          if (offset === -1) return
          const kept = keptOf(messages, ends, offset, made, original, replacement)
          if (kept !== undefined && kept.through > loadedThrough && kept.through > (latest?.through ?? 0)) latest = kept
        }
      },
      save: (lease) =>
        Effect.suspend(() =>
          latest === undefined
            ? Effect.void
            : threads.writeSummary(threadId, latest, { owner, lease }).pipe(
              // Not kept, the summary costs the next turn a summary call, never a message: the turn goes on.
              Effect.catch((error) => Effect.logWarning(`Threads: the summary of thread ${JSON.stringify(threadId)} was not kept: ${error.message}`))
            )
        )
    }
  })

/**
 * The summary a compaction made, as the thread keeps it, when it stands for the first thread messages the run was
 * given up to some index and for nothing else; `undefined` otherwise.
 */
const keptOf = (
  loaded: ReadonlyArray<Message>,
  ends: ReadonlyArray<number>,
  offset: number,
  loadedSummary: Message | undefined,
  original: ReadonlyArray<Message>,
  replacement: ReadonlyArray<Message>
): Summary | undefined => {
  let at = -1
  for (let i = 0; i < replacement.length; i++) {
    if (!Compact.isSummary(replacement[i]!)) continue
    // Two summaries: not a compaction this knows how to read.
    if (at !== -1) return undefined
    at = i
  }
  // No summary, or the loaded one kept as it was: nothing new.
  if (at === -1 || replacement[at] === loadedSummary) return undefined
  // What follows the summary is the original's last messages, one for one (tool results maybe cut).
  const after = replacement.length - at - 1
  const end = original.length - after
  if (end <= 0) return undefined
  for (let k = 0; k < after; k++) if (replacement[at + 1 + k]!.role !== original[end + k]!.role) return undefined
  // Before it, what was kept whole (system messages, the task); the rest of the original up to `end` it stands for.
  const kept = new Set(replacement.slice(0, at))
  let covered = 0
  for (let i = 0; i < end; i++) {
    const message = original[i]!
    if (kept.has(message)) continue
    if (offset + covered >= loaded.length || message !== loaded[offset + covered]) return undefined
    covered++
  }
  return covered === 0 ? undefined : { content: textOf(replacement[at]!.content), through: ends[offset + covered - 1]! }
}

/**
 * Semantic recall on a turn: before the run, the task is embedded and the owner's past messages nearest it — not
 * those already in the history page the run is given — are shown to the model as one system message; after the
 * turn's messages are appended, its user and assistant texts are embedded and their vectors stored.
 *
 * When the vectors are written: right after the append, in a write of their own, not in the append's. The append is
 * the turn's commit (durable, exactly once, under the lease); putting an embedding call (a network round trip that
 * may be slow or fail) in front of it would widen the window in which a crash or an interruption loses the whole
 * turn, and the turn's messages matter more than their vectors. A message without a vector is only not recallable.
 *
 * What an embedding failure does (`onError`): `"skip"` (the default) logs a warning and goes on — the turn runs
 * without recalled messages when the task could not be embedded, and its messages are kept without vectors when they
 * could not be; `"fail"` fails the turn with the `ModelError` (before the run: nothing is appended; after it: the
 * messages are appended first, then the error says their vectors are missing). A store failure (a damaged vector
 * row) fails the turn either way, like any other store failure. Tool results are not embedded: they are the tools'
 * words, often long and machine-shaped, and a recalled result without the call that asked for it misleads more than
 * it helps; the assistant's answer that used them is embedded.
 */
import { Effect, Option } from "effect"
import * as EmbeddingModel from "../../EmbeddingModel.js"
import type { ModelError } from "../../ModelError.js"
import { type Message, textOf } from "../modelSchema.js"
import { type Recalled, type Service, type ThreadError, ThreadStoreError } from "./model.js"

/** Semantic recall on a turn. */
export interface RecallOptions {
  /** The model that embeds the task and the turn's messages; default: the `EmbeddingModel` in context. */
  readonly embedding?: EmbeddingModel.Service | undefined
  /** How many past messages are shown at most (default 5, at most 100). */
  readonly topK?: number | undefined
  /** Messages less similar than this (cosine similarity, in [-1, 1]) are not shown (default: no threshold). */
  readonly minScore?: number | undefined
  /** Whose messages are searched: all the owner's threads (`"owner"`, the default) or this thread only (`"thread"`). */
  readonly scope?: "owner" | "thread" | undefined
  /** What an embedding failure does: `"skip"` (the default: logged, the turn goes on) or `"fail"` (the turn fails). */
  readonly onError?: "skip" | "fail" | undefined
}

/** The characters of one recalled message shown at most. */
const maxShown = 2_000

/** The system message that shows recalled messages, best first. */
export const messageOf = (recalled: ReadonlyArray<Recalled>): Message => ({
  role: "system",
  content: [
    "Messages from earlier conversations that may be relevant (most relevant first):",
    ...recalled.map(({ message, threadId }) => {
      const text = message.content.length > maxShown ? `${message.content.slice(0, maxShown)}…` : message.content
      return `[${message.role}, thread ${threadId}] ${text}`
    })
  ].join("\n")
})

/** The model recall embeds with: the one given, else the one in context, else a `ThreadStoreError` saying so. */
const modelOf = (options: RecallOptions, threadId: string): Effect.Effect<EmbeddingModel.Service, ThreadStoreError> =>
  options.embedding !== undefined
    ? Effect.succeed(options.embedding)
    : Effect.flatMap(Effect.serviceOption(EmbeddingModel.EmbeddingModel), (found) =>
      Option.isSome(found)
        ? Effect.succeed(found.value)
        : Effect.fail(new ThreadStoreError({
          operation: "turn",
          threadId,
          message: "Threads: recall needs an EmbeddingModel: provide one (OpenAiCompatible.layerEmbeddingModel, EffectAi.fromEmbeddingModel, HashedEmbeddingModel.layer) or set recall.embedding"
        })))

/** An embedding call, with the failure handled as `onError` says (`undefined` when skipped). */
const embedOrSkip = <A>(
  options: RecallOptions,
  what: string,
  call: Effect.Effect<A, ModelError>
): Effect.Effect<A | undefined, ModelError> =>
  options.onError === "fail"
    ? call
    : Effect.catch(call, (error) => Effect.as(Effect.logWarning(`Threads: recall could not embed ${what}: ${error.message} (${error._tag}); the turn goes on`), undefined))

/** What recall gives a turn: the message to show (if any), and how to store the turn's vectors after the append. */
export interface Prepared {
  readonly shown: ReadonlyArray<Message>
  readonly store: (threadId: string, owner: string | undefined, firstIndex: number, messages: ReadonlyArray<Message>) => Effect.Effect<void, ThreadError | ModelError>
}

/** Whether two contents are the same: text by value, parts (read back from a store: other objects) by their JSON. */
const sameContent = (a: Message["content"], b: Message["content"]): boolean =>
  typeof a === "string" || typeof b === "string" ? a === b : JSON.stringify(a) === JSON.stringify(b)

/** Before the run: the recalled messages of the owner nearest the task, leaving out the page from `pageStart` on. */
export const prepare = (
  threads: Service,
  options: RecallOptions,
  turn: { readonly threadId: string; readonly owner: string; readonly task: string; readonly pageStart: number }
): Effect.Effect<Prepared, ThreadError | ModelError> =>
  Effect.gen(function*() {
    const model = yield* modelOf(options, turn.threadId)
    const embedded = yield* embedOrSkip(options, "the task", model.embed([turn.task]))
    const recalled = embedded === undefined || embedded[0] === undefined ? [] : yield* threads.recall({
      owner: turn.owner,
      model: model.model,
      vector: embedded[0],
      topK: options.topK ?? 5,
      minScore: options.minScore,
      ...(options.scope === "thread" ? { threadId: turn.threadId } : {}),
      exclude: { threadId: turn.threadId, start: turn.pageStart }
    })
    return {
      shown: recalled.length === 0 ? [] : [messageOf(recalled)],
      store: (threadId, owner, firstIndex, messages) =>
        Effect.gen(function*() {
          const kept = messages
            .map((message, i) => ({ message, index: firstIndex + i }))
            .filter(({ message }) => (message.role === "user" || message.role === "assistant") && textOf(message.content).trim() !== "")
          if (kept.length === 0) return
          // Where the turn's messages are: the end of the thread its append answered — unless that append was
          // answered by an earlier one of the same turn key (a durable turn resumed), whose messages may lie before
          // other turns' since. Read back, the messages there must be the turn's: a vector is never stored on
          // another message (the turn's then stay without vectors, only not recallable).
          const last = kept.at(-1)!.index + 1
          const page = yield* threads.messages(threadId, { owner, before: last, limit: Math.min(last - kept[0]!.index, 1000) })
          const there = (index: number) => page.messages[index - page.start]
          if (kept.some(({ index, message }) => index >= page.start && (there(index)?.role !== message.role || !sameContent(there(index)!.content, message.content)))) {
            return yield* Effect.logWarning(`Threads: the turn's messages are not at the end of thread ${JSON.stringify(threadId)} (its append was answered by an earlier one of its turn key): their vectors are not stored`)
          }
          const vectors = yield* embedOrSkip(options, `the turn's messages of thread ${JSON.stringify(threadId)}`, model.embed(kept.map(({ message }) => textOf(message.content))))
          if (vectors === undefined) return
          yield* threads.storeVectors(threadId, model.model, kept.map(({ index }, i) => ({ index, vector: vectors[i]! })), { owner })
        })
    }
  })

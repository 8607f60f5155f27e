/**
 * Stored responses (`POST /v1/responses` with `store` not `false`, on a server with a thread store): a response is a
 * turn on a thread of the request's owner, so `previous_response_id` and `item_reference` need no second store
 * (`responseIds` says how the ids name a turn).
 *
 * - No `previous_response_id`: a new thread. With one: the turn goes on that response's thread when no later turn
 *   began after it; else on a fork of the thread cut before the next turn (OpenAI's branching: the later turns are not
 *   seen). The items before the input are the turn's caller history: checked by its input guardrails and appended
 *   with its messages in one write under the thread's lease (system / developer items and `instructions` are not kept:
 *   each call gives its own). The response id is known once the turn holds the thread (its message count then).
 * - `item_reference` to an output message of this server: the answer of that turn (its last assistant text).
 * - An id that does not decode, names no thread, another owner's thread, or no turn: 400 "not found", naming where.
 *   A response whose turn is still running: `ThreadBusy` (409), as a turn on a thread in another turn is.
 */
import { Effect } from "effect"
import type * as Model from "../../../core/Model.js"
import * as Threads from "../../../core/Threads.js"
import type * as Runs from "../../Runs.js"
import { InvalidChatRequest } from "./request.js"
import * as Ids from "./responseIds.js"

/** The most stored turns one request's `item_reference`s may name: each is a store read. */
const maxReferences = 200

/** The messages read from a turn on: enough for any turn an agent makes. */
const window = 1_000

const notFound = (param: string, what: string) =>
  Effect.fail(new InvalidChatRequest({ param, code: "invalid_value", message: `Invalid '${param}': ${what}` }))

/** The thread's messages from the turn's user message on (a window of them), or "not found" at `param`. */
const turnMessages = (threads: Threads.Service, owner: string, at: Ids.TurnAt, param: string, id: string) =>
  threads.get(at.threadId, { owner }).pipe(
    Effect.flatMap((thread) =>
      // The turn has not ended: its messages (the items before its input, then its own) are appended when it does, in
      // one write. (An index past the end that no turn will reach reads the same: the thread's owner forged it.)
      at.index >= thread.messageCount
        ? Effect.fail(new Threads.ThreadBusy({ threadId: at.threadId, message: `the response ${JSON.stringify(id.slice(0, 100))} is still in progress` }))
        : threads.messages(at.threadId, { owner, before: Math.min(thread.messageCount, at.index + window), limit: window })
    ),
    Effect.catchTags({
      ThreadNotFound: () => Effect.succeed(undefined),
      ThreadForbidden: () => Effect.succeed(undefined)
    }),
    Effect.flatMap((page) => {
      const from = page === undefined || at.index < page.start ? [] : page.messages.slice(at.index - page.start)
      return from[0]?.role !== "user"
        ? notFound(param, `${JSON.stringify(id.slice(0, 100))} not found.`)
        : Effect.succeed(from)
    })
  )

/** The turn's answer: its last assistant message with text, before the next user message. */
const answerOf = (messages: ReadonlyArray<Model.Message>): Model.Message | undefined => {
  const next = messages.findIndex((message, i) => i > 0 && message.role === "user")
  const turn = next === -1 ? messages : messages.slice(0, next)
  for (let i = turn.length - 1; i > 0; i--) {
    const message = turn[i]!
    if (message.role === "assistant" && message.content !== "") return { role: "assistant", content: message.content }
  }
  return undefined
}

/** The messages the request's `item_reference` ids name, by id. */
export const references = (
  threads: Threads.Service,
  owner: string,
  ids: ReadonlyArray<{ readonly id: string; readonly at: string }>
): Effect.Effect<ReadonlyMap<string, Model.Message>, InvalidChatRequest | Threads.ThreadError> =>
  Effect.gen(function*() {
    // Each turn named is read once, however often (and under whichever id) it is named; too many are refused before
    // any read.
    const turns = new Map<string, { readonly turn: Ids.TurnAt; readonly at: string; readonly id: string }>()
    const keys: Array<readonly [id: string, key: string]> = []
    for (const { at, id } of ids) {
      const turn = Ids.turnOfMessage(id)
      if (turn === undefined) return yield* notFound(`${at}.id`, `Item with id ${JSON.stringify(id.slice(0, 100))} not found.`)
      const key = `${turn.threadId}\u0000${turn.index}`
      if (!turns.has(key)) {
        if (turns.size >= maxReferences) {
          return yield* Effect.fail(new InvalidChatRequest({
            param: `${at}.id`,
            code: "invalid_value",
            message: `Invalid '${at}.id': a request names at most ${maxReferences} stored turns with item_reference ` +
              `(send the earlier items themselves, or use previous_response_id)`
          }))
        }
        turns.set(key, { turn, at, id })
      }
      keys.push([id, key])
    }
    const answers = new Map<string, Model.Message>()
    for (const [key, { at, id, turn }] of turns) {
      const answer = answerOf(yield* turnMessages(threads, owner, turn, `${at}.id`, id))
      if (answer === undefined) return yield* notFound(`${at}.id`, `Item with id ${JSON.stringify(id.slice(0, 100))} not found (that turn has no answer).`)
      answers.set(key, answer)
    }
    const found = new Map<string, Model.Message>()
    for (const [id, key] of keys) found.set(id, answers.get(key)!)
    return found
  })

/**
 * Starts the request's run as a turn (see the module comment) and answers where it is: the run, and the turn's
 * thread and index (its response id).
 */
export const startTurn = (
  runs: Runs.Service,
  threads: Threads.Service,
  owner: string,
  previousResponseId: string | undefined,
  run: Runs.RunRequest
) =>
  Effect.gen(function*() {
    let threadId: string
    // Whether the thread is this request's (new, or a fork): a turn refused (429, 409) leaves no thread behind, so
    // that a client's retry makes no orphans.
    let made = false
    if (previousResponseId !== undefined) {
      const param = "previous_response_id"
      const turn = Ids.turnOfResponse(previousResponseId)
      if (turn === undefined) return yield* notFound(param, `Previous response with id ${JSON.stringify(previousResponseId.slice(0, 100))} not found.`)
      const messages = yield* turnMessages(threads, owner, turn, param, previousResponseId)
      const next = messages.findIndex((message, i) => i > 0 && message.role === "user")
      // A later turn began after it: branch, so that the later turns are not seen (a fork copies the messages).
      threadId = next === -1 ? turn.threadId : (yield* threads.fork(turn.threadId, { owner, at: turn.index + next })).id
      made = next !== -1
    } else {
      threadId = (yield* threads.create({ owner })).id
      made = true
    }
    // The items before the input go with the turn (checked by its input guardrails, written with its messages in one
    // append under its lease: nothing is on the thread before the turn holds it); the instructions and the system or
    // developer items are this call's, not kept (each call gives its own, as OpenAI does).
    const { history, ...turnRequest } = run
    const started = yield* runs.startTurn(turnRequest, { id: threadId, owner, history: history ?? [] }).pipe(
      Effect.tapError(() => made ? Effect.ignore(threads.delete(threadId, { owner })) : Effect.void)
    )
    const kept = (history ?? []).filter((message) => message.role !== "system").length
    return { runId: started.runId, at: { threadId, index: started.messageCount + kept } satisfies Ids.TurnAt }
  })

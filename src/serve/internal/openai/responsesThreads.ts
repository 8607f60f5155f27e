/**
 * Stored responses (`POST /v1/responses` with `store` not `false`, on a server with a thread store): a response is a
 * turn on a thread of the request's owner, so `previous_response_id` and `item_reference` need no second store
 * (`responseIds` says how the ids name a turn).
 *
 * - No `previous_response_id`: a new thread. With one: the turn goes on that response's thread when its messages
 *   are the thread's last; else on a fork of the thread cut after them (OpenAI's branching: the later turns are not
 *   seen). The items before the input are the turn's caller history: checked by its input guardrails and appended
 *   with its messages in one write under the thread's lease (system / developer items and `instructions` are not kept:
 *   each call gives its own). The response id holds a new key the turn runs under (`responseIds`).
 * - `item_reference` to an output message of this server: the answer of that turn (its last assistant text).
 * - An id that does not decode, names no thread, another owner's thread, or no turn that stored its messages: 400
 *   "not found", naming where. A response whose turn is still running (its key's lease holds the thread):
 *   `ThreadBusy` (409), as a turn on a thread in another turn is.
 */
import { Effect, Result } from "effect"
import type * as Model from "../../../core/Model.js"
import * as Threads from "../../../core/Threads.js"
import type * as Runs from "../../Runs.js"
import { InvalidChatRequest } from "./request.js"
import * as Ids from "./responseIds.js"

/** The most stored turns one request's `item_reference`s may name: each is a store read. */
const maxReferences = 200

/** How many of a turn's messages are read at a time, from its end, looking for its answer. */
const page = 100

const notFound = (param: string, what: string) =>
  Effect.fail(new InvalidChatRequest({ param, code: "invalid_value", message: `Invalid '${param}': ${what}` }))

/**
 * Where the turn an id names is (its messages `[start, start + count)`), or "not found" at `param`: an id of no turn
 * of this owner, or of a turn that stored nothing (refused, dropped, failed before it began). A turn still running
 * (its key's lease holds the thread) is `ThreadBusy` (409): its messages are appended when it ends, in one write.
 */
const placeOf = (
  threads: Threads.Service,
  owner: string,
  at: Ids.TurnAt,
  param: string,
  id: string
): Effect.Effect<{ readonly start: number; readonly count: number }, InvalidChatRequest | Threads.ThreadError> =>
  threads.turnOf(at.threadId, at.key, { owner }).pipe(
    Effect.catchTags({
      ThreadNotFound: () => Effect.succeed(undefined),
      ThreadForbidden: () => Effect.succeed(undefined)
    }),
    Effect.flatMap((turn): Effect.Effect<{ readonly start: number; readonly count: number }, InvalidChatRequest | Threads.ThreadError> =>
      turn === undefined
        ? notFound(param, `${JSON.stringify(id.slice(0, 100))} not found.`)
        : turn.status === "running"
        ? Effect.fail(new Threads.ThreadBusy({ threadId: at.threadId, message: `the response ${JSON.stringify(id.slice(0, 100))} is still in progress` }))
        : Effect.succeed({ start: turn.start, count: turn.count })
    )
  )

/**
 * The turn's answer: its last assistant message with text, read a page at a time from the turn's end (only the
 * turn's own messages are read, however long the thread or the turn).
 */
const answerOf = (
  threads: Threads.Service,
  owner: string,
  threadId: string,
  place: { readonly start: number; readonly count: number }
): Effect.Effect<Model.Message | null | undefined, Threads.ThreadError> =>
  Effect.gen(function*() {
    let before = place.start + place.count
    while (before > place.start) {
      const read = yield* threads.messages(threadId, { owner, before, limit: Math.min(page, before - place.start) })
      for (let i = read.messages.length - 1; i >= 0; i--) {
        const message = read.messages[i]!
        if (message.role === "assistant" && (message.toolCalls ?? []).length === 0) {
          const text = withoutNote(message.content)
          return text === "" ? null : { role: "assistant", content: text } satisfies Model.Message
        }
      }
      before = read.start
    }
    return undefined
  })

/**
 * The text the client was given of a turn that ended early: the thread keeps it with a note of how it ended
 * (`Threads.Incomplete` "note": the partial answer, a blank line, `(This turn ended early: <reason>.)`), which the
 * response never said.
 */
const withoutNote = (text: string): string => text.replace(/(?:^|\n\n)\(This turn ended early: .*\.\)$/s, "")

/**
 * The messages the request's `item_reference` ids name, by id: `null` for a turn whose answer said nothing (one
 * that ended early before any text): the reference then adds nothing.
 */
export const references = (
  threads: Threads.Service,
  owner: string,
  ids: ReadonlyArray<{ readonly id: string; readonly at: string }>
): Effect.Effect<ReadonlyMap<string, Model.Message | null>, InvalidChatRequest | Threads.ThreadError> =>
  Effect.gen(function*() {
    // Each turn named is read once, however often (and under whichever id) it is named; too many are refused before
    // any read.
    const turns = new Map<string, { readonly turn: Ids.TurnAt; readonly at: string; readonly id: string }>()
    const keys: Array<readonly [id: string, key: string]> = []
    for (const { at, id } of ids) {
      const turn = Ids.turnOfMessage(id)
      if (turn === undefined) return yield* notFound(`${at}.id`, `Item with id ${JSON.stringify(id.slice(0, 100))} not found.`)
      const key = `${turn.threadId}\u0000${turn.key}`
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
    const answers = new Map<string, Model.Message | null>()
    for (const [key, { at, id, turn }] of turns) {
      const place = yield* placeOf(threads, owner, turn, `${at}.id`, id)
      const answer = yield* answerOf(threads, owner, turn.threadId, place)
      if (answer === undefined) return yield* notFound(`${at}.id`, `Item with id ${JSON.stringify(id.slice(0, 100))} not found (that turn has no answer).`)
      answers.set(key, answer)
    }
    const found = new Map<string, Model.Message | null>()
    for (const [id, key] of keys) found.set(id, answers.get(key)!)
    return found
  })

/**
 * Once the response ended: the thread it made (new, or a fork) is deleted when its turn stored nothing (an input
 * guardrail refused it, it failed before it began, `incomplete: "drop"`): no id names that thread, so it would stay
 * an orphan. A turn still holding the thread (a cancel whose note is being written) is left alone.
 */
export const dropIfUnused = (threads: Threads.Service, owner: string, at: Ids.TurnAt): Effect.Effect<void> =>
  Effect.ignore(Effect.flatMap(threads.turnOf(at.threadId, at.key, { owner }), (turn) =>
    turn === undefined ? threads.delete(at.threadId, { owner }) : Effect.void))

/** The most messages of a conversation a response not stored reads (a turn's `historyLimit` by default). */
const historyLimit = 100

/**
 * The conversation up to the end of the turn `previousResponseId` names (its last messages, from a user message), for
 * a response that goes on from it without being stored (`store: false`): a read, nothing written.
 */
export const conversationOf = (
  threads: Threads.Service,
  owner: string,
  previousResponseId: string
): Effect.Effect<ReadonlyArray<Model.Message>, InvalidChatRequest | Threads.ThreadError> =>
  Effect.gen(function*() {
    const param = "previous_response_id"
    const turn = Ids.turnOfResponse(previousResponseId)
    if (turn === undefined) return yield* notFound(param, `Previous response with id ${JSON.stringify(previousResponseId.slice(0, 100))} not found.`)
    const place = yield* placeOf(threads, owner, turn, param, previousResponseId)
    const read = yield* threads.messages(turn.threadId, { owner, before: place.start + place.count, limit: historyLimit })
    // Never from inside an exchange (a tool result without its call); a turn's messages end whole.
    const first = read.messages.findIndex((message) => message.role === "user")
    return first === -1 ? [] : read.messages.slice(first)
  })

/**
 * Starts the request's run as a turn (see the module comment) and answers where it is: the run, and the turn's
 * thread and key (its response id).
 */
export const startTurn = (
  runs: Runs.Service,
  threads: Threads.Service,
  owner: string,
  previousResponseId: string | undefined,
  run: Runs.RunRequest
) =>
  Effect.gen(function*() {
    // The items before the input go with the turn (checked by its input guardrails, written with its messages in one
    // append under its lease: nothing is on the thread before the turn holds it); the instructions and the system or
    // developer items are this call's, not kept (each call gives its own, as OpenAI does).
    const { history, ...turnRequest } = run
    const key = Ids.newKey()
    const attempt = Effect.gen(function*() {
      let threadId: string
      // Whether the thread is this request's (new, or a fork): a turn refused (429, 409) leaves no thread behind, so
      // that a client's retry makes no orphans.
      let made = false
      // On the response's own thread, right after its messages: the count the turn must find under its lease.
      let expectedCount: number | undefined
      if (previousResponseId !== undefined) {
        const param = "previous_response_id"
        const turn = Ids.turnOfResponse(previousResponseId)
        if (turn === undefined) return yield* notFound(param, `Previous response with id ${JSON.stringify(previousResponseId.slice(0, 100))} not found.`)
        const place = yield* placeOf(threads, owner, turn, param, previousResponseId)
        const end = place.start + place.count
        const thread = yield* threads.get(turn.threadId, { owner })
        // A later turn began after it: branch, so that the later turns are not seen (a fork copies the messages).
        made = thread.messageCount !== end
        threadId = made ? (yield* threads.fork(turn.threadId, { owner, at: end })).id : turn.threadId
        if (!made) expectedCount = end
      } else {
        threadId = (yield* threads.create({ owner })).id
        made = true
      }
      const started = yield* runs.startTurn(turnRequest, {
        id: threadId,
        owner,
        history: history ?? [],
        turnKey: key,
        ...(expectedCount !== undefined ? { expectedCount } : {})
      }).pipe(Effect.tapError(() => made ? Effect.ignore(threads.delete(threadId, { owner })) : Effect.void))
      return { runId: started.runId, at: { threadId, key } satisfies Ids.TurnAt, made }
    })
    // Chosen "linear" on a count read before the lease: a turn that got in meanwhile (a sibling branch, waited for
    // under onBusy "wait") refuses it with ThreadBusy; chosen again, it is a branch (a fork). Once: a thread kept
    // busy is a 409.
    const first = yield* Effect.result(attempt)
    if (Result.isSuccess(first)) return first.success
    return yield* first.failure._tag === "ThreadBusy" && previousResponseId !== undefined ? attempt : Effect.fail(first.failure)
  })

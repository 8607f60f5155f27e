/**
 * The ids of stored responses (`POST /v1/responses` with a thread store): a stored response is a turn on a thread, so
 * its id says which thread and where the turn begins — `resp_` + base64url(threadId NUL index), the index of the
 * turn's user message, known when the turn starts (so it is in `response.created`). Its output message is `msg_` with
 * the same payload: "the answer of the turn that begins there". No second store: the ids decode to a thread, which the
 * request's owner must own (another owner's id reads as an unknown one).
 */
import * as Threads from "../../../core/Threads.js"

/** Where a stored response's turn is: its thread, and the index of the turn's user message. */
export interface TurnAt {
  readonly threadId: string
  readonly index: number
}

const encode = (prefix: string, at: TurnAt): string =>
  `${prefix}_${Buffer.from(`${at.threadId}\u0000${at.index}`, "utf8").toString("base64url")}`

const decode = (prefix: string, id: string): TurnAt | undefined => {
  if (!id.startsWith(`${prefix}_`)) return undefined
  const text = Buffer.from(id.slice(prefix.length + 1), "base64url").toString("utf8")
  const cut = text.indexOf("\u0000")
  if (cut <= 0) return undefined
  const threadId = text.slice(0, cut)
  const index = text.slice(cut + 1)
  if (!/^(0|[1-9][0-9]{0,8})$/.test(index) || Threads.threadIdProblem(threadId) !== undefined) return undefined
  const at = { threadId, index: Number(index) }
  // Only the id this server gives for that turn: base64url decoding skips characters outside its alphabet (and
  // ignores padding), so without this every variant of one id would decode, each a store read.
  return encode(prefix, at) === id ? at : undefined
}

/** A stored response's id. */
export const responseId = (at: TurnAt): string => encode("resp", at)
/** The id of a stored response's output message. */
export const messageId = (at: TurnAt): string => encode("msg", at)
/** The turn a response id names, or `undefined` when it is not one this server gave. */
export const turnOfResponse = (id: string): TurnAt | undefined => decode("resp", id)
/** The turn whose answer an output message id names, or `undefined`. */
export const turnOfMessage = (id: string): TurnAt | undefined => decode("msg", id)

/**
 * The ids of stored responses (`POST /v1/responses` with a thread store): a stored response is a turn on a thread,
 * named by a key the turn is run under (`Threads.TurnOptions.turnKey`: its lease and its append carry it) — `resp_` +
 * base64url(threadId NUL key), known before the turn starts (so it is in `response.created`). Its output messages
 * are `msg_` with the same payload (the first) or with NUL n after it (the n-th): each reads "the answer of that
 * turn". The key is a nonce, so an id names one turn only, and a
 * turn that stored nothing leaves its id naming nothing (`Threads.Service.turnOf` finds no key). No second store: the
 * ids decode to a thread, which the request's owner must own (another owner's id reads as an unknown one).
 */
import { randomBytes } from "node:crypto"
import * as Threads from "../../../core/Threads.js"

/** Which turn a stored response is: its thread, and the turn's key on it. */
export interface TurnAt {
  readonly threadId: string
  readonly key: string
}

/** A key as this server makes them (`newKey`), or as a client may have been given one. */
const keyPattern = /^[A-Za-z0-9_-]{1,64}$/

/** A new turn key: 96 random bits, base64url. */
export const newKey = (): string => randomBytes(12).toString("base64url")

/** The `n`-th output message's id has `n` after the key (from 1: the first has none, as a response's id). */
const encode = (prefix: string, at: TurnAt, n = 0): string =>
  `${prefix}_${Buffer.from(`${at.threadId}\u0000${at.key}${n === 0 ? "" : `\u0000${n}`}`, "utf8").toString("base64url")}`

const decode = (prefix: string, id: string, numbered: boolean): TurnAt | undefined => {
  if (!id.startsWith(`${prefix}_`)) return undefined
  const [threadId, key, n, ...rest] = Buffer.from(id.slice(prefix.length + 1), "base64url").toString("utf8").split("\u0000")
  if (threadId === undefined || key === undefined || rest.length > 0 || (n !== undefined && !(numbered && /^[1-9][0-9]{0,5}$/.test(n)))) return undefined
  if (!keyPattern.test(key) || Threads.threadIdProblem(threadId) !== undefined) return undefined
  const at = { threadId, key }
  // Only the id this server gives for that turn: base64url decoding skips characters outside its alphabet (and
  // ignores padding), so without this every variant of one id would decode, each a store read.
  return encode(prefix, at, n === undefined ? 0 : Number(n)) === id ? at : undefined
}

/** A stored response's id. */
export const responseId = (at: TurnAt): string => encode("resp", at)
/**
 * The id of a stored response's `n`-th output message (from 0): one per root model call whose text was said, the
 * last the answer. Each names the turn; an `item_reference` to any of them is the turn's answer.
 */
export const messageId = (at: TurnAt, n = 0): string => encode("msg", at, n)
/** The turn a response id names, or `undefined` when it is not one this server gave. */
export const turnOfResponse = (id: string): TurnAt | undefined => decode("resp", id, false)
/** The turn whose answer an output message id names, or `undefined`. */
export const turnOfMessage = (id: string): TurnAt | undefined => decode("msg", id, true)

/**
 * The framing of MCP's stdio transport — one JSON-RPC message per line — read defensively, before effect's
 * `McpServer` sees a byte: lines are cut at a size limit while they are read (a 20 MB line never sits in memory
 * whole), each line is decoded on its own (one bad line costs one error answer, never the lines around it), and a
 * message whose envelope is wrong is answered here with the JSON-RPC error the specification names (-32700 for
 * text that is not JSON, -32600 for a message that is not a valid request), because effect's NDJSON reader drops
 * the whole read on the first bad line and its RPC server answers a non-scalar id with a defect.
 *
 * What goes on to effect is the message re-encoded from its decoded envelope (`jsonrpc`, `id`, `method`, `params`,
 * `result`, `error`): the keys effect's RPC layer reads for its own protocol (`headers`, `discard`, trace ids) are
 * not JSON-RPC's and a client cannot set them.
 */
import { Result, Schema } from "effect"
import { describeIssue } from "../../../core/internal/decode.js"
import { jsonDepthWithin, maxJsonDepth } from "../../../core/internal/parse.js"

// ---------------------------------------------------------------------------------------------------------
// Lines
// ---------------------------------------------------------------------------------------------------------

/** A piece of input: a whole line (without its `\n`), or the news that the current line passed the limit. */
export type Piece =
  | { readonly _tag: "Line"; readonly bytes: Uint8Array }
  | { readonly _tag: "TooLong"; readonly maxBytes: number }

/** Cuts a stream of bytes into lines: `push` each chunk as it comes, then `end` when the input ends. */
export interface LineSplitter {
  readonly push: (chunk: Uint8Array) => Array<Piece>
  /** The last line, when the input ended without its `\n` (MCP asks for one, but `printf '…' |` forgets it). */
  readonly end: () => Array<Piece>
}

/**
 * Splits chunks of bytes into lines of at most `maxBytes` bytes. A longer line is reported once, as soon as it
 * passes the limit (so a client that never ends the line is still answered), and its bytes are dropped up to its
 * `\n`: memory stays under `maxBytes` whatever the input.
 */
export const lineSplitter = (maxBytes: number): LineSplitter => {
  let parts: Array<Uint8Array> = []
  let length = 0
  let discarding = false
  const push = (chunk: Uint8Array): Array<Piece> => {
    const pieces: Array<Piece> = []
    let start = 0
    while (start < chunk.length) {
      const newline = chunk.indexOf(10, start)
      const end = newline === -1 ? chunk.length : newline
      if (!discarding) {
        if (length + (end - start) > maxBytes) {
          discarding = true
          parts = []
          length = 0
          pieces.push({ _tag: "TooLong", maxBytes })
        } else if (end > start) {
          parts.push(chunk.subarray(start, end))
          length += end - start
        }
      }
      if (newline === -1) break
      if (discarding) {
        discarding = false
      } else {
        pieces.push({ _tag: "Line", bytes: concat(parts, length) })
        parts = []
        length = 0
      }
      start = newline + 1
    }
    // The parts point into `chunk`, which the reader may reuse: keep a copy of an unfinished line.
    if (parts.length > 0 && parts[parts.length - 1]!.buffer === chunk.buffer) {
      parts[parts.length - 1] = parts[parts.length - 1]!.slice()
    }
    return pieces
  }
  const end = (): Array<Piece> => {
    const last: Array<Piece> = length > 0 ? [{ _tag: "Line", bytes: concat(parts, length) }] : []
    parts = []
    length = 0
    discarding = false
    return last
  }
  return { push, end }
}

// One line from the pieces it arrived in (no copy when it came whole).
const concat = (parts: ReadonlyArray<Uint8Array>, length: number): Uint8Array =>
  parts.length === 1 ? parts[0]! : Buffer.concat(parts, length)

// ---------------------------------------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------------------------------------

/** JSON-RPC's error codes for what this module refuses. */
export const ErrorCode = { parseError: -32700, invalidRequest: -32600 } as const

/** What to do with one line. */
export type Decision =
  /** Hand `text` (one JSON-RPC message or batch, re-encoded) to the MCP server. */
  | { readonly _tag: "Forward"; readonly text: string }
  /** Write `text` (a JSON-RPC error response) back to the client. */
  | { readonly _tag: "Answer"; readonly text: string; readonly code: number; readonly message: string }
  /** Nothing to answer (a blank line, or a bad response from the client, which JSON-RPC never answers). */
  | { readonly _tag: "Drop"; readonly note: string | undefined }

const Id = Schema.Union([Schema.String, Schema.Number])
const isId = Schema.is(Id)
const Params = Schema.Union([Schema.Record(Schema.String, Schema.Unknown), Schema.Array(Schema.Unknown)])

/** A request (with `id`) or a notification (without). */
const Request = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  id: Schema.optionalKey(Id),
  method: Schema.String,
  params: Schema.optionalKey(Params)
})

/** A client's answer to a request of the server's (sampling, elicitation, roots). */
const Response = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  id: Id,
  result: Schema.optionalKey(Schema.Unknown),
  error: Schema.optionalKey(Schema.Struct({ code: Schema.Number, message: Schema.String, data: Schema.optionalKey(Schema.Unknown) }))
})

const decodeRequest = Schema.decodeUnknownResult(Request)
const decodeResponse = Schema.decodeUnknownResult(Response)

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** An error response to the client. */
export const errorResponse = (id: string | number | null, code: number, message: string): string =>
  JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } })

const answer = (id: string | number | null, code: number, message: string): Decision => ({
  _tag: "Answer",
  text: errorResponse(id, code, message),
  code,
  message
})

type Checked =
  | { readonly _tag: "Valid"; readonly message: unknown }
  | { readonly _tag: "Invalid"; readonly id: string | number | null; readonly problem: string; readonly isResponse: boolean }

/** One message of a line (or of a batch), checked against JSON-RPC 2.0's envelope. */
const check = (value: unknown): Checked => {
  if (!isObject(value)) {
    return { _tag: "Invalid", id: null, problem: `a message must be a JSON object, got ${kindOf(value)}`, isResponse: false }
  }
  // JSON-RPC: the id of a request that cannot be read is null in the answer.
  const id = isId(value.id) ? value.id : null
  if ("method" in value) {
    const decoded = decodeRequest(value)
    return Result.isSuccess(decoded)
      ? { _tag: "Valid", message: decoded.success }
      : { _tag: "Invalid", id, problem: describeIssue(decoded.failure.issue, value), isResponse: false }
  }
  if ("result" in value || "error" in value) {
    const decoded = decodeResponse(value)
    if (Result.isFailure(decoded)) {
      return { _tag: "Invalid", id, problem: describeIssue(decoded.failure.issue, value), isResponse: true }
    }
    if (("result" in decoded.success) === ("error" in decoded.success)) {
      return { _tag: "Invalid", id, problem: "a response must have either result or error", isResponse: true }
    }
    return { _tag: "Valid", message: decoded.success }
  }
  return {
    _tag: "Invalid",
    id,
    problem: "a message must have a method (a request or a notification) or a result or an error (a response)",
    isResponse: false
  }
}

const kindOf = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : typeof value === "string" ? "a string" : typeof value === "number" ? "a number" : typeof value === "boolean" ? "a boolean" : "an object"

const utf8 = new TextDecoder("utf-8", { fatal: true })

/** What to do with one line of input (`bytes`, without its `\n`). */
export const decide = (bytes: Uint8Array): Decision => {
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    return answer(null, ErrorCode.parseError, "Parse error: the line is not UTF-8 text")
  }
  if (text.trim() === "") return { _tag: "Drop", note: undefined }
  // `JSON.parse` copes with any depth, but the recursive decoding and encoding after it overflow the stack.
  if (!jsonDepthWithin(text)) {
    return answer(null, ErrorCode.parseError, `Parse error: the JSON nests deeper than ${maxJsonDepth} levels`)
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return answer(null, ErrorCode.parseError, `Parse error: the line is not JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  if (Array.isArray(value)) {
    if (value.length === 0) return answer(null, ErrorCode.invalidRequest, "Invalid Request: the batch is empty")
    const messages: Array<unknown> = []
    for (let i = 0; i < value.length; i++) {
      const checked = check(value[i])
      if (checked._tag === "Invalid") return answer(null, ErrorCode.invalidRequest, `Invalid Request: batch item ${i}: ${checked.problem}`)
      messages.push(checked.message)
    }
    return { _tag: "Forward", text: JSON.stringify(messages) }
  }
  const checked = check(value)
  if (checked._tag === "Valid") return { _tag: "Forward", text: JSON.stringify(checked.message) }
  // A response is never answered (its sender is not waiting for one); the note says why it was dropped.
  if (checked.isResponse) return { _tag: "Drop", note: `a response from the client was dropped: ${checked.problem}` }
  return answer(checked.id, ErrorCode.invalidRequest, `Invalid Request: ${checked.problem}`)
}

/** The answer to a line longer than `maxBytes`. */
export const tooLong = (maxBytes: number): Decision =>
  answer(null, ErrorCode.invalidRequest, `Invalid Request: the message is longer than this server's limit of ${maxBytes} bytes`)

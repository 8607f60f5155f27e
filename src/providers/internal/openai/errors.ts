/**
 * Server answers and transport failures → the `ModelError` union. The status decides first (429, 401/403, 404,
 * other 4xx, 5xx); the error body's message and code refine it (a context-length message, a missing model).
 */
import { Result, Schema } from "effect"
import type * as HttpClientError from "effect/http/HttpClientError"
import * as ModelError from "../../../core/ModelError.js"
import { parseJsonText } from "../../../core/internal/json.js"
import * as Wire from "./wire.js"

/** How much of an unexpected body a `MalformedResponse` keeps. */
export const bodyPreviewChars = 500

/** The start of a body, for error messages. */
export const preview = (body: string): string =>
  body.length <= bodyPreviewChars ? body : `${body.slice(0, bodyPreviewChars)}… (${body.length} characters)`

/** A body that is not what the protocol says. */
export const malformed = (what: string, body: string): ModelError.MalformedResponse =>
  new ModelError.MalformedResponse({ message: what, body: preview(body) })

/** A byte count as people read it: `32 MiB`, `1.5 KiB`, `100 bytes`. */
export const formatBytes = (bytes: number): string => {
  if (!Number.isFinite(bytes)) return String(bytes)
  const units = ["bytes", "KiB", "MiB", "GiB"] as const
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return unit === 0 ? `${bytes} bytes` : `${Number.isInteger(value) ? value : value.toFixed(1)} ${units[unit]}`
}

/** A body over one of the size caps (`maxResponseBytes`, `maxStreamBytes`, `maxEventBytes`). */
export const tooLarge = (what: string, option: string, limit: number, start: string): ModelError.MalformedResponse =>
  new ModelError.MalformedResponse({
    message: `${what} is larger than ${option} (${formatBytes(limit)}): not read further; raise ${option} if the server is trusted`,
    body: preview(start)
  })

const contextLengthPattern =
  /context length|context_length|context window|maximum context|maximum input length|too many tokens|prompt is too long|longer than the model|exceeds the (model'?s )?(max|context)/i

const decodeErrorBody = Schema.decodeUnknownResult(Wire.ErrorBody)

/** The error fields of a body (either shape), when it is one. */
export const errorFields = (json: unknown): Wire.ErrorFields | undefined => {
  const decoded = decodeErrorBody(json)
  if (Result.isFailure(decoded)) return undefined
  const body = decoded.success
  if ("error" in body) return typeof body.error === "string" ? { message: body.error } : body.error
  return body
}

const parseJson = (text: string): unknown => Result.getOrUndefined(parseJsonText(text))

/** `Retry-After` (seconds or an HTTP date) or OpenAI's `retry-after-ms`, in milliseconds. */
export const retryAfterMs = (headers: Readonly<Record<string, string | undefined>>, now: number): number | undefined => {
  const ms = headers["retry-after-ms"]
  if (ms !== undefined && ms.trim() !== "" && Number.isFinite(Number(ms))) return Math.max(0, Number(ms))
  const value = headers["retry-after"]
  if (value === undefined || value.trim() === "") return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000)
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

/** A status a server put in an error object's `code` or `type` (errors inside a 200 stream have no status). */
const statusOfFields = (fields: Wire.ErrorFields): number => {
  const code = fields.code
  if (typeof code === "number" && code >= 400 && code <= 599) return code
  if (typeof code === "string" && /^[45]\d\d$/.test(code)) return Number(code)
  const kind = `${fields.type ?? ""} ${typeof code === "string" ? code : ""}`.toLowerCase()
  if (/rate.?limit/.test(kind)) return 429
  if (/auth|permission/.test(kind)) return 401
  if (/not.?found/.test(kind)) return 404
  if (/context_length|invalid|badrequest|bad_request/.test(kind)) return 400
  return 500
}

/** Maps a status and the server's error fields to the `ModelError` it means. */
export const fromFields = (options: {
  readonly status: number
  readonly fields: Wire.ErrorFields | undefined
  readonly body: string
  readonly model: string
  readonly retryAfterMs?: number | undefined
}): ModelError.ModelError => {
  const { fields, status } = options
  const serverMessage = fields?.message ?? (options.body.trim() === "" ? "" : preview(options.body))
  const message = serverMessage === "" ? `HTTP ${status} with an empty body` : serverMessage
  const code = typeof fields?.code === "string" ? fields.code : ""
  if (status === 429) {
    return new ModelError.RateLimited({
      message,
      ...(options.retryAfterMs !== undefined ? { retryAfterMs: options.retryAfterMs } : {})
    })
  }
  if (status === 401 || status === 403) return new ModelError.Unauthorized({ status, message })
  if (code === "context_length_exceeded" || contextLengthPattern.test(message)) {
    return new ModelError.ContextLengthExceeded({ message })
  }
  if (status === 404 && (code === "model_not_found" || /model/i.test(message))) {
    return new ModelError.ModelNotFound({ model: options.model, message })
  }
  if (status >= 400 && status < 500) return new ModelError.InvalidRequest({ status, message })
  return new ModelError.ServerError({ status, message })
}

/** The error for a non-2xx answer, from its status, headers and body text. */
export const fromResponse = (options: {
  readonly status: number
  readonly headers: Readonly<Record<string, string | undefined>>
  readonly body: string
  readonly model: string
  readonly now: number
}): ModelError.ModelError =>
  fromFields({
    status: options.status,
    fields: errorFields(parseJson(options.body)),
    body: options.body,
    model: options.model,
    retryAfterMs: options.status === 429 ? retryAfterMs(options.headers, options.now) : undefined
  })

/** The error for an error object that arrived inside a 200 stream. */
export const fromStreamedError = (fields: Wire.ErrorFields, model: string, body: string): ModelError.ModelError =>
  fromFields({ status: statusOfFields(fields), fields, body, model })

const decodeFields = Schema.decodeUnknownResult(Wire.ErrorFields)

/**
 * The error of an SSE `event: error`: its data as an error body (either shape), as bare error fields
 * (`{"message": ..., "code": ...}`), or as plain text — the server's message is kept in every case.
 */
export const fromErrorEvent = (data: string, model: string): ModelError.ModelError => {
  const json = parseJson(data)
  const fields = errorFields(json)
  if (fields !== undefined) return fromStreamedError(fields, model, data)
  if (typeof json === "object" && json !== null && !Array.isArray(json)) {
    const bare = decodeFields(json)
    if (Result.isSuccess(bare) && typeof bare.success.message === "string") return fromStreamedError(bare.success, model, data)
  }
  const text = data.trim()
  return fromStreamedError({ message: text === "" ? "the server sent an error event with no message" : preview(text) }, model, data)
}

/** A request that could not be sent or a body that could not be read. */
export const fromHttpClientError = (error: HttpClientError.HttpClientError, url: string): ModelError.ModelError => {
  const reason = error.reason
  const inner = reason.cause
  const cause = inner instanceof Error
    ? `${inner.message}${inner.cause instanceof Error ? ` (${inner.cause.message})` : ""}`
    : inner !== undefined
    ? String(inner)
    : reason.description ?? error.message
  if (reason._tag === "InvalidUrlError") {
    return new ModelError.InvalidRequest({ status: 0, message: `invalid URL ${url}: ${cause}` })
  }
  return new ModelError.Transport({ message: `${error.request.method} ${url}: ${cause}` })
}

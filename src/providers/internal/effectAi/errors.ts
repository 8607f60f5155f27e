/**
 * `ModelError` ⇄ `AiError`. Each valet error becomes the `AiError` reason that means the same thing (so
 * `isRetryable`, `retryAfter` and `Effect.catchReason` work for an `effect/ai` user), and carries the valet error
 * itself — encoded in the reason's `metadata.valet`, or as the `cause` of a `NetworkError`, which has no metadata —
 * so that a round trip through both bridges gives back the error it started as.
 */
import { Duration, Option, Schema } from "effect"
import { AiError } from "effect/ai"
import * as ModelError from "../../../core/ModelError.js"
import * as Errors from "../openai/errors.js"

const module = "valet/EffectAi"

const encodeModelError = Schema.encodeSync(ModelError.ModelError)
const decodeModelError = Schema.decodeUnknownOption(ModelError.ModelError)

/** The reason's metadata that carries the valet error. */
const carrying = (error: ModelError.ModelError) => ({ valet: encodeModelError(error) as unknown as Schema.MutableJson })

const httpOf = (status: number) => (status > 0 ? { http: { response: { status, headers: {} } } } : {})

/** The `AiError` reason a `ModelError` means. */
const reasonOf = (error: ModelError.ModelError): AiError.AiErrorReason => {
  const metadata = carrying(error)
  switch (error._tag) {
    case "RateLimited":
      return new AiError.RateLimitError({
        ...(error.retryAfterMs !== undefined ? { retryAfter: Duration.millis(error.retryAfterMs) } : {}),
        http: { response: { status: 429, headers: {} }, body: error.message },
        metadata
      })
    case "ServerError":
      return new AiError.InternalProviderError({ description: error.message, ...httpOf(error.status), metadata })
    case "Timeout":
    case "Transport":
      // Both mean "no answer came back": retryable, as the `TransportError` reason is.
      return new AiError.NetworkError({
        reason: "TransportError",
        method: "POST",
        url: "",
        description: `${error._tag}: ${error.message}`,
        cause: error
      })
    case "Unauthorized":
      return new AiError.AuthenticationError({ kind: "Unknown", description: error.message, ...httpOf(error.status), metadata })
    case "InvalidRequest":
      return new AiError.InvalidRequestError({ description: error.message, ...httpOf(error.status), metadata })
    case "ContextLengthExceeded":
      return new AiError.InvalidRequestError({
        parameter: "prompt",
        constraint: "exceeds the model's context window",
        description: error.message,
        metadata
      })
    case "ModelNotFound":
      return new AiError.InvalidRequestError({ parameter: "model", description: error.message, metadata })
    case "MalformedResponse":
      return new AiError.InvalidResponseError({ description: error.message, http: { body: error.body }, metadata })
    case "InvalidContent":
      return new AiError.InvalidRequestError({ parameter: "prompt", description: error.message, metadata })
    case "ScriptExhausted":
    case "ReplayMiss":
      return new AiError.UnknownError({ description: error.message, metadata })
  }
}

/** A `ModelError` as an `AiError` of `method`. */
export const toAiError = (method: string) => (error: ModelError.ModelError): AiError.AiError =>
  AiError.make({ module, method, reason: reasonOf(error) })

/** A valet failure of the bridge itself (a prompt valet cannot send). */
export const invalidRequest = (method: string, parameter: string, description: string): AiError.AiError =>
  AiError.make({ module, method, reason: new AiError.InvalidRequestError({ parameter, description }) })

/** The valet error an `AiError` carries, when it started as one (see above). */
export const modelErrorOf = (error: AiError.AiError): ModelError.ModelError | undefined => {
  const reason = error.reason
  if (reason._tag === "NetworkError") return ModelError.isModelError(reason.cause) ? reason.cause : undefined
  const metadata: Readonly<Record<string, unknown>> | undefined = "metadata" in reason ? reason.metadata : undefined
  return metadata !== undefined && metadata["valet"] !== undefined
    ? Option.getOrUndefined(decodeModelError(metadata["valet"]))
    : undefined
}

const statusOf = (reason: AiError.AiErrorReason): number | undefined =>
  "http" in reason ? reason.http?.response?.status : undefined

const headersOf = (reason: AiError.AiErrorReason): Readonly<Record<string, string | undefined>> => {
  const headers = "http" in reason ? reason.http?.response?.headers : undefined
  const out: Record<string, string> = {}
  for (const [key, value] of Object.entries(headers ?? {})) if (typeof value === "string") out[key.toLowerCase()] = value
  return out
}

const bodyOf = (reason: AiError.AiErrorReason): string => ("http" in reason ? reason.http?.body ?? "" : "")

/**
 * An `AiError` as the `ModelError` it means: the one it carries when it started as a valet error, else by its
 * reason (statuses and messages classified as `OpenAiCompatible` classifies them).
 */
export const fromAiError = (error: AiError.AiError, now: number): ModelError.ModelError => {
  const carried = modelErrorOf(error)
  if (carried !== undefined) return carried
  const reason = error.reason
  // The provider's own words where the reason keeps them; its generic message otherwise.
  const description = "description" in reason && typeof reason.description === "string" && reason.description !== ""
    ? reason.description
    : reason.message
  const classify = (status: number) =>
    Errors.fromFields({
      status,
      fields: { message: description },
      body: bodyOf(reason),
      model: "",
      retryAfterMs: status === 429 ? Errors.retryAfterMs(headersOf(reason), now) : undefined
    })
  switch (reason._tag) {
    case "RateLimitError": {
      const retryAfter = reason.retryAfter !== undefined
        ? Duration.toMillis(reason.retryAfter)
        : Errors.retryAfterMs(headersOf(reason), now)
      const body = bodyOf(reason)
      return new ModelError.RateLimited({
        message: body !== "" ? Errors.preview(body) : description,
        ...(retryAfter !== undefined ? { retryAfterMs: retryAfter } : {})
      })
    }
    case "AuthenticationError":
      return new ModelError.Unauthorized({ status: statusOf(reason) ?? 401, message: description })
    case "InvalidRequestError":
      if (reason.parameter === "model") return new ModelError.ModelNotFound({ model: "", message: description })
      return classify(statusOf(reason) ?? 400)
    case "QuotaExhaustedError":
    case "ContentPolicyError":
    case "UnsupportedSchemaError":
    case "InvalidUserInputError":
    case "ToolkitRequiredError":
    case "ToolNotFoundError":
    case "ToolParameterValidationError":
    case "ToolConfigurationError":
    case "InvalidToolResultError":
    case "ToolResultEncodingError":
      return new ModelError.InvalidRequest({ status: statusOf(reason) ?? 0, message: error.message })
    case "InternalProviderError":
      return new ModelError.ServerError({ status: statusOf(reason) ?? 500, message: description })
    case "NetworkError":
      return new ModelError.Transport({ message: error.message })
    case "InvalidResponseError":
    case "InvalidOutputError":
    case "StructuredOutputError":
      return Errors.malformed(error.message, bodyOf(reason) || ("responseText" in reason ? reason.responseText : ""))
    case "UnknownError": {
      const status = statusOf(reason)
      return status !== undefined ? classify(status) : new ModelError.ServerError({ status: 0, message: error.message })
    }
  }
}

/**
 * Errors in one shape on every route: valet's `{_tag, message}`, or OpenAI's `{error: {message, type, param, code}}`
 * under `/v1/` (the facade's clients read that). The router's own answers — an unknown route or method (404), a
 * content type no endpoint takes (415), a defect (500) — come empty or as plain text; a global middleware gives
 * them the shape of their route.
 */
import { Cause, Effect, type Layer } from "effect"
import { type HttpBody, HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"

const tags: Readonly<Record<number, string>> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
  408: "RequestTimeout",
  413: "PayloadTooLarge",
  415: "UnsupportedMediaType",
  421: "MisdirectedRequest",
  429: "TooManyRequests",
  499: "ClientClosedRequest",
  500: "InternalServerError",
  503: "ServiceUnavailable"
}

/** The path of a request target, parsed (no query, no fragment), for choosing the error shape. */
const pathOf = (url: string): string => {
  try {
    return new URL(url, "http://localhost").pathname
  } catch {
    return url
  }
}

/** Whether a request is the OpenAI facade's (its errors in OpenAI's shape). */
export const isOpenAiRoute = (request: HttpServerRequest.HttpServerRequest): boolean => pathOf(request.url).startsWith("/v1/")

const openAiType = (status: number): string =>
  status === 401 ? "authentication_error" : status === 403 ? "permission_error" : status >= 500 ? "server_error" : "invalid_request_error"

/** An error response in the shape of the request's route. */
export const errorResponse = (
  request: HttpServerRequest.HttpServerRequest,
  status: number,
  tag: string,
  message: string,
  headers?: HttpServerResponse.Options["headers"]
): HttpServerResponse.HttpServerResponse =>
  isOpenAiRoute(request)
    ? HttpServerResponse.jsonUnsafe(
      { error: { message, type: openAiType(status), param: null, code: status === 404 ? "not_found" : status === 401 ? "invalid_api_key" : null } },
      { status, ...(headers !== undefined ? { headers } : {}) }
    )
    : HttpServerResponse.jsonUnsafe({ _tag: tag, message }, { status, ...(headers !== undefined ? { headers } : {}) })

const isJson = (body: HttpBody.HttpBody): boolean =>
  "contentType" in body && typeof body.contentType === "string" && /[/+]json\b/i.test(body.contentType)

const textOf = (body: HttpBody.HttpBody): string | undefined =>
  body._tag === "Uint8Array" ? (body.text ?? new TextDecoder().decode(body.body)) : undefined

const defaultMessage = (request: HttpServerRequest.HttpServerRequest, status: number): string => {
  switch (status) {
    case 404:
      return `no route ${request.method} ${pathOf(request.url).slice(0, 200)}`
    case 500:
      return "the server failed to answer this request"
    case 503:
      return "the server is shutting down"
    default:
      return tags[status] ?? `HTTP ${status}`
  }
}

/** A response with an error status but not a JSON body, given one. */
export const shape = (
  request: HttpServerRequest.HttpServerRequest,
  response: HttpServerResponse.HttpServerResponse
): HttpServerResponse.HttpServerResponse => {
  if (response.status < 400 || isJson(response.body) || response.body._tag === "Stream") return response
  const text = textOf(response.body)?.trim()
  const message = text !== undefined && text !== "" ? text.slice(0, 500) : defaultMessage(request, response.status)
  return errorResponse(request, response.status, tags[response.status] ?? "HttpError", message, response.headers)
}

/** The global middleware: the router's failures become responses, every error response JSON. */
export const layer: Layer.Layer<never, never, HttpRouter.HttpRouter> = HttpRouter.middleware((httpEffect) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    httpEffect.pipe(
      Effect.catchCause((cause) =>
        // A client that went away needs no answer: its interruption goes on as it is.
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.map(HttpServerError.causeResponse(cause), ([response]) => response)
      ),
      Effect.map((response) => shape(request, response))
    )), { global: true })

/**
 * Errors in one shape on every route: valet's `{_tag, message}`, OpenAI's `{error: {message, type, param, code}}`
 * under `/v1/` (the facade's clients read that), or a JSON-RPC error on an MCP endpoint. The router's own answers —
 * an unknown route or method (404), a content type no endpoint takes (415), a defect (500) — come empty or as plain
 * text; a global middleware gives them the shape of their route.
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

/**
 * The path of a request target as the router reads it (for choosing the error shape): the path of an absolute-form
 * target, cut at `?`, `#` or `;`, duplicate slashes as one, percent-decoded, lower-cased, no trailing slash.
 */
const pathOf = (url: string): string => {
  let path = url
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) {
    try {
      path = new URL(url).pathname
    } catch {
      path = "/"
    }
  }
  const cut = path.search(/[?#;]/)
  // The router ignores case and a trailing slash, and matches percent-decoded paths.
  let routed = (cut === -1 ? path : path.slice(0, cut)).replace(/\/{2,}/g, "/")
  try {
    routed = decodeURIComponent(routed)
  } catch {
    // Not percent-encoding: the path as it is.
  }
  return routed.toLowerCase().replace(/(.)\/$/, "$1")
}

/** The error shapes: valet's, OpenAI's, JSON-RPC's. */
export type Shape = "valet" | "openai" | "json-rpc"

/**
 * Which shape a path's errors take: OpenAI's under `/v1/` (the facade), JSON-RPC's at an A2A endpoint
 * (`/a2a/<agent>`, whose SDK clients read a JSON-RPC error body whatever the status), valet's elsewhere.
 */
export const defaultShapeOf = (path: string): Shape =>
  path.startsWith("/v1/") ? "openai" : /^\/a2a\/[^/]+$/.test(path) ? "json-rpc" : "valet"

const openAiType = (status: number): string =>
  status === 401 ? "authentication_error" : status === 403 ? "permission_error" : status >= 500 ? "server_error" : "invalid_request_error"

/** An error response in the shape of the request's route. */
export const errorResponse = (
  request: HttpServerRequest.HttpServerRequest,
  status: number,
  tag: string,
  message: string,
  headers?: HttpServerResponse.Options["headers"],
  shapeOf: (path: string) => Shape = defaultShapeOf
): HttpServerResponse.HttpServerResponse => {
  const options = { status, ...(headers !== undefined ? { headers } : {}) }
  switch (shapeOf(pathOf(request.url))) {
    case "openai":
      return HttpServerResponse.jsonUnsafe(
        { error: { message, type: openAiType(status), param: null, code: status === 404 ? "not_found" : status === 401 ? "invalid_api_key" : null } },
        options
      )
    case "json-rpc":
      return HttpServerResponse.jsonUnsafe(
        { jsonrpc: "2.0", id: null, error: { code: status >= 500 ? -32603 : -32600, message: `${status >= 500 ? "Internal error" : "Invalid Request"}: ${message}` } },
        options
      )
    case "valet":
      return HttpServerResponse.jsonUnsafe({ _tag: tag, message }, options)
  }
}

const isJson = (body: HttpBody.HttpBody): boolean =>
  "contentType" in body && typeof body.contentType === "string" && /[/+]json\b/i.test(body.contentType)

const textOf = (body: HttpBody.HttpBody): string | undefined =>
  body._tag === "Uint8Array" ? (body.text ?? new TextDecoder().decode(body.body)) : undefined

const defaultMessage = (request: HttpServerRequest.HttpServerRequest, status: number): string => {
  switch (status) {
    case 404:
      return `no route ${request.method} ${request.url.split(/[?#]/)[0]!.slice(0, 200)}`
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
  response: HttpServerResponse.HttpServerResponse,
  shapeOf: (path: string) => Shape = defaultShapeOf
): HttpServerResponse.HttpServerResponse => {
  if (response.status < 400 || isJson(response.body) || response.body._tag === "Stream") return response
  const text = textOf(response.body)?.trim()
  const message = text !== undefined && text !== "" ? text.slice(0, 500) : defaultMessage(request, response.status)
  return errorResponse(request, response.status, tags[response.status] ?? "HttpError", message, response.headers, shapeOf)
}

/** The global middleware: the router's failures become responses, every error response JSON. */
export const layer = (shapeOf: (path: string) => Shape = defaultShapeOf): Layer.Layer<never, never, HttpRouter.HttpRouter> =>
  HttpRouter.middleware((httpEffect) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
    httpEffect.pipe(
      Effect.catchCause((cause) =>
        // A client that went away needs no answer: its interruption goes on as it is.
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.map(HttpServerError.causeResponse(cause), ([response]) => response)
      ),
      Effect.map((response) => shape(request, response, shapeOf))
    )), { global: true })

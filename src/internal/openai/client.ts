/**
 * One attempt of an OpenAI-compatible call: build the HTTP request, send it, decode the answer (JSON or SSE).
 * Retries, timeouts and the in-flight cap are added around it by `../resilience.ts`.
 */
import * as Sse from "@effect/experimental/Sse"
import { type HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import { Chunk, Clock, Effect, Either, ParseResult, Redacted, Schema, Stream } from "effect"
import type * as Model from "../../Model.js"
import * as ModelError from "../../ModelError.js"
import * as Decode from "./decode.js"
import * as Errors from "./errors.js"
import * as Encode from "./request.js"
import * as Wire from "./wire.js"

/** Where and as whom to call. */
export interface Endpoint {
  /** The API base, e.g. `http://127.0.0.1:8000/v1` (no trailing slash). */
  readonly apiBase: string
  readonly model: string
  readonly apiKey: Redacted.Redacted<string> | undefined
  readonly headers: Readonly<Record<string, string>>
}

/**
 * The API base of a base URL: a bare origin (`http://host:8000`) gets `/v1`, anything with a path is used as it
 * is (`http://host:8000/v1`, `https://host/openai/v1`), so both spellings users copy from server docs work.
 */
export const apiBaseOf = (baseUrl: string): string => {
  const trimmed = baseUrl.trim().replace(/\/+$/, "")
  try {
    const url = new URL(trimmed)
    return url.pathname === "" || url.pathname === "/" ? `${trimmed}/v1` : trimmed
  } catch {
    return trimmed
  }
}

/** The server root of an API base (for `/health`): the base without a trailing `/v1`. */
export const rootOf = (apiBase: string): string => apiBase.replace(/\/v1$/, "")

const decodeChatCompletion = Schema.decodeUnknownEither(Wire.ChatCompletion)
const decodeCompletion = Schema.decodeUnknownEither(Wire.Completion)
const decodeChatChunk = Schema.decodeUnknownEither(Wire.ChatChunk)
const decodeCompletionChunk = Schema.decodeUnknownEither(Wire.CompletionChunk)
const decodeModelList = Schema.decodeUnknownEither(Wire.ModelList)

const parseJson = (text: string): Either.Either<unknown, string> => {
  try {
    return Either.right(JSON.parse(text))
  } catch (error) {
    return Either.left(error instanceof Error ? error.message : String(error))
  }
}

const schemaMessage = (error: ParseResult.ParseError): string => ParseResult.TreeFormatter.formatErrorSync(error)

/** Whether a decoded JSON value is an error object (either shape) rather than an answer. */
const isErrorBody = (json: unknown): boolean =>
  typeof json === "object" && json !== null &&
  (("error" in json && (json as { error: unknown }).error !== null && !("choices" in json)) ||
    (json as { object?: unknown }).object === "error")

const headersOf = (endpoint: Endpoint, stream: boolean): Record<string, string> => {
  const headers: Record<string, string> = { ...endpoint.headers }
  if (endpoint.apiKey !== undefined) headers.authorization = `Bearer ${Redacted.value(endpoint.apiKey)}`
  headers.accept = stream ? "text/event-stream" : "application/json"
  return headers
}

/** Reads a non-2xx answer's body (best effort: a broken body still gives a typed error) and maps it. */
export const failure = (
  response: HttpClientResponse.HttpClientResponse,
  model: string
): Effect.Effect<never, ModelError.ModelError> =>
  Effect.flatMap(
    Effect.orElseSucceed(response.text, () => ""),
    (body) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.fail(Errors.fromResponse({ status: response.status, headers: response.headers, body, model, now })))
  )

/** Sends a request; transport failures are `Transport` (or `InvalidRequest` for a bad URL). */
export const send = (
  client: HttpClient.HttpClient,
  request: HttpClientRequest.HttpClientRequest
): Effect.Effect<HttpClientResponse.HttpClientResponse, ModelError.ModelError> =>
  Effect.mapError(client.execute(request), (error) => Errors.fromHttpClientError(error, request.url))

const readText = (
  response: HttpClientResponse.HttpClientResponse,
  url: string
): Effect.Effect<string, ModelError.ModelError> =>
  Effect.mapError(response.text, (error) => Errors.fromHttpClientError(error, url))

/** Decodes a JSON answer: an error body becomes its typed error, anything else that does not fit is malformed. */
const decodeAnswer = <A>(
  body: string,
  decode: (u: unknown) => Either.Either<A, ParseResult.ParseError>,
  what: string,
  model: string
): Either.Either<A, ModelError.ModelError> => {
  const json = parseJson(body)
  if (Either.isLeft(json)) return Either.left(Errors.malformed(`${what} is not JSON: ${json.left}`, body))
  if (isErrorBody(json.right)) {
    const fields = Errors.errorFields(json.right)
    if (fields !== undefined) return Either.left(Errors.fromStreamedError(fields, model, body))
  }
  const decoded = decode(json.right)
  return Either.isLeft(decoded)
    ? Either.left(Errors.malformed(`${what} does not match the protocol: ${schemaMessage(decoded.left)}`, body))
    : Either.right(decoded.right)
}

/** A model call against one endpoint: one attempt, no retries. */
export interface Attempt {
  readonly generate: (request: Model.Request) => Effect.Effect<Model.Response, ModelError.ModelError>
  readonly stream: (request: Model.Request) => Stream.Stream<Model.Chunk, ModelError.ModelError>
}

/** One-attempt calls of `endpoint` through `client`. */
export const makeAttempt = (client: HttpClient.HttpClient, endpoint: Endpoint): Attempt => {
  const build = (request: Model.Request, stream: boolean) => {
    const kind = Encode.endpointOf(request)
    const url = `${endpoint.apiBase}/${kind === "chat" ? "chat/completions" : "completions"}`
    const http = HttpClientRequest.post(url, {
      headers: headersOf(endpoint, stream),
      body: undefined
    }).pipe(HttpClientRequest.bodyUnsafeJson(Encode.encode(request, { model: endpoint.model, stream })))
    return { kind, url, http }
  }

  const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> =>
    Effect.suspend(() => {
      const { http, kind, url } = build(request, false)
      return Effect.flatMap(send(client, http), (response) => {
        if (response.status < 200 || response.status >= 300) return failure(response, endpoint.model)
        return Effect.flatMap(readText(response, url), (body) => {
          const decoded = kind === "chat"
            ? Either.map(
              decodeAnswer(body, decodeChatCompletion, "the chat completion", endpoint.model),
              (wire) => Decode.chatResponse(wire, endpoint.model)
            )
            : Either.map(
              decodeAnswer(body, decodeCompletion, "the completion", endpoint.model),
              (wire) => Decode.completionResponse(wire, endpoint.model)
            )
          return Either.isRight(decoded) ? Effect.succeed(decoded.right) : Effect.fail(decoded.left)
        })
      })
    })

  const stream = (request: Model.Request): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
    Stream.unwrap(Effect.suspend(() => {
      const { http, kind, url } = build(request, true)
      return Effect.flatMap(send(client, http), (response) => {
        if (response.status < 200 || response.status >= 300) return failure(response, endpoint.model)
        const contentType = response.headers["content-type"] ?? ""
        if (contentType.includes("application/json")) {
          // A server that answers a stream request with one JSON body: an error, or not a stream at all.
          return Effect.flatMap(readText(response, url), (body) => {
            const json = parseJson(body)
            const fields = Either.isRight(json) && isErrorBody(json.right) ? Errors.errorFields(json.right) : undefined
            return Effect.fail(
              fields !== undefined
                ? Errors.fromStreamedError(fields, endpoint.model, body)
                : Errors.malformed(`expected an event stream from ${url}, got ${contentType}`, body)
            )
          })
        }
        return Effect.succeed(events(response, url, kind, endpoint.model))
      })
    }))

  return { generate, stream }
}

/** The chunks of an SSE answer. The body is read to its end (so the connection can be reused). */
const events = (
  response: HttpClientResponse.HttpClientResponse,
  url: string,
  kind: Encode.Endpoint,
  model: string
): Stream.Stream<Model.Chunk, ModelError.ModelError> => {
  const decoder = new Decode.ChunkDecoder(model)
  let done = false
  let count = 0
  const onEvent = (event: Sse.Event, out: Array<Model.Chunk>): ModelError.ModelError | undefined => {
    if (done) return undefined
    const data = event.data
    if (data === "[DONE]") {
      done = true
      decoder.end(out)
      return undefined
    }
    if (data === "") return undefined
    count++
    const json = parseJson(data)
    if (Either.isLeft(json)) return Errors.malformed(`event ${count} of the stream is not JSON: ${json.left}`, data)
    if (isErrorBody(json.right)) {
      const fields = Errors.errorFields(json.right)
      if (fields !== undefined) return Errors.fromStreamedError(fields, model, data)
    }
    if (kind === "chat") {
      const decoded = decodeChatChunk(json.right)
      if (Either.isLeft(decoded)) {
        return Errors.malformed(`event ${count} of the stream does not match the protocol: ${schemaMessage(decoded.left)}`, data)
      }
      decoder.chat(decoded.right, out)
    } else {
      const decoded = decodeCompletionChunk(json.right)
      if (Either.isLeft(decoded)) {
        return Errors.malformed(`event ${count} of the stream does not match the protocol: ${schemaMessage(decoded.left)}`, data)
      }
      decoder.completion(decoded.right, out)
    }
    return undefined
  }
  return response.stream.pipe(
    Stream.mapError((error) => Errors.fromHttpClientError(error, url)),
    Stream.decodeText(),
    Stream.pipeThroughChannelOrFail(Sse.makeChannel()),
    Stream.mapChunksEffect((events) => {
      const out: Array<Model.Chunk> = []
      for (const event of events) {
        const error = onEvent(event, out)
        if (error !== undefined) return Effect.fail(error)
      }
      return Effect.succeed(Chunk.unsafeFromArray(out))
    }),
    Stream.concat(Stream.suspend(() =>
      done ? Stream.empty : Stream.fail(
        new ModelError.Transport({
          message: `the stream from ${url} ended before [DONE] after ${count} events: the connection was cut or the server stopped`
        })
      )
    ))
  )
}

/** `GET /models`: the models the server serves. */
export const listModels = (
  client: HttpClient.HttpClient,
  endpoint: Endpoint
): Effect.Effect<Wire.ModelList, ModelError.ModelError> =>
  Effect.suspend(() => {
    const url = `${endpoint.apiBase}/models`
    return Effect.flatMap(send(client, HttpClientRequest.get(url, { headers: headersOf(endpoint, false) })), (response) => {
      if (response.status < 200 || response.status >= 300) return failure(response, endpoint.model)
      return Effect.flatMap(readText(response, url), (body) => {
        const decoded = decodeAnswer(body, decodeModelList, "the model list", endpoint.model)
        return Either.isRight(decoded) ? Effect.succeed(decoded.right) : Effect.fail(decoded.left)
      })
    })
  })

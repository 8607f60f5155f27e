/**
 * One attempt of an OpenAI-compatible call: build the HTTP request, send it, decode the answer (JSON or SSE).
 * Retries, timeouts and the in-flight cap are added around it by `../resilience.ts`.
 */
import * as Sse from "@effect/experimental/Sse"
import { HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse, HttpTraceContext } from "@effect/platform"
import { Cause, Channel, Chunk, Clock, Effect, Either, ExecutionStrategy, Exit, ParseResult, Redacted, Schema, Scope, Stream } from "effect"
import type * as Model from "../../../core/Model.js"
import * as ModelError from "../../../core/ModelError.js"
import type * as Resilience from "../resilience.js"
import { watchdog } from "../resilience.js"
import * as Decode from "./decode.js"
import * as Errors from "./errors.js"
import * as FastCheck from "./fastCheck.js"
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

/**
 * The client without `@effect/platform`'s span per HTTP request: with its attributes it cost ~150 µs of CPU per
 * request on loopback, as much as the rest of valet's own work on a call. The model call has its own span
 * (`valet/OpenAiCompatible.generate` / `.stream`, `valet/Vllm.*`), whose context still reaches the server in
 * `traceparent` / `b3` headers (vLLM's OpenTelemetry tracing picks them up).
 */
export const quiet = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  client.pipe(
    HttpClient.withTracerDisabledWhen(() => true),
    HttpClient.mapRequestEffect((request) =>
      Effect.map(
        Effect.option(Effect.currentSpan),
        (span) => (span._tag === "Some" ? HttpClientRequest.setHeaders(request, HttpTraceContext.toHeaders(span.value)) : request)
      )
    )
  )

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

/** A streamed request in flight: its response and its watchdog. */
export interface Opened {
  readonly response: HttpClientResponse.HttpClientResponse
  readonly watchdog: Resilience.Watchdog
}

/**
 * Sends a streamed request in a scope of its own (closed, aborting the request, when the stream's scope closes:
 * on completion, failure or interruption) with a watchdog that closes it early when the server goes silent or
 * the call's deadline passes. `client` must be `HttpClient.withScope(...)`.
 */
export const openStream = (
  client: HttpClient.HttpClient.With<HttpClientError.HttpClientError, Scope.Scope>,
  request: HttpClientRequest.HttpClientRequest,
  control: Resilience.StreamControl
): Effect.Effect<Opened, ModelError.ModelError, Scope.Scope> =>
  Effect.gen(function*() {
    const requestScope = yield* Scope.fork(yield* Effect.scope, ExecutionStrategy.sequential)
    const dog = yield* watchdog(control, Scope.close(requestScope, Exit.void))
    const response = yield* client.execute(request).pipe(
      Scope.extend(requestScope),
      Effect.mapError((error) => dog.explain(Errors.fromHttpClientError(error, request.url)))
    )
    return { response, watchdog: dog }
  })

/** Turns the reads of a body into chunks: pushes them to `out`, or answers the error that ends the stream. */
export interface BodyReader {
  readonly read: (bytes: Uint8Array, out: Array<Model.Chunk>) => ModelError.ModelError | undefined
  /** The body ended: the last chunks, or the error of a body that should not have ended there. */
  readonly end: (out: Array<Model.Chunk>) => ModelError.ModelError | undefined
}

type ChunkChannel = Channel.Channel<Chunk.Chunk<Model.Chunk>, unknown, ModelError.ModelError, unknown, unknown, unknown>

/**
 * The chunks of a streamed body as one channel stage over the body (no `mapError` / `mapChunks` / `concat`
 * stages, each of which costs microseconds per read). The body is read to its end, so the connection can be
 * reused; every read feeds the watchdog; `control.onEmit` hears of every chunk handed on.
 */
export const readBody = (opened: Opened, url: string, control: Resilience.StreamControl, reader: BodyReader): ChunkChannel => {
  const { response, watchdog: dog } = opened
  type Reader = Channel.Channel<
    Chunk.Chunk<Model.Chunk>,
    Chunk.Chunk<Uint8Array>,
    ModelError.ModelError,
    HttpClientError.HttpClientError,
    unknown,
    unknown
  >
  const emit = (out: Array<Model.Chunk>, then: Reader): Reader => {
    if (out.length === 0) return then
    control.onEmit()
    return Channel.zipRight(Channel.write(Chunk.unsafeFromArray(out)), then)
  }
  const loop: Reader = Channel.readWithCause({
    onInput: (reads: Chunk.Chunk<Uint8Array>) => {
      dog.touch()
      const out: Array<Model.Chunk> = []
      for (const bytes of reads) {
        const error = reader.read(bytes, out)
        if (error !== undefined) return Channel.fail(error)
      }
      return emit(out, loop)
    },
    onFailure: (cause: Cause.Cause<HttpClientError.HttpClientError>) =>
      Channel.failCause(Cause.map(cause, (error) => dog.explain(Errors.fromHttpClientError(error, url)))),
    onDone: () => {
      const out: Array<Model.Chunk> = []
      const error = reader.end(out)
      return error !== undefined ? Channel.fail(error) : emit(out, Channel.void)
    }
  })
  return Channel.pipeTo(Stream.toChannel(response.stream), loop)
}

/** A model call against one endpoint: one attempt, no retries. */
export type Attempt = Resilience.Attempt

/** One-attempt calls of `endpoint` through `client`. */
export const makeAttempt = (client: HttpClient.HttpClient, endpoint: Endpoint): Attempt => {
  const scoped = HttpClient.withScope(client)
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

  const stream = (
    request: Model.Request,
    control: Resilience.StreamControl
  ): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
    Stream.fromChannel(Channel.unwrapScoped(Effect.suspend(() => {
      const { http, kind, url } = build(request, true)
      return Effect.flatMap(openStream(scoped, http, control), (opened): Effect.Effect<ChunkChannel, ModelError.ModelError> => {
        const { response, watchdog: dog } = opened
        if (response.status < 200 || response.status >= 300) return Effect.mapError(failure(response, endpoint.model), dog.explain)
        const contentType = response.headers["content-type"] ?? ""
        if (contentType.includes("application/json")) {
          // A server that answers a stream request with one JSON body: an error, or not a stream at all.
          return Effect.flatMap(Effect.mapError(readText(response, url), dog.explain), (body) => {
            const json = parseJson(body)
            const fields = Either.isRight(json) && isErrorBody(json.right) ? Errors.errorFields(json.right) : undefined
            return Effect.fail(
              fields !== undefined
                ? Errors.fromStreamedError(fields, endpoint.model, body)
                : Errors.malformed(`expected an event stream from ${url}, got ${contentType}`, body)
            )
          })
        }
        return Effect.succeed(readBody(opened, url, control, sseReader(url, kind, endpoint.model)))
      })
    })))

  return { generate, stream }
}

/**
 * Feeds `Sse.makeParser` a piece of text a line at a time. Its scan restarts at the start of its buffer for every
 * line of a fed piece (@effect/experimental 0.61: the quadratic behaviour eventsource-parser fixed in 3.0.1): a
 * 40 kB read of 200 events took ~150 ms fed whole; line by line it is ~0.5–0.9 ms whatever the read size, less
 * than feeding small reads whole or an event at a time. Cutting after "\n" never splits a "\r\n" pair.
 */
export const feedLines = (parser: Sse.Parser, text: string): Sse.SseError | undefined => {
  let start = 0
  for (;;) {
    const newline = text.indexOf("\n", start)
    if (newline < 0) break
    const error = parser.feed(text.slice(start, newline + 1))
    if (error !== undefined) return error
    start = newline + 1
  }
  return start < text.length ? parser.feed(text.slice(start)) : undefined
}

/** Reads an SSE body with `@effect/experimental`'s `Sse` parser, in step with the body (no extra fiber or queue). */
const sseReader = (url: string, kind: Encode.Endpoint, model: string): BodyReader => {
  const decoder = new Decode.ChunkDecoder(model)
  const text = new TextDecoder()
  let done = false
  let count = 0
  let failure: ModelError.ModelError | undefined = undefined
  let out: Array<Model.Chunk> = []
  const mismatch = (error: ParseResult.ParseError, data: string) => {
    failure = Errors.malformed(`event ${count} of the stream does not match the protocol: ${schemaMessage(error)}`, data)
  }
  // Called once per event: kept free of per-call closures and wrappers.
  const onEvent = (event: Sse.AnyEvent): void => {
    if (done || failure !== undefined || event._tag !== "Event") return
    const data = event.data
    if (data === "[DONE]") {
      done = true
      decoder.end(out)
      return
    }
    if (data === "") return
    count++
    let json: unknown
    try {
      json = JSON.parse(data)
    } catch (error) {
      failure = Errors.malformed(`event ${count} of the stream is not JSON: ${error instanceof Error ? error.message : String(error)}`, data)
      return
    }
    if (isErrorBody(json)) {
      const fields = Errors.errorFields(json)
      if (fields !== undefined) {
        failure = Errors.fromStreamedError(fields, model, data)
        return
      }
    }
    // The common shapes skip the schema (see fastCheck.ts); anything else is decoded by it.
    if (kind === "chat") {
      if (FastCheck.isChatChunk(json)) return decoder.chat(json, out)
      const decoded = decodeChatChunk(json)
      if (Either.isLeft(decoded)) mismatch(decoded.left, data)
      else decoder.chat(decoded.right, out)
    } else {
      if (FastCheck.isCompletionChunk(json)) return decoder.completion(json, out)
      const decoded = decodeCompletionChunk(json)
      if (Either.isLeft(decoded)) mismatch(decoded.left, data)
      else decoder.completion(decoded.right, out)
    }
  }
  const parser = Sse.makeParser(onEvent)
  return {
    read: (bytes, into) => {
      out = into
      const decoded = text.decode(bytes, { stream: true })
      const tooLarge = feedLines(parser, decoded)
      if (tooLarge !== undefined) return Errors.malformed(`the stream from ${url}: ${tooLarge.message}`, decoded)
      return failure
    },
    end: () =>
      done ? undefined : new ModelError.Transport({
        message: `the stream from ${url} ended before [DONE] after ${count} events: the connection was cut or the server stopped`
      })
  }
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

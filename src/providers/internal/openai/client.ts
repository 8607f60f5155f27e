/**
 * One attempt of an OpenAI-compatible call: build the HTTP request, send it, decode the answer (JSON or SSE).
 * Retries, timeouts and the in-flight cap are added around it by `../resilience.ts`.
 */
import { Cause, Channel, Clock, Context, Effect, Exit, Pull, Redacted, Result, Schema, Scope, Stream, Tracer } from "effect"
import type { NonEmptyReadonlyArray } from "effect/Array"
import { Sse } from "effect/encoding"
import { HttpClient, type HttpClientError, HttpClientRequest, type HttpClientResponse, HttpTraceContext } from "effect/http"
import type * as Model from "../../../core/Model.js"
import * as ModelError from "../../../core/ModelError.js"
import type * as Resilience from "../resilience.js"
import { watchdog } from "../resilience.js"
import * as Decode from "./decode.js"
import * as Errors from "./errors.js"
import * as FastCheck from "./fastCheck.js"
import * as Encode from "./request.js"
import { parseJsonText } from "../../../core/internal/json.js"
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

// The common shapes skip the schema (see fastCheck.ts); anything else is decoded by it.
const decodeChatCompletionSchema = Schema.decodeUnknownResult(Wire.ChatCompletion)
const decodeCompletionSchema = Schema.decodeUnknownResult(Wire.Completion)
const decodeChatCompletion = (u: unknown): Result.Result<Wire.ChatCompletion, Schema.SchemaError> =>
  FastCheck.isChatCompletion(u) ? Result.succeed(u) : decodeChatCompletionSchema(u)
const decodeCompletion = (u: unknown): Result.Result<Wire.Completion, Schema.SchemaError> =>
  FastCheck.isCompletion(u) ? Result.succeed(u) : decodeCompletionSchema(u)
const decodeChatChunk = Schema.decodeUnknownResult(Wire.ChatChunk)
const decodeCompletionChunk = Schema.decodeUnknownResult(Wire.CompletionChunk)
const decodeModelList = Schema.decodeUnknownResult(Wire.ModelList)

const parseJson = parseJsonText

/** A schema failure as text: one line per issue, each with the path it is at. */
const schemaMessage = (error: Schema.SchemaError): string => error.message

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

const tracerDisabled = () => true

/**
 * The client without `effect/http`'s span per HTTP request: on effect 3 that span with its attributes cost
 * ~150 µs of CPU per request on loopback, as much as the rest of valet's own work on a call. The model call has
 * its own span (`valet/OpenAiCompatible.generate` / `.stream`, `valet/Vllm.*`), whose context still reaches the
 * server in `traceparent` / `b3` headers (vLLM's OpenTelemetry tracing picks them up). Effect 4 reads the switch
 * (`HttpClient.TracerDisabledWhen`) from the fiber at each request, so it is provided around each execution.
 */
export const quiet = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  client.pipe(
    HttpClient.mapRequestEffect((request) =>
      Effect.withFiber((fiber) => {
        const span = Context.getOrUndefined(fiber.context, Tracer.ParentSpan)
        return Effect.succeed(
          span !== undefined && span._tag === "Span"
            ? HttpClientRequest.setHeaders(request, HttpTraceContext.toHeaders(span))
            : request
        )
      })
    ),
    HttpClient.transformResponse(Effect.provideService(HttpClient.TracerDisabledWhen, tracerDisabled))
  )

/** How much of an error body (or of a body that is not what was asked for) is read: enough for any error object. */
export const errorBodyBytes = 64 * 1024

/**
 * Reads a non-2xx answer's body (its first `errorBodyBytes` only; best effort: a broken body still gives a typed
 * error) and maps it.
 */
export const failure = (
  response: HttpClientResponse.HttpClientResponse,
  model: string
): Effect.Effect<never, ModelError.ModelError> =>
  Effect.flatMap(
    Effect.orElseSucceed(readLimited(response, response.request.url, { limit: errorBodyBytes }), () => ""),
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

const utf8 = new TextDecoder()

const joined = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  if (parts.length === 1) return parts[0]!
  let size = 0
  for (const part of parts) size += part.length
  const out = new Uint8Array(size)
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

/** The start of some bytes as text, for an error's preview (only the first pieces are copied). */
const startOf = (parts: ReadonlyArray<Uint8Array>): string => {
  const wanted = 4 * Errors.bodyPreviewChars
  const first: Array<Uint8Array> = []
  let size = 0
  for (const part of parts) {
    if (size >= wanted) break
    first.push(part.length > wanted - size ? part.subarray(0, wanted - size) : part)
    size += first[first.length - 1]!.length
  }
  return utf8.decode(joined(first))
}

/**
 * Reads a body of at most `limit` bytes. With `option` (the name of the cap, for the message), a larger body fails
 * with `MalformedResponse` — at once when its `Content-Length` says so, else as soon as the bytes read pass the cap;
 * without it, a larger body is cut at the cap (error bodies and previews). Either way the rest is never read: the
 * request is aborted. A body whose `Content-Length` is within the cap is read in one piece (the HTTP framing
 * keeps it to that length), the common case and the cheapest.
 */
export const readLimited = (
  response: HttpClientResponse.HttpClientResponse,
  url: string,
  cap: { readonly limit: number; readonly option?: string | undefined; readonly what?: string | undefined }
): Effect.Effect<string, ModelError.ModelError> => {
  const header = response.headers["content-length"]
  const declared = header !== undefined && header !== "" ? Number(header) : NaN
  if (declared <= cap.limit) return readText(response, url)
  // Over the cap by its own account: a failure at the first bytes, which are kept for the preview.
  const limit = cap.option !== undefined && declared > cap.limit ? 0 : cap.limit
  return Effect.suspend(() => {
    const parts: Array<Uint8Array> = []
    let total = 0
    return Stream.runForEachWhile(
      Stream.mapError(response.stream, (error) => Errors.fromHttpClientError(error, url)),
      (bytes): Effect.Effect<boolean, ModelError.ModelError> => {
        if (total + bytes.length <= limit) {
          parts.push(bytes)
          total += bytes.length
          return Effect.succeed(true)
        }
        if (cap.option === undefined) {
          parts.push(bytes.subarray(0, limit - total))
          total = limit
          return Effect.succeed(false)
        }
        const what = `${cap.what ?? `the answer of ${url}`}${declared > cap.limit ? ` (Content-Length ${declared})` : ""}`
        return Effect.fail(Errors.tooLarge(what, cap.option, cap.limit, startOf([...parts, bytes])))
      }
    ).pipe(Effect.map(() => utf8.decode(joined(parts))))
  })
}

/** Decodes a JSON answer: an error body becomes its typed error, anything else that does not fit is malformed. */
const decodeAnswer = <A>(
  body: string,
  decode: (u: unknown) => Result.Result<A, Schema.SchemaError>,
  what: string,
  model: string
): Result.Result<A, ModelError.ModelError> => {
  const json = parseJson(body)
  if (Result.isFailure(json)) return Result.fail(Errors.malformed(`${what} is not JSON: ${json.failure}`, body))
  if (isErrorBody(json.success)) {
    const fields = Errors.errorFields(json.success)
    if (fields !== undefined) return Result.fail(Errors.fromStreamedError(fields, model, body))
  }
  const decoded = decode(json.success)
  return Result.isFailure(decoded)
    ? Result.fail(Errors.malformed(`${what} does not match the protocol: ${schemaMessage(decoded.failure)}`, body))
    : Result.succeed(decoded.success)
}

const fromResult = <A>(result: Result.Result<A, ModelError.ModelError>): Effect.Effect<A, ModelError.ModelError> =>
  Result.isSuccess(result) ? Effect.succeed(result.success) : Effect.fail(result.failure)

/** A streamed request in flight: its response and its watchdog. */
export interface Opened {
  readonly response: HttpClientResponse.HttpClientResponse
  readonly watchdog: Resilience.Watchdog
}

/**
 * Sends a streamed request in a scope of its own, forked from `scope` (the stream's: closed, aborting the request,
 * on completion, failure or interruption), with a watchdog that closes it early when the server goes silent or
 * the call's deadline passes. `client` must be `HttpClient.withScope(...)`.
 */
export const openStream = (
  client: HttpClient.HttpClient.With<HttpClientError.HttpClientError, Scope.Scope>,
  request: HttpClientRequest.HttpClientRequest,
  control: Resilience.StreamControl,
  scope: Scope.Scope
): Effect.Effect<Opened, ModelError.ModelError> =>
  Effect.suspend(() => {
    const requestScope = Scope.forkUnsafe(scope, "sequential")
    return Effect.flatMap(watchdog(control, Scope.close(requestScope, Exit.void), scope), (dog) =>
      client.execute(request).pipe(
        Scope.provide(requestScope),
        Effect.mapError((error) => dog.explain(Errors.fromHttpClientError(error, request.url))),
        Effect.map((response): Opened => ({ response, watchdog: dog }))
      ))
  })

/** The media type of a `Content-Type` header, lower case, without its parameters (`""` when there is none). */
export const mediaTypeOf = (contentType: string): string => {
  const semicolon = contentType.indexOf(";")
  return (semicolon >= 0 ? contentType.slice(0, semicolon) : contentType).trim().toLowerCase()
}

/** Turns the reads of a body into chunks: pushes them to `out`, or answers the error that ends the stream. */
export interface BodyReader {
  readonly read: (bytes: Uint8Array, out: Array<Model.Chunk>) => ModelError.ModelError | undefined
  /**
   * How many events (SSE events with data, non-blank lines) the reader has parsed so far: the watchdog hears
   * of progress only when this grows, so comments, blank lines and whitespace keep no attempt alive.
   */
  readonly events: () => number
  /** The body ended: the last chunks, or the error of a body that should not have ended there. */
  readonly end: (out: Array<Model.Chunk>) => ModelError.ModelError | undefined
}

/** What a stream attempt's pull answers: the next chunks, a `ModelError`, or the end. */
export type ChunkPull = Pull.Pull<NonEmptyReadonlyArray<Model.Chunk>, ModelError.ModelError, void>

/**
 * The chunks of a streamed body as one pull over the body's pull (no `mapError` / `mapChunks` / `concat`
 * stages, each of which cost microseconds per read on effect 3). The body is read to its end, so the connection
 * can be reused; every read that completes an event feeds the watchdog; more than `limits.maxStreamBytes` in all
 * fails the stream (and aborts the request); `control.onEmit` hears of every chunk handed on.
 */
export const readBody = (
  opened: Opened,
  url: string,
  control: Resilience.StreamControl,
  reader: BodyReader,
  scope: Scope.Scope,
  limits: Resilience.Limits
): Effect.Effect<ChunkPull> => {
  const { response, watchdog: dog } = opened
  return Effect.map(Channel.toPullScoped(Stream.toChannel(response.stream), scope), (upstream): ChunkPull => {
    let ended = false
    let total = 0
    const emit = (out: Array<Model.Chunk>): ChunkPull => {
      control.onEmit()
      return Effect.succeed(out as unknown as NonEmptyReadonlyArray<Model.Chunk>)
    }
    const onReads = (reads: NonEmptyReadonlyArray<Uint8Array>): ChunkPull => {
      const events = reader.events()
      const out: Array<Model.Chunk> = []
      for (const bytes of reads) {
        total += bytes.length
        if (total > limits.maxStreamBytes) {
          return Effect.fail(Errors.tooLarge(`the stream from ${url}`, "maxStreamBytes", limits.maxStreamBytes, ""))
        }
        const error = reader.read(bytes, out)
        if (error !== undefined) return Effect.fail(error)
      }
      if (reader.events() !== events) dog.touch()
      return out.length === 0 ? pull : emit(out)
    }
    const onEnd = (): ChunkPull => {
      ended = true
      const out: Array<Model.Chunk> = []
      const error = reader.end(out)
      if (error !== undefined) return Effect.fail(error)
      return out.length === 0 ? Cause.done() : emit(out)
    }
    const onFailure = (cause: Cause.Cause<HttpClientError.HttpClientError>): ChunkPull =>
      Effect.failCause(Cause.map(cause, (error) => dog.explain(Errors.fromHttpClientError(error, url))))
    const pull: ChunkPull = Effect.suspend(() =>
      ended ? Cause.done() : Pull.matchEffect(upstream, { onSuccess: onReads, onFailure, onDone: onEnd })
    )
    return pull
  })
}

/** A model call against one endpoint: one attempt, no retries. */
export type Attempt = Resilience.Attempt

/**
 * A stream whose pull is built when it starts, in its own scope: `open` sends the request and answers the pull
 * of its body. A failure of `open` (a refused request, a non-2xx answer) is the stream's failure.
 */
export const streamOf = (
  open: (scope: Scope.Scope) => Effect.Effect<ChunkPull, ModelError.ModelError>
): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
  Stream.fromChannel(Channel.fromTransform((_upstream, scope) => open(scope)))

/** An answer with no choice at all is no answer (a choice with empty content is one). */
const withChoices = <A extends { readonly choices: ReadonlyArray<unknown> }>(
  what: string,
  body: string
) =>
(wire: A): Result.Result<A, ModelError.ModelError> =>
  wire.choices.length > 0
    ? Result.succeed(wire)
    : Result.fail(Errors.malformed(`${what} has no choice (an empty "choices" list): there is no answer`, body))

/** One-attempt calls of `endpoint` through `client`, reading no body past `limits`. */
export const makeAttempt = (client: HttpClient.HttpClient, endpoint: Endpoint, limits: Resilience.Limits): Attempt => {
  const scoped = HttpClient.withScope(client)
  const build = (request: Model.Request, stream: boolean) => {
    const kind = Encode.endpointOf(request)
    const url = `${endpoint.apiBase}/${kind === "chat" ? "chat/completions" : "completions"}`
    const http = HttpClientRequest.post(url, { headers: headersOf(endpoint, stream) }).pipe(
      HttpClientRequest.bodyJsonUnsafe(Encode.encode(request, { model: endpoint.model, stream }))
    )
    return { kind, url, http }
  }

  const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> =>
    Effect.suspend(() => {
      const invalid = Encode.contentProblem(request)
      if (invalid !== undefined) return Effect.fail(invalid)
      const { http, kind, url } = build(request, false)
      return Effect.flatMap(send(client, http), (response) => {
        if (response.status < 200 || response.status >= 300) return failure(response, endpoint.model)
        const what = kind === "chat" ? "the chat completion" : "the completion"
        return Effect.flatMap(readLimited(response, url, { limit: limits.maxResponseBytes, option: "maxResponseBytes", what: `${what} from ${url}` }), (body) =>
          fromResult(
            kind === "chat"
              ? Result.map(
                Result.flatMap(decodeAnswer(body, decodeChatCompletion, what, endpoint.model), withChoices(what, body)),
                (wire) => Decode.chatResponse(wire, endpoint.model)
              )
              : Result.map(
                Result.flatMap(decodeAnswer(body, decodeCompletion, what, endpoint.model), withChoices(what, body)),
                (wire) => Decode.completionResponse(wire, endpoint.model)
              )
          ))
      })
    })

  const stream = (
    request: Model.Request,
    control: Resilience.StreamControl
  ): Stream.Stream<Model.Chunk, ModelError.ModelError> =>
    streamOf((scope) =>
      Effect.suspend(() => {
        const invalid = Encode.contentProblem(request)
        if (invalid !== undefined) return Effect.fail(invalid)
        const { http, kind, url } = build(request, true)
        return Effect.flatMap(openStream(scoped, http, control, scope), (opened): Effect.Effect<ChunkPull, ModelError.ModelError> => {
          const { response, watchdog: dog } = opened
          if (response.status < 200 || response.status >= 300) return Effect.mapError(failure(response, endpoint.model), dog.explain)
          const contentType = response.headers["content-type"] ?? ""
          const media = mediaTypeOf(contentType)
          if (media === "application/json" || media.endsWith("+json")) {
            // A server that answers a stream request with one JSON body: an error, or not a stream at all.
            const read = readLimited(response, url, { limit: limits.maxResponseBytes, option: "maxResponseBytes" })
            return Effect.flatMap(Effect.mapError(read, dog.explain), (body) => {
              const json = parseJson(body)
              const fields = Result.isSuccess(json) && isErrorBody(json.success) ? Errors.errorFields(json.success) : undefined
              return Effect.fail(
                fields !== undefined
                  ? Errors.fromStreamedError(fields, endpoint.model, body)
                  : Errors.malformed(`expected an event stream from ${url}, got ${contentType}`, body)
              )
            })
          }
          if (media !== "" && media !== "text/event-stream") {
            // A login page of a proxy, a load balancer's error page...: said as such, not parsed as SSE (which
            // would find no event and report a cut connection). Only the start is read, for the message.
            return Effect.flatMap(Effect.mapError(readLimited(response, url, { limit: errorBodyBytes }), dog.explain), (body) =>
              Effect.fail(Errors.malformed(`expected an event stream (text/event-stream) from ${url}, got ${contentType}`, body)))
          }
          return readBody(opened, url, control, sseReader(url, kind, endpoint.model, limits), scope, limits)
        })
      })
    )

  return { generate, stream }
}

/**
 * Reads an SSE body with `effect/encoding`'s `Sse` parser, in step with the body (no extra fiber, queue or
 * channel stage). Each read is fed whole: effect 4's parser is linear in its input (effect 3's restarted its scan
 * for every line of a fed piece, so reads had to be cut into lines first). An `event: error` ends the stream with
 * the server's message; a stream with no choice in it (no event at all, only `[DONE]`, only usage) is malformed;
 * one event may hold at most `limits.maxEventBytes`.
 */
export const sseReader = (url: string, kind: Encode.Endpoint, model: string, limits: Resilience.Limits): BodyReader => {
  const decoder = new Decode.ChunkDecoder(model)
  const text = new TextDecoder()
  let done = false
  let count = 0
  let head = ""
  let failure: ModelError.ModelError | undefined = undefined
  let out: Array<Model.Chunk> = []
  const mismatch = (error: Schema.SchemaError, data: string) => {
    failure = Errors.malformed(`event ${count} of the stream does not match the protocol: ${schemaMessage(error)}`, data)
  }
  // Called once per event: kept free of per-call closures and wrappers.
  const onEvent = (event: Sse.AnyEvent): void => {
    if (done || failure !== undefined || event._tag !== "Event") return
    const data = event.data
    if (event.event === "error") {
      count++
      failure = Errors.fromErrorEvent(data, model)
      return
    }
    if (data === "[DONE]") {
      count++
      done = true
      if (!decoder.sawChoice) {
        failure = Errors.malformed(`the stream from ${url} ended ([DONE]) without any choice: there is no answer`, head)
        return
      }
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
      if (Result.isFailure(decoded)) mismatch(decoded.failure, data)
      else decoder.chat(decoded.success, out)
    } else {
      if (FastCheck.isCompletionChunk(json)) return decoder.completion(json, out)
      const decoded = decodeCompletionChunk(json)
      if (Result.isFailure(decoded)) mismatch(decoded.failure, data)
      else decoder.completion(decoded.success, out)
    }
  }
  // Named events without data are dispatched too, so that a bare `event: error` is not lost.
  const parser = Sse.makeParser(onEvent, { maxEventSize: limits.maxEventBytes, dispatchEmptyNamedEvents: true })
  return {
    read: (bytes, into) => {
      out = into
      const decoded = text.decode(bytes, { stream: true })
      if (head.length < Errors.bodyPreviewChars) head += decoded.slice(0, Errors.bodyPreviewChars - head.length)
      const tooLarge = parser.feed(decoded)
      if (tooLarge !== undefined) {
        return Errors.tooLarge(`an event of the stream from ${url}`, "maxEventBytes", limits.maxEventBytes, decoded)
      }
      return failure
    },
    events: () => count,
    end: () =>
      done
        ? undefined
        : count === 0
        ? Errors.malformed(`the stream from ${url} ended without any event: there is no answer`, head)
        : new ModelError.Transport({
          message: `the stream from ${url} ended before [DONE] after ${count} events: the connection was cut or the server stopped`
        })
  }
}

/** `GET /models`: the models the server serves. */
export const listModels = (
  client: HttpClient.HttpClient,
  endpoint: Endpoint,
  limits: Resilience.Limits
): Effect.Effect<Wire.ModelList, ModelError.ModelError> =>
  Effect.suspend(() => {
    const url = `${endpoint.apiBase}/models`
    return Effect.flatMap(send(client, HttpClientRequest.get(url, { headers: headersOf(endpoint, false) })), (response) => {
      if (response.status < 200 || response.status >= 300) return failure(response, endpoint.model)
      const read = readLimited(response, url, { limit: limits.maxResponseBytes, option: "maxResponseBytes", what: `the model list from ${url}` })
      return Effect.flatMap(read, (body) =>
        fromResult(decodeAnswer(body, decodeModelList, "the model list", endpoint.model)))
    })
  })

const decodeEmbeddingList = Schema.decodeUnknownResult(Wire.EmbeddingList)

/** What `POST /embeddings` is sent beside the texts. */
export interface EmbeddingRequest {
  readonly encodingFormat: "float" | "base64"
  /** Sent as `dimensions` (OpenAI's text-embedding-3 and vLLM's Matryoshka models shorten their vectors). */
  readonly dimensions?: number | undefined
}

/** Base64 of float32 little-endian bytes, as numbers; `undefined` when it is not that. */
const floatsOfBase64 = (text: string): Array<number> | undefined => {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return undefined
  const bytes = Buffer.from(text, "base64")
  if (bytes.length % 4 !== 0) return undefined
  const out = new Array<number>(bytes.length / 4)
  for (let i = 0; i < out.length; i++) out[i] = bytes.readFloatLE(i * 4)
  return out
}

/**
 * The vectors of an embeddings answer, in the order of the inputs (by `index`, else by position); an answer whose
 * indexes are not each input once is malformed, naming the index. (Counts and dimensions are checked by
 * `EmbeddingModel.make`.)
 */
export const vectorsOf = (wire: Wire.EmbeddingList, body: string): Result.Result<Array<Array<number>>, ModelError.ModelError> => {
  const out: Array<Array<number> | undefined> = new Array(wire.data.length)
  for (let position = 0; position < wire.data.length; position++) {
    const entry = wire.data[position]!
    const index = entry.index ?? position
    if (!Number.isInteger(index) || index < 0 || index >= wire.data.length || out[index] !== undefined) {
      return Result.fail(Errors.malformed(`the embeddings answer has data[${position}].index ${index}: not each of indexes 0..${wire.data.length - 1} once`, body))
    }
    const vector = typeof entry.embedding === "string" ? floatsOfBase64(entry.embedding) : [...entry.embedding]
    if (vector === undefined) {
      return Result.fail(Errors.malformed(`the embedding of data[${position}] is a string but not base64 of float32 values`, body))
    }
    out[index] = vector
  }
  return Result.succeed(out as Array<Array<number>>)
}

/** `POST /embeddings`: one attempt, the vectors in the order of `texts`. */
export const embeddings = (
  client: HttpClient.HttpClient,
  endpoint: Endpoint,
  limits: Resilience.Limits,
  texts: ReadonlyArray<string>,
  request: EmbeddingRequest
): Effect.Effect<Array<Array<number>>, ModelError.ModelError> =>
  Effect.suspend(() => {
    const url = `${endpoint.apiBase}/embeddings`
    const http = HttpClientRequest.post(url, { headers: headersOf(endpoint, false) }).pipe(
      HttpClientRequest.bodyJsonUnsafe({
        model: endpoint.model,
        input: texts,
        encoding_format: request.encodingFormat,
        ...(request.dimensions !== undefined ? { dimensions: request.dimensions } : {})
      })
    )
    return Effect.flatMap(send(client, http), (response) => {
      if (response.status < 200 || response.status >= 300) return failure(response, endpoint.model)
      const read = readLimited(response, url, { limit: limits.maxResponseBytes, option: "maxResponseBytes", what: `the embeddings from ${url}` })
      return Effect.flatMap(read, (body) =>
        fromResult(Result.flatMap(decodeAnswer(body, decodeEmbeddingList, "the embeddings answer", endpoint.model), (wire) => vectorsOf(wire, body))))
    })
  })

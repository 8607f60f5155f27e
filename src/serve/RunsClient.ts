/**
 * A typed client of valet's runs routes (`RunsApi.group`), for an Effect app that talks to a valet server — or to
 * your own API that mounts the group under a prefix. It is derived from the group with `effect/http-api`'s
 * `HttpApiClient`, so its requests and answers are the routes' own schemas, and its errors the routes' typed errors.
 *
 * - `create`, `get`, `list`, `cancel`, `agents`: `POST /runs`, `GET /runs/:runId`, `GET /runs`,
 *   `POST /runs/:runId/cancel`, `GET /agents`.
 * - `events(runId, { after })`: `GET /runs/:runId/events` read from the response bytes with Effect's SSE decoder
 *   (`effect/encoding/Sse`), each event decoded with the `AgentEvent` schema. It ends after the run's
 *   `RunCompleted`; a run that failed fails it with `Runs.RunFailed` carrying the server's typed error (the
 *   `event: error`). When the connection drops first (or cannot be made: `isReconnectable`), it reconnects on the
 *   `reconnect` schedule sending `Last-Event-ID`, so each event comes once and in order; the schedule starts over
 *   after every event received.
 * - `stream(request)`: `POST /runs/stream`, decoded the same way. It does not reconnect: the server cancels a run
 *   whose streaming client goes away (read a started run with `events` to survive a dropped connection).
 * - `promise(options)`: the same client for code without Effect: promises, and `AsyncIterable`s of events.
 *
 * Errors: the routes' own (`Runs.UnknownAgent`, `Runs.RunNotFound`, `Runs.TooManyRuns`, `Runs.InvalidRunRequest`,
 * `RunsApi.BadRequest`, and for `events` `Runs.TooManyEventStreams`: the server follows `maxEventStreams` runs at
 * once), `Unauthorized` (401: no token or the wrong one), `ServerError` (any other answer the routes do not declare:
 * 413, 5xx, a route that is not there…), `Disconnected` (an event stream that ended before its `RunCompleted`,
 * reconnections included), and Effect's `HttpClientError` (the server cannot be reached) and `SchemaError` (an answer
 * that does not fit its schema).
 *
 * @example
 * ```ts
 * import { Effect, Layer, Stream } from "effect"
 * import { FetchHttpClient } from "effect/http"
 * import * as RunsClient from "valet/RunsClient"
 *
 * const program = Effect.gen(function*() {
 *   const client = yield* RunsClient.RunsClient
 *   const { runId } = yield* client.create({ agent: "assistant", input: "Capital of France?" })
 *   // Every event of the run, once each, even across a dropped connection; ends after `RunCompleted`.
 *   const answer = yield* client.events(runId).pipe(
 *     Stream.filter((event) => event._tag === "TextDelta"),
 *     Stream.map((event) => event.text),
 *     Stream.mkString
 *   )
 *   const run = yield* client.get(runId)
 *   return { answer, status: run.status }
 * })
 *
 * const main = program.pipe(
 *   Effect.catchTag("RunFailed", (failed) => Effect.logError(`the run failed: ${failed.error._tag}`)),
 *   Effect.provide(
 *     RunsClient.layer({ baseUrl: "http://127.0.0.1:8787", token: "secret" }).pipe(Layer.provide(FetchHttpClient.layer))
 *   )
 * )
 *
 * // Without Effect: promises and async iterables.
 * const client = RunsClient.promise({ baseUrl: "http://127.0.0.1:8787", token: "secret" })
 * const started = await client.create({ agent: "assistant", input: "Capital of France?" })
 * for await (const event of client.events(started.runId)) console.log(event._tag)
 * ```
 *
 * @since 0.2.0
 */
import { Context, Duration, Effect, Layer, Redacted, Result, Schedule, Schema, Stream } from "effect"
import * as Sse from "effect/encoding/Sse"
import { FetchHttpClient, HttpClient, type HttpClientError, HttpClientRequest, HttpClientResponse } from "effect/http"
import { HttpApiClient } from "effect/http-api"
import type { InvalidOptions } from "../core/AgentError.js"
import * as AgentEvent from "../core/AgentEvent.js"
import * as Opts from "../core/internal/decode.js"
import type * as HumanLoop from "../core/HumanLoop.js"
import * as Runs from "./Runs.js"
import * as RunsApi from "./RunsApi.js"

// ---------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------

/**
 * The server refused the request for want of the right bearer token (401).
 *
 * @since 0.2.0
 * @category errors
 */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  message: Schema.String
}) {}

/**
 * The server answered with a status the routes do not declare (413, 421, 5xx, a path where no route is — a wrong
 * `prefix`…): the status, and the `_tag` and `message` of its JSON error when it sent one.
 *
 * @since 0.2.0
 * @category errors
 */
export class ServerError extends Schema.TaggedError<ServerError>()("ServerError", {
  status: Schema.Int,
  tag: Schema.String,
  message: Schema.String
}) {}

/**
 * An event stream ended before its run's `RunCompleted`: the connection dropped and reconnecting (`events`, on the
 * `reconnect` schedule) did not bring it back, or `stream`'s connection dropped. `lastEventId` is the id of the last
 * event received, if any.
 *
 * @since 0.2.0
 * @category errors
 */
export class Disconnected extends Schema.TaggedError<Disconnected>()("Disconnected", {
  runId: Schema.optional(Schema.String),
  lastEventId: Schema.optional(Schema.Int),
  message: Schema.String
}) {}

/**
 * What any call can fail with besides its route's own errors: the server cannot be reached
 * (`HttpClientError`), an answer does not fit its schema (`SchemaError`), a bad token (`Unauthorized`), an answer
 * the routes do not declare (`ServerError`), a request refused by the routes' checks (`RunsApi.BadRequest`).
 *
 * @since 0.2.0
 * @category errors
 */
export type RequestError =
  | HttpClientError.HttpClientError
  | Schema.SchemaError
  | Unauthorized
  | ServerError
  | RunsApi.BadRequest

/**
 * The failures `events` reconnects after (on the `reconnect` schedule): a dropped connection (`Disconnected`), a
 * connection that cannot be made (`HttpClientError` of reason `TransportError`), a 502 / 503 / 504 (`ServerError`).
 *
 * @since 0.2.0
 * @category errors
 */
export type Reconnectable = Disconnected | HttpClientError.HttpClientError | ServerError

/**
 * Whether `events` reconnects after this failure.
 *
 * @since 0.2.0
 * @category errors
 */
export const isReconnectable = (error: unknown): error is Reconnectable => {
  if (typeof error !== "object" || error === null) return false
  const tagged = error as { readonly _tag?: unknown; readonly reason?: { readonly _tag?: unknown }; readonly status?: unknown }
  switch (tagged._tag) {
    case "Disconnected":
      return true
    case "HttpClientError":
      return tagged.reason?._tag === "TransportError"
    case "ServerError":
      return tagged.status === 502 || tagged.status === 503 || tagged.status === 504
    default:
      return false
  }
}

/**
 * What `events` and `stream` fail with besides `RequestError`: the run's own failure (`Runs.RunFailed`, carrying
 * the server's typed error), a stream that ended before `RunCompleted` (`Disconnected`), and an SSE event past
 * the decoder's 10 MiB (`SseError`).
 *
 * @since 0.2.0
 * @category errors
 */
export type StreamError = RequestError | Runs.RunFailed | Disconnected | Sse.SseError

// ---------------------------------------------------------------------------------------------------------
// Options and service
// ---------------------------------------------------------------------------------------------------------

/**
 * Where the server is and how to reach it.
 *
 * @since 0.2.0
 * @category options
 */
export interface Options {
  /** The server's http(s) URL (`http://127.0.0.1:8787`). */
  readonly baseUrl: string
  /** The bearer token the server asks for (`valet serve`'s `VALET_TOKEN`, `Server.guard`'s `token`). */
  readonly token?: Redacted.Redacted<string> | string | undefined
  /** Where your API mounts `RunsApi.group` (`"/agents-api"`); none for `valet serve`. */
  readonly prefix?: string | undefined
  /**
   * When `events` reconnects after its connection drops, or cannot be made (the server unreachable, a 502 / 503 /
   * 504 from a proxy in front of it): default exponential from 100 ms, jittered, at most 5 s apart, at most 8 times
   * in a row without an event. It starts over after every event received.
   */
  readonly reconnect?: Schedule.Schedule<unknown, Reconnectable> | undefined
}

/**
 * Which page of runs to list.
 *
 * @since 0.2.0
 * @category options
 */
export interface ListOptions extends Runs.ListOptions {
  /** Whole runs (`Runs.RunView`, with input, result, error) instead of summaries. */
  readonly full?: boolean | undefined
}

/**
 * A page of runs, newest first; `nextCursor` fetches the next (older) page.
 *
 * @since 0.2.0
 * @category models
 */
export type RunPage = Runs.RunPage<Runs.RunSummary | Runs.RunView>

/**
 * An agent the server offers.
 *
 * @since 0.2.0
 * @category models
 */
export type AgentInfo = typeof RunsApi.AgentInfo.Type

/**
 * The client.
 *
 * @since 0.2.0
 * @category services
 */
export interface Service {
  /** `POST /runs`: starts a run on the server and answers its ids at once. */
  readonly create: (
    request: Runs.RunRequest
  ) => Effect.Effect<Runs.Started, Runs.UnknownAgent | Runs.TooManyRuns | Runs.InvalidRunRequest | RequestError>
  /** `GET /runs/:runId`: status and, once ended, the result or the typed error. */
  readonly get: (runId: string) => Effect.Effect<Runs.RunView, Runs.RunNotFound | RequestError>
  /** `GET /runs`: the runs kept, newest first, a page at a time. */
  readonly list: (options?: ListOptions) => Effect.Effect<RunPage, RequestError>
  /** `POST /runs/:runId/cancel`: stops the run; `cancelled` is false for a run already ended. */
  readonly cancel: (runId: string) => Effect.Effect<{ readonly runId: string; readonly cancelled: boolean }, Runs.RunNotFound | RequestError>
  /** `GET /agents`: the agents on offer. */
  readonly agents: () => Effect.Effect<ReadonlyArray<AgentInfo>, RequestError>
  /**
   * `GET /runs/:runId/events`: the run's events after the `after`-th (from the first by default), then live, ending
   * after its `RunCompleted`; reconnects with `Last-Event-ID` when the connection drops.
   */
  readonly events: (
    runId: string,
    options?: { readonly after?: number | undefined }
  ) => Stream.Stream<AgentEvent.AgentEvent, Runs.RunNotFound | Runs.TooManyEventStreams | StreamError>
  /**
   * `POST /runs/stream`: starts a run and streams its events; the run is cancelled when this stream is. It does not
   * reconnect (the server cancels the run when its streaming client goes away); a failed run's `RunFailed` has an
   * empty `runId` (the response does not carry it).
   */
  readonly stream: (
    request: Runs.RunRequest
  ) => Stream.Stream<AgentEvent.AgentEvent, Runs.UnknownAgent | Runs.TooManyRuns | Runs.InvalidRunRequest | StreamError>
  /**
   * `POST /runs/:runId/decisions/:toolCallId`: decides a tool call of the run waiting for a person (`GET /runs/:id`
   * lists them in `pending`).
   */
  readonly decide: (
    runId: string,
    toolCallId: string,
    decision: HumanLoop.Decision
  ) => Effect.Effect<Runs.Decided, Runs.RunNotFound | HumanLoop.DecideError | RequestError>
  /** `POST /runs/:runId/answers/:questionId`: answers a question of the run (`GET /runs/:id` lists them in `questions`). */
  readonly answer: (
    runId: string,
    questionId: string,
    answer: unknown
  ) => Effect.Effect<Runs.Answered, Runs.RunNotFound | HumanLoop.DecideError | RequestError>
  /** The thread routes (`/threads`), as the server's owner function sees this client. */
  readonly threads: ThreadsClient
}

/**
 * What the thread routes may fail with: no store on the server (`ThreadsUnavailable`), an unknown thread, another
 * owner's, one in another turn, a store failure.
 *
 * @since 0.2.0
 * @category errors
 */
export type ThreadRouteError = typeof RunsApi.threadErrors[number]["Type"]

/**
 * A thread as the routes show it.
 *
 * @since 0.2.0
 * @category models
 */
export type ThreadView = typeof RunsApi.ThreadView.Type

/**
 * The client of the thread routes.
 *
 * @since 0.2.0
 * @category models
 */
export interface ThreadsClient {
  /** `POST /threads`. */
  readonly create: (
    options?: { readonly id?: string | undefined; readonly metadata?: Readonly<Record<string, unknown>> | undefined }
  ) => Effect.Effect<ThreadView, ThreadRouteError | RunsApi.ThreadExists | RequestError>
  /** `GET /threads/:threadId`: the thread and a page of its messages (the last 100, or `limit` before `before`). */
  readonly get: (
    threadId: string,
    options?: { readonly before?: number | undefined; readonly limit?: number | undefined }
  ) => Effect.Effect<{ readonly thread: ThreadView; readonly messages: typeof RunsApi.MessagePage.Type }, ThreadRouteError | RequestError>
  /** `GET /threads`: this owner's threads, a page at a time. */
  readonly list: (
    options?: { readonly limit?: number | undefined; readonly cursor?: string | undefined }
  ) => Effect.Effect<{ readonly threads: ReadonlyArray<ThreadView>; readonly nextCursor?: string | undefined }, ThreadRouteError | RequestError>
  /** `DELETE /threads/:threadId`. */
  readonly delete: (threadId: string) => Effect.Effect<void, ThreadRouteError | RequestError>
  /** `POST /threads/:threadId/runs`: a turn of the thread; read it with `events(runId)`. */
  readonly run: (
    threadId: string,
    request: Runs.ThreadRunRequest
  ) => Effect.Effect<Runs.Started, ThreadRouteError | Runs.UnknownAgent | Runs.TooManyRuns | Runs.InvalidRunRequest | RequestError>
  /**
   * `POST /threads/:threadId/runs/stream`: a turn of the thread, its events as they come; the turn is cancelled
   * when this stream is (its note is kept on the thread). Like `stream`, it does not reconnect.
   */
  readonly stream: (
    threadId: string,
    request: Runs.ThreadRunRequest
  ) => Stream.Stream<AgentEvent.AgentEvent, ThreadRouteError | Runs.UnknownAgent | Runs.TooManyRuns | Runs.InvalidRunRequest | StreamError>
}

/**
 * The client in context.
 *
 * @since 0.2.0
 * @category services
 */
export class RunsClient extends Context.Service<RunsClient, Service>()("valet/RunsClient") {}

// ---------------------------------------------------------------------------------------------------------
// Answers the routes do not declare
// ---------------------------------------------------------------------------------------------------------

/** The errors the routes declare: their answers go on to the group's own decoding. */
const declaredTags: ReadonlySet<string> = new Set([
  "BadRequest",
  "UnknownAgent",
  "RunNotFound",
  "TooManyRuns",
  "TooManyEventStreams",
  "InvalidRunRequest",
  // The thread routes' (`RunsApi.threadErrors` and `ThreadExists`; a test checks each is typed, not ServerError).
  "ThreadExists",
  "ThreadsUnavailable",
  "ThreadNotFound",
  "ThreadForbidden",
  "ThreadBusy",
  "ThreadStoreError",
  // A decision's.
  "NotWaiting",
  "AlreadyDecided",
  "InvalidDecision"
])

/** valet's error body, `{_tag, message}`, as far as it goes. */
const ErrorBody = Schema.fromJsonString(Schema.Struct({ _tag: Schema.String, message: Schema.optional(Schema.String) }))
const decodeErrorBody = Schema.decodeUnknownOption(ErrorBody)

/**
 * An error answer: one of the routes' own goes on to the client's decoding; anything else (the guard's 401, a 413,
 * a 5xx, the router's 404 for a path where no route is) is `Unauthorized` or `ServerError` here, instead of the
 * generic client's "undeclared status code" or a schema error about the wrong error body.
 */
const checkStatus = (
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError | Unauthorized | ServerError> => {
  if (response.status < 400) return Effect.succeed(response)
  return Effect.flatMap(response.text, (text) => {
    const body = decodeErrorBody(text)
    if (body._tag === "Some" && declaredTags.has(body.value._tag)) {
      // The body is read: hand the client a response that holds it.
      return Effect.succeed(HttpClientResponse.fromWeb(
        response.request,
        new Response(text, { status: response.status, headers: response.headers as Record<string, string> })
      ))
    }
    const message = body._tag === "Some" && body.value.message !== undefined
      ? body.value.message
      : text.trim().slice(0, 200) || `HTTP ${response.status}`
    return Effect.fail(
      response.status === 401
        ? new Unauthorized({ message })
        : new ServerError({ status: response.status, tag: body._tag === "Some" ? body.value._tag : `HTTP ${response.status}`, message })
    )
  })
}

// ---------------------------------------------------------------------------------------------------------
// Event streams
// ---------------------------------------------------------------------------------------------------------

const decodeEvent = Schema.decodeUnknownEffect(Schema.fromJsonString(Schema.toCodecJson(AgentEvent.AgentEvent)))
const decodeRunError = Schema.decodeUnknownEffect(Schema.fromJsonString(Schema.Record(Schema.String, Schema.Unknown)))

/** Where a connection left off: the id of the last event received, whether that was the run's end, its failure. */
interface Position {
  lastId: number | undefined
  completed: boolean
  failed?: Runs.RunFailed | undefined
}

/**
 * One response's events, from its bytes: SSE framing by Effect's decoder, each event by the `AgentEvent` schema, an
 * `event: error` as `RunFailed`. Ends with the body, which the server ends after the root `RunCompleted` or the
 * `event: error`; a body that ends or breaks before either is `Disconnected` (a `retry:` directive too: the server
 * asks the reader to come back).
 */
const eventsOf = (
  bytes: Stream.Stream<Uint8Array, HttpClientError.HttpClientError>,
  runId: string | undefined,
  position: Position
): Stream.Stream<AgentEvent.AgentEvent, Runs.RunFailed | Disconnected | Schema.SchemaError | Sse.SseError> => {
  const disconnected = (why: string) =>
    new Disconnected({
      ...(runId !== undefined ? { runId } : {}),
      ...(position.lastId !== undefined ? { lastEventId: position.lastId } : {}),
      message: `the event stream ${runId === undefined ? "" : `of run ${runId} `}ended before its RunCompleted (${why})`
    })
  return bytes.pipe(
    // A connection cut after the run's end (its `RunCompleted` or error already read) lost nothing: end as the body
    // would have.
    Stream.catch((error) =>
      position.failed !== undefined || position.completed ? Stream.empty : Stream.fail(disconnected(error.message))
    ),
    Stream.decodeText,
    Stream.pipeThroughChannel(Sse.decode()),
    Stream.catchIf(Sse.Retry.is, () => Stream.fail(disconnected("the server asked to retry"))),
    Stream.mapEffect((sse): Effect.Effect<AgentEvent.AgentEvent | undefined, Schema.SchemaError> =>
      sse.event === AgentEvent.sseErrorEvent
        ? Effect.map(decodeRunError(sse.data), (error) => {
          position.failed = new Runs.RunFailed({ runId: runId ?? "", error, message: String(error.message ?? error._tag) })
          return undefined
        })
        : Effect.map(decodeEvent(sse.data), (event) => {
          // Counted only once decoded: a reconnection resumes after the last event this reader has.
          if (sse.id !== undefined && /^\d+$/.test(sse.id)) position.lastId = Number(sse.id)
          if (event._tag === "RunCompleted" && AgentEvent.isRoot(event)) position.completed = true
          return event
        })),
    Stream.filter((event): event is AgentEvent.AgentEvent => event !== undefined),
    // Read to the body's end (the server ends it after the last event) rather than stopping at `RunCompleted` or the
    // error: stopping there aborts the request before its last chunk, which costs the connection its reuse.
    Stream.concat(Stream.suspend((): Stream.Stream<never, Runs.RunFailed | Disconnected> =>
      position.failed !== undefined
        ? Stream.fail(position.failed)
        : position.completed
        ? Stream.empty
        : Stream.fail(disconnected("the connection closed"))
    ))
  )
}

/** The default `reconnect`: exponential from 100 ms, jittered, at most 5 s apart, 8 times in a row at most. */
const defaultReconnect: Schedule.Schedule<unknown, Reconnectable> = Schedule.exponential("100 millis", 2).pipe(
  Schedule.jittered,
  Schedule.modifyDelay(({ duration }) => Effect.succeed(Duration.min(duration, Duration.seconds(5)))),
  Schedule.while(({ attempt }) => attempt <= 8)
)

// ---------------------------------------------------------------------------------------------------------
// Constructors
// ---------------------------------------------------------------------------------------------------------

const OptionsSchema = Schema.Struct({
  baseUrl: Opts.HttpUrl,
  token: Schema.optional(Schema.Union([
    Schema.String.check(Schema.makeFilter((token: string) =>
      (token !== "" && token.trim() === token) || "must not be empty or start or end with white space")),
    Schema.declare((u: unknown): u is Redacted.Redacted<string> => Redacted.isRedacted(u), { expected: "a Redacted string" })
  ])),
  prefix: Schema.optional(Schema.String.check(Schema.isPattern(/^\/[^?#]*[^/?#]$/, { expected: "a path such as /agents-api" }))),
  reconnect: Schema.optional(Schema.declare((u: unknown): u is Schedule.Schedule<unknown, Reconnectable> => Schedule.isSchedule(u), {
    expected: "a Schedule"
  }))
})

/**
 * Builds the client over the `HttpClient` in context (`FetchHttpClient.layer`, `NodeHttpClient.layerUndici`, …).
 * Options are checked first: a bad one is `InvalidOptions` naming it (`RunsClient: baseUrl is not a URL: "x"`).
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Service, InvalidOptions, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    yield* Opts.decode("RunsClient", OptionsSchema, options)
    const token = options.token
    const http = (yield* HttpClient.HttpClient).pipe(
      token === undefined ? (client) => client : HttpClient.mapRequest(HttpClientRequest.bearerToken(token)),
      HttpClient.transformResponse(Effect.flatMap(checkStatus))
    )
    // The group under its prefix is the same routes under a longer base URL.
    const baseUrl = options.baseUrl.replace(/\/+$/, "") + (options.prefix ?? "")
    const client = yield* HttpApiClient.group(RunsApi.Api, { group: "valet", httpClient: http, baseUrl })
    const reconnect = options.reconnect ?? defaultReconnect

    const create: Service["create"] = (request) =>
      Effect.withSpan(client.createRun({ payload: request }), "valet/RunsClient.create")

    const events: Service["events"] = (runId, eventOptions) =>
      Stream.suspend(() => {
        // One position per reading of the stream: each reconnection asks for what comes after it.
        const position: Position = { lastId: eventOptions?.after, completed: false }
        // Suspended: each connection (the first and every retry) reads the position as it is then.
        const connection = Stream.unwrap(Effect.suspend(() =>
          Effect.map(
            client.runEvents({
              params: { runId },
              query: {},
              headers: position.lastId === undefined ? {} : { "last-event-id": String(position.lastId) }
            }),
            (bytes) => eventsOf(bytes, runId, position)
          )
        )).pipe(
          // Only a connection that dropped or could not be made is tried again, not the run's failure nor a refusal:
          // those are kept aside as values so the schedule never sees them.
          Stream.map(Result.succeed),
          Stream.catch((error) => isReconnectable(error) ? Stream.fail(error) : Stream.succeed(Result.fail(error)))
        )
        return Stream.retry(connection, reconnect).pipe(
          Stream.mapEffect((item) => Result.isSuccess(item) ? Effect.succeed(item.success) : Effect.fail(item.failure))
        )
      }).pipe(Stream.withSpan("valet/RunsClient.events", { attributes: { "valet.run_id": runId } }))

    const stream: Service["stream"] = (request) =>
      Stream.unwrap(Effect.map(
        client.streamRun({ payload: request, query: {} }),
        (bytes) => eventsOf(bytes, undefined, { lastId: undefined, completed: false })
      )).pipe(Stream.withSpan("valet/RunsClient.stream"))

    return RunsClient.of({
      create,
      get: (runId) => Effect.withSpan(client.getRun({ params: { runId } }), "valet/RunsClient.get"),
      list: (listOptions) =>
        Effect.withSpan(
          client.listRuns({
            query: {
              limit: listOptions?.limit,
              cursor: listOptions?.cursor,
              full: listOptions?.full === true ? "true" : undefined
            }
          }),
          "valet/RunsClient.list"
        ),
      cancel: (runId) => Effect.withSpan(client.cancelRun({ params: { runId } }), "valet/RunsClient.cancel"),
      agents: () => Effect.map(Effect.withSpan(client.listAgents(), "valet/RunsClient.agents"), (answer) => answer.agents),
      events,
      stream,
      decide: (runId, toolCallId, decision) =>
        Effect.withSpan(client.decide({ params: { runId, toolCallId }, payload: decision }), "valet/RunsClient.decide"),
      answer: (runId, questionId, answer) =>
        Effect.withSpan(client.answer({ params: { runId, questionId }, payload: { answer } }), "valet/RunsClient.answer"),
      threads: {
        create: (createOptions) =>
          Effect.withSpan(client.createThread({ payload: { ...createOptions } }), "valet/RunsClient.threads.create"),
        get: (threadId, page) =>
          Effect.withSpan(client.getThread({ params: { threadId }, query: { before: page?.before, limit: page?.limit } }), "valet/RunsClient.threads.get"),
        list: (page) =>
          Effect.withSpan(client.listThreads({ query: { limit: page?.limit, cursor: page?.cursor } }), "valet/RunsClient.threads.list"),
        delete: (threadId) => Effect.asVoid(Effect.withSpan(client.deleteThread({ params: { threadId } }), "valet/RunsClient.threads.delete")),
        run: (threadId, request) =>
          Effect.withSpan(client.createThreadRun({ params: { threadId }, payload: request }), "valet/RunsClient.threads.run"),
        stream: (threadId, request) =>
          Stream.unwrap(Effect.map(
            client.streamThreadRun({ params: { threadId }, payload: request, query: {} }),
            (bytes) => eventsOf(bytes, undefined, { lastId: undefined, completed: false })
          )).pipe(Stream.withSpan("valet/RunsClient.threads.stream", { attributes: { "valet.thread_id": threadId } }))
      }
    })
  })

/**
 * The client as a layer, over the `HttpClient` the app provides (`FetchHttpClient.layer` or Node's).
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<RunsClient, InvalidOptions, HttpClient.HttpClient> =>
  Layer.effect(RunsClient, make(options))

// ---------------------------------------------------------------------------------------------------------
// Without Effect
// ---------------------------------------------------------------------------------------------------------

/**
 * The client for code without Effect: every call a `Promise` that rejects with the same typed errors (an
 * `Error` with a `_tag`), every event stream an `AsyncIterable` (leaving a `for await` loop early closes the
 * connection).
 *
 * @since 0.2.0
 * @category promise
 */
export interface PromiseClient {
  /** `POST /runs`. */
  readonly create: (request: Runs.RunRequest) => Promise<Runs.Started>
  /** `GET /runs/:runId`. */
  readonly get: (runId: string) => Promise<Runs.RunView>
  /** `GET /runs`. */
  readonly list: (options?: ListOptions) => Promise<RunPage>
  /** `POST /runs/:runId/cancel`. */
  readonly cancel: (runId: string) => Promise<{ readonly runId: string; readonly cancelled: boolean }>
  /** `GET /agents`. */
  readonly agents: () => Promise<ReadonlyArray<AgentInfo>>
  /** `GET /runs/:runId/events`, reconnecting with `Last-Event-ID`; throws `Runs.RunFailed` for a failed run. */
  readonly events: (runId: string, options?: { readonly after?: number | undefined }) => AsyncIterable<AgentEvent.AgentEvent>
  /** `POST /runs/stream`; leaving the loop early cancels the run. */
  readonly stream: (request: Runs.RunRequest) => AsyncIterable<AgentEvent.AgentEvent>
  /** `POST /runs/:runId/decisions/:toolCallId`. */
  readonly decide: (runId: string, toolCallId: string, decision: HumanLoop.Decision) => Promise<Runs.Decided>
  /** `POST /runs/:runId/answers/:questionId`. */
  readonly answer: (runId: string, questionId: string, answer: unknown) => Promise<Runs.Answered>
  /** The thread routes (`/threads`), as the server's owner function sees this client. */
  readonly threads: {
    readonly [K in keyof ThreadsClient]: ThreadsClient[K] extends (...args: infer P) => Effect.Effect<infer A, infer _E>
      ? (...args: P) => Promise<A>
      : ThreadsClient[K] extends (...args: infer P) => Stream.Stream<infer A, infer _E> ? (...args: P) => AsyncIterable<A>
      : never
  }
}

/**
 * `make` over `fetch`, as promises and async iterables. Bad options throw `InvalidOptions` here, at once.
 *
 * @since 0.2.0
 * @category promise
 */
export const promise = (options: Options): PromiseClient => {
  // The client holds the `HttpClient` it was made with: its calls need nothing more.
  const client = Opts.runUnsafe(Effect.provide(make(options), FetchHttpClient.layer))
  const run = <A, E>(effect: Effect.Effect<A, E>): Promise<A> => Effect.runPromise(effect)
  const iterate = <E>(events: Stream.Stream<AgentEvent.AgentEvent, E>) => Stream.toAsyncIterable(events)
  return {
    create: (request) => run(client.create(request)),
    get: (runId) => run(client.get(runId)),
    list: (listOptions) => run(client.list(listOptions)),
    cancel: (runId) => run(client.cancel(runId)),
    agents: () => run(client.agents()),
    events: (runId, eventOptions) => iterate(client.events(runId, eventOptions)),
    stream: (request) => iterate(client.stream(request)),
    decide: (runId, toolCallId, decision) => run(client.decide(runId, toolCallId, decision)),
    answer: (runId, questionId, answer) => run(client.answer(runId, questionId, answer)),
    threads: {
      create: (createOptions) => run(client.threads.create(createOptions)),
      get: (threadId, page) => run(client.threads.get(threadId, page)),
      list: (page) => run(client.threads.list(page)),
      delete: (threadId) => run(client.threads.delete(threadId)),
      run: (threadId, request) => run(client.threads.run(threadId, request)),
      stream: (threadId, request) => iterate(client.threads.stream(threadId, request))
    }
  }
}

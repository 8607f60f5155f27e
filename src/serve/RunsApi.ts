/**
 * valet's routes as an `effect/http-api` group (DESIGN §12): add `RunsApi.group` to your own `HttpApi` (under a
 * prefix, next to your groups, behind your middleware), provide `RunsApi.layer` with `Runs` and `Agents`, and
 * the OpenAPI document of your API describes them.
 *
 * - `GET /health` → `{"status":"ok"}`; `GET /agents` → the agents' names, descriptions and architectures.
 * - `POST /runs` `{agent, input, sessionId?, budget?: {maxCalls?, maxTotalTokens?, maxOutputTokens?, maxDuration?}}` → 201 `{runId,
 *   sessionId}`; the run goes on in the server. `GET /runs?limit=&cursor=` lists the runs kept, newest first, a
 *   page at a time (summaries; `full=true` for whole runs, without their input's parts; `nextCursor` fetches the next
 *   page); `GET /runs/:runId`
 *   → status, the input (and `inputParts` when it was given as parts) and, once ended, the `RunResult` (or the typed
 *   error).
 * - `GET /runs/:runId/events` → `text/event-stream`: `id: <seq>`, `event: <kind>`, `data: <json>` per event,
 *   replayed from the first or from after `Last-Event-ID` (or `?after=`; a `Last-Event-ID` that is not decimal
 *   digits reads as "from the first"), then live, ending after
 *   `RunCompleted` or an `event: error` carrying the typed error. `?compact=true`: the compact form
 *   (`AgentEvent.toSse`). Several readers may watch one run.
 * - `POST /runs/:runId/cancel` → 202; the run stops at once and ends with `RunCompleted` interrupted, reason
 *   `cancelled`.
 * - `POST /runs/stream` (same body) starts a run and streams its events in the response; when that client
 *   disconnects, the run is cancelled. With `?protocol=ui-message`, the events as the AI SDK's UI message stream
 *   (`UiMessageStream`), for a `useChat` front end.
 *
 * - Threads (DESIGN §14), when `Runs` has a `Threads` store (provide one to `Runs.layer`; `threads:` in
 *   `valet.yaml`): `POST /threads` `{id?, metadata?}` → 201 the thread; `GET /threads?limit=&cursor=` → the owner's
 *   threads, most recently updated first, a page at a time; `GET /threads/:threadId?before=&limit=` → the thread
 *   and a page of its messages (the last 100 by default; `before` pages back); `DELETE /threads/:threadId` → 204;
 *   `POST /threads/:threadId/runs` (a `POST /runs` body without `history`: the thread is the history) → 201
 *   `{runId, sessionId}`, then `GET /runs/:runId/events` as for any run; `POST /threads/:threadId/runs/stream`
 *   streams it (`?protocol=ui-message` too). The owner is never read from a body or a query: the `Owner` middleware
 *   asks the app's function (`layerFor(api, { owner })`, `Server` option `owner`), and without one every request
 *   is `defaultOwner`'s (a server behind a bearer token alone is single-tenant). Without a store these routes
 *   answer 501 `ThreadsUnavailable`; the others work as before.
 *
 * Errors are JSON `{_tag, message, …}`: 400 naming the field of a body that does not fit, 404 for an unknown agent
 * or run, 429 with `Retry-After` beyond `maxConcurrentRuns` (`TooManyRuns`) or, for `GET /runs/:runId/events`, beyond
 * `maxEventStreams` streams following runs at once (`TooManyEventStreams`); on threads 401 `Unauthorized` (the app's
 * function said no), 403 `ThreadForbidden` (another owner's), 404 `ThreadNotFound`, 409 `ThreadBusy` (in another
 * turn) or `ThreadExists`, 500 `ThreadStoreError` (its operation, thread and message index; the driver's text — SQL,
 * paths, hosts — goes to the server's log, not to the client).
 *
 * @example
 * ```ts
 * import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
 * import { Layer } from "effect"
 * import { HttpRouter } from "effect/http"
 * import { HttpApi, HttpApiBuilder } from "effect/http-api"
 * import { createServer } from "node:http"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Agents from "valet/Agents"
 * import * as Runs from "valet/Runs"
 * import * as RunsApi from "valet/RunsApi"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief.", model: ScriptedModel.layer(["Hi!"]) })
 *
 * // Your API, with valet's routes under /agents-api beside your own groups (and behind your own middleware).
 * const MyApi = HttpApi.make("app").add(RunsApi.group.prefix("/agents-api"))
 *
 * const ApiLive = HttpApiBuilder.layer(MyApi, { openapiPath: "/openapi.json" }).pipe(
 *   Layer.provide(RunsApi.layerFor(MyApi)),
 *   Layer.provide(Runs.layer({ maxConcurrentRuns: 8 })),
 *   Layer.provide(Agents.layer([assistant]))
 * )
 *
 * // POST /agents-api/runs, GET /agents-api/runs/:runId/events, … on 127.0.0.1:3000.
 * const main = HttpRouter.serve(ApiLive).pipe(
 *   Layer.provide(NodeHttpServer.layer(createServer, { port: 3000, host: "127.0.0.1" })),
 *   Layer.launch
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Context, Effect, Layer, Option, Result, Schema, SchemaGetter, Stream } from "effect"
import { type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema } from "effect/http-api"
import * as AgentEvent from "../core/AgentEvent.js"
import * as Decode from "../core/internal/decode.js"
import * as ThreadChecks from "../core/internal/threads/check.js"
import { BoundedJson } from "../core/internal/parse.js"
import * as Model from "../core/Model.js"
import * as HumanLoop from "../core/HumanLoop.js"
import * as Threads from "../core/Threads.js"
import * as Agents from "./Agents.js"
import { requireGroup } from "./internal/groupLayer.js"
import * as RunStream from "./internal/runStream.js"
import * as Runs from "./Runs.js"

// ---------------------------------------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------------------------------------

/**
 * A request that does not fit its schema: `message` names the field.
 *
 * @since 0.2.0
 * @category errors
 */
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", {
  message: Schema.String
}, { httpApiStatus: 400 }) {}

/**
 * One agent on offer.
 *
 * @since 0.2.0
 * @category models
 */
export const AgentInfo = Schema.Struct({ name: Schema.String, description: Schema.String, architecture: Schema.String })

const RunIdParams = { runId: Schema.String }

const Compact = Schema.optional(Schema.Literals(["true", "false", "1", "0"]))

const digitsToNumber = {
  decode: SchemaGetter.transform((text: string) => Number(text)),
  encode: SchemaGetter.transform((n: number) => String(n))
}

/** A non-negative integer written in decimal digits only (no sign, no exponent, no blank). */
const Digits = Schema.String.check(Schema.isPattern(/^(0|[1-9][0-9]{0,14})$/, { expected: "a non-negative integer" }))

const PageLimit = Digits.pipe(
  Schema.decodeTo(Schema.Number.check(Schema.isBetween({ minimum: 1, maximum: 500 }, { expected: "an integer 1-500" })), digitsToNumber)
)

/** A page's `nextCursor`. */
const Cursor = Digits

/** An event's SSE id: `?after=3` resumes after event 3. */
const EventId = Digits.pipe(Schema.decodeTo(Schema.Number, digitsToNumber))

/** `text/event-stream` (documented; the handlers write the frames themselves). */
const EventStream = HttpApiSchema.StreamUint8Array({ contentType: "text/event-stream" })

/**
 * Turns a body, query or path that does not decode into a 400 naming the field.
 *
 * @since 0.2.0
 * @category middleware
 */
export class RequestErrors extends HttpApiMiddleware.Service<RequestErrors>()("valet/RunsApi/RequestErrors", {
  error: BadRequest
}) {}

// ---------------------------------------------------------------------------------------------------------
// The owner of a request (threads)
// ---------------------------------------------------------------------------------------------------------

/**
 * The request carries no owner the app accepts (its own auth said no): 401.
 *
 * @since 0.2.0
 * @category errors
 */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  message: Schema.String
}, { httpApiStatus: 401 }) {}

/**
 * The owner of the request being handled, as the `Owner` middleware found it: whose threads it may read and run.
 *
 * @since 0.2.0
 * @category owner
 */
export class CurrentOwner extends Context.Service<CurrentOwner, string>()("valet/RunsApi/CurrentOwner") {}

/**
 * The middleware of the routes that touch threads (`/threads…` and the chat route): it gives the handler the
 * request's `CurrentOwner`, found by the embedding app's function (`layerOwner`), never read from a body or a query.
 *
 * @since 0.2.0
 * @category owner
 */
export class Owner extends HttpApiMiddleware.Service<Owner, { provides: CurrentOwner }>()("valet/RunsApi/Owner", {
  error: Unauthorized
}) {}

/**
 * How an app finds a request's owner: an effect reading the request (its session cookie, its JWT…) that answers the
 * owner id, or fails with `Unauthorized` (401).
 *
 * @since 0.2.0
 * @category owner
 */
export type OwnerOf = Effect.Effect<string, Unauthorized, HttpServerRequest.HttpServerRequest>

/**
 * The owner every request has when the app gives no `owner`: one tenant. A server guarded by a bearer token is a
 * single-tenant server; an app with users gives `owner`.
 *
 * @since 0.2.0
 * @category owner
 */
export const defaultOwner = "default"

/**
 * The `Owner` middleware over the app's function (`defaultOwner` for every request without one).
 *
 * @since 0.2.0
 * @category owner
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { HttpServerRequest } from "effect/http"
 * import * as RunsApi from "valet/RunsApi"
 *
 * // The owner is the user your auth put in a header (behind your own auth middleware), never a body field.
 * const owner = RunsApi.layerOwner(Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
 *   const user = request.headers["x-user-id"]
 *   return user === undefined ? Effect.fail(new RunsApi.Unauthorized({ message: "sign in first" })) : Effect.succeed(user)
 * }))
 * ```
 */
export const layerOwner = (owner: OwnerOf = Effect.succeed(defaultOwner)): Layer.Layer<Owner> =>
  Layer.succeed(Owner, (httpEffect) =>
    Effect.flatMap(
      Effect.flatMap(owner, (id: unknown) =>
        // Checked here, whatever the function's type said: an owner that is not a name (undefined from a plain-JS
        // app, "") would read as "no owner" further in and open every thread. Refused as unauthenticated.
        typeof id === "string" && id.length > 0 && id.length <= 256
          ? Effect.succeed(id)
          : Effect.fail(new Unauthorized({ message: "the request has no owner: the server's owner function gave none" }))),
      (id) => Effect.provideService(httpEffect, CurrentOwner, id)
    ))

// ---------------------------------------------------------------------------------------------------------
// Threads over HTTP
// ---------------------------------------------------------------------------------------------------------

// A decision's errors, with their statuses: no such waiting call 404, decided already 409, edited arguments refused 400.
const NotWaiting = HumanLoop.NotWaiting.pipe(HttpApiSchema.status(404))
const AlreadyDecided = HumanLoop.AlreadyDecided.pipe(HttpApiSchema.status(409))
const InvalidDecision = HumanLoop.InvalidDecision.pipe(HttpApiSchema.status(400))

/**
 * What a decision over HTTP may be refused with, each with its status: `RunNotFound` and `NotWaiting` 404,
 * `AlreadyDecided` 409, `InvalidDecision` 400 (the chat route's approval answers are refused the same way).
 *
 * @since 0.2.0
 * @category errors
 */
export const decisionErrors = [Runs.RunNotFound, NotWaiting, AlreadyDecided, InvalidDecision] as const

// The store's errors, with the status each is answered with.
const ThreadNotFound = Threads.ThreadNotFound.pipe(HttpApiSchema.status(404))
const ThreadForbidden = Threads.ThreadForbidden.pipe(HttpApiSchema.status(403))
const ThreadBusy = Threads.ThreadBusy.pipe(HttpApiSchema.status(409))
const ThreadStoreError = Threads.ThreadStoreError.pipe(HttpApiSchema.status(500))

/**
 * `POST /threads` with an id a thread already has: 409.
 *
 * @since 0.2.0
 * @category errors
 */
export class ThreadExists extends Schema.TaggedError<ThreadExists>()("ThreadExists", {
  threadId: Schema.String,
  message: Schema.String
}, { httpApiStatus: 409 }) {}

/**
 * A thread as the routes answer it (without its messages).
 *
 * @since 0.2.0
 * @category models
 */
export const ThreadView = Schema.Struct({
  id: Schema.String,
  owner: Schema.String,
  metadata: Schema.Record(Schema.String, Schema.Unknown),
  createdAt: Schema.Number,
  updatedAt: Schema.Number,
  messageCount: Schema.Int
})

/**
 * What creates a thread: an id (a new `thr_…` one by default) and metadata. No owner: it is the request's.
 *
 * @since 0.2.0
 * @category models
 */
export const CreateThread = Schema.Struct({
  id: Schema.optional(Threads.ThreadId),
  metadata: Schema.optional(Schema.Record(Schema.String, Schema.Unknown))
})

/**
 * A page of a thread's messages: indexes `[start, start + messages.length)` of `total`, oldest first.
 *
 * @since 0.2.0
 * @category models
 */
export const MessagePage = Schema.Struct({
  start: Schema.Int,
  total: Schema.Int,
  messages: Schema.Array(Model.Message)
})

const ThreadIdParams = { threadId: Threads.ThreadId }

const MessageLimit = Digits.pipe(
  Schema.decodeTo(Schema.Number.check(Schema.isBetween({ minimum: 1, maximum: 1000 }, { expected: "an integer 1-1000" })), digitsToNumber)
)

/**
 * What every route on a thread may fail with, each with its status: `ThreadsUnavailable` 501, `ThreadNotFound`
 * 404, `ThreadForbidden` 403, `ThreadBusy` 409, `ThreadStoreError` 500 (`ChatApi` answers with them too).
 *
 * @since 0.2.0
 * @category errors
 */
export const threadErrors = [Runs.ThreadsUnavailable, ThreadNotFound, ThreadForbidden, ThreadBusy, ThreadStoreError] as const

const runErrors = [Runs.UnknownAgent, Runs.TooManyRuns, Runs.InvalidRunRequest] as const

/**
 * The group: mount it in your own `HttpApi` (`HttpApi.make("app").add(RunsApi.group.prefix("/agents-api"))`).
 *
 * @since 0.2.0
 * @category api
 */
export const group = HttpApiGroup.make("valet")
  .add(
    HttpApiEndpoint.get("health", "/health", { success: Schema.Struct({ status: Schema.Literal("ok") }) }),
    // Behind the owner function too: an app that authenticates its users there (no token) shows its agents only to them.
    HttpApiEndpoint.get("listAgents", "/agents", { success: Schema.Struct({ agents: Schema.Array(AgentInfo) }) }).middleware(Owner),
    HttpApiEndpoint.post("createRun", "/runs", {
      payload: Runs.RunRequest,
      success: Runs.Started.pipe(HttpApiSchema.status(201)),
      error: [Runs.UnknownAgent, Runs.TooManyRuns, Runs.InvalidRunRequest]
    }).middleware(Owner),
    HttpApiEndpoint.get("listRuns", "/runs", {
      query: { limit: Schema.optional(PageLimit), cursor: Schema.optional(Cursor), full: Compact },
      success: Schema.Struct({
        runs: Schema.Array(Schema.Union([Runs.RunSummary, Runs.RunView])),
        nextCursor: Schema.optional(Schema.String)
      })
    }).middleware(Owner),
    HttpApiEndpoint.get("getRun", "/runs/:runId", { params: RunIdParams, success: Runs.RunView, error: Runs.RunNotFound }).middleware(Owner),
    HttpApiEndpoint.get("runEvents", "/runs/:runId/events", {
      params: RunIdParams,
      query: { after: Schema.optional(EventId), compact: Compact },
      headers: { "last-event-id": Schema.optional(Schema.String) },
      success: EventStream,
      error: [Runs.RunNotFound, Runs.TooManyEventStreams]
    }).middleware(Owner),
    HttpApiEndpoint.post("cancelRun", "/runs/:runId/cancel", {
      params: RunIdParams,
      success: Schema.Struct({ runId: Schema.String, cancelled: Schema.Boolean }).pipe(HttpApiSchema.status(202)),
      error: Runs.RunNotFound
    }).middleware(Owner),
    HttpApiEndpoint.post("decide", "/runs/:runId/decisions/:toolCallId", {
      params: { ...RunIdParams, toolCallId: Schema.String.check(Schema.isNonEmpty(), Schema.isMaxLength(256)) },
      payload: HumanLoop.Decision,
      success: Runs.Decided,
      error: [...decisionErrors]
    }).middleware(Owner),
    HttpApiEndpoint.post("answer", "/runs/:runId/answers/:questionId", {
      params: { ...RunIdParams, questionId: Schema.String.check(Schema.isNonEmpty(), Schema.isMaxLength(256)) },
      payload: Schema.Struct({ answer: BoundedJson }),
      success: Runs.Answered,
      error: [Runs.RunNotFound, NotWaiting, AlreadyDecided, InvalidDecision]
    }).middleware(Owner),
    HttpApiEndpoint.post("streamRun", "/runs/stream", {
      payload: Runs.RunRequest,
      query: { compact: Compact, protocol: Schema.optional(Schema.Literals(["valet", "ui-message"])) },
      success: EventStream,
      error: [Runs.UnknownAgent, Runs.TooManyRuns, Runs.InvalidRunRequest]
    }).middleware(Owner),
    HttpApiEndpoint.post("createThread", "/threads", {
      payload: CreateThread,
      success: ThreadView.pipe(HttpApiSchema.status(201)),
      error: [...threadErrors, ThreadExists]
    }).middleware(Owner),
    HttpApiEndpoint.get("listThreads", "/threads", {
      query: { limit: Schema.optional(PageLimit), cursor: Schema.optional(Schema.String) },
      success: Schema.Struct({ threads: Schema.Array(ThreadView), nextCursor: Schema.optional(Schema.String) }),
      error: threadErrors
    }).middleware(Owner),
    HttpApiEndpoint.get("getThread", "/threads/:threadId", {
      params: ThreadIdParams,
      query: { before: Schema.optional(Digits.pipe(Schema.decodeTo(Schema.Number, digitsToNumber))), limit: Schema.optional(MessageLimit) },
      success: Schema.Struct({ thread: ThreadView, messages: MessagePage }),
      error: threadErrors
    }).middleware(Owner),
    HttpApiEndpoint.delete("deleteThread", "/threads/:threadId", {
      params: ThreadIdParams,
      success: HttpApiSchema.NoContent,
      error: threadErrors
    }).middleware(Owner),
    HttpApiEndpoint.post("createThreadRun", "/threads/:threadId/runs", {
      params: ThreadIdParams,
      payload: Runs.ThreadRunRequest,
      success: Runs.Started.pipe(HttpApiSchema.status(201)),
      error: [...threadErrors, ...runErrors]
    }).middleware(Owner),
    HttpApiEndpoint.post("streamThreadRun", "/threads/:threadId/runs/stream", {
      params: ThreadIdParams,
      payload: Runs.ThreadRunRequest,
      query: { compact: Compact, protocol: Schema.optional(Schema.Literals(["valet", "ui-message"])) },
      success: EventStream,
      error: [...threadErrors, ...runErrors]
    }).middleware(Owner)
  )
  .middleware(RequestErrors)

/**
 * An API of the group alone (what `valet serve` serves, with the OpenAPI document at `/openapi.json`).
 *
 * @since 0.2.0
 * @category api
 */
export const Api = HttpApi.make("valet").add(group)

// ---------------------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------------------

const sseHeaders = { "cache-control": "no-cache", "x-accel-buffering": "no" }

/** A run's view without its input's parts (what a page of runs carries). */
const withoutParts = (view: Runs.RunView): Runs.RunView => {
  if (view.inputParts === undefined) return view
  const { inputParts: _, ...rest } = view
  return rest
}

const isTrue = (flag: string | undefined) => flag === "true" || flag === "1"

/** A run's events as an SSE response; a failed run's last event is `event: error` with its typed error. */
const sseResponse = (events: Stream.Stream<Runs.Indexed, Runs.RunFailed>, firstId: number, compact: boolean) =>
  HttpServerResponse.stream(
    AgentEvent.toSse(
      events.pipe(
        Stream.map((item) => item.event),
        // The run's own error, not the wrapper: `event: error` carries what the run failed with.
        Stream.mapError((failed) => failed.error)
      ),
      { firstId, compact }
    ).pipe(Stream.encodeText),
    { contentType: "text/event-stream", headers: sseHeaders }
  )

/**
 * Where a reader resumes: `?after=`, else `Last-Event-ID` when it is an event id (decimal digits); anything else a
 * client sends there (`""`, `-0`, `1e3`, garbage) reads as "from the start", never as a skipped event.
 */
const afterOf = (query: number | undefined, lastEventId: string | undefined): number | undefined => {
  if (query !== undefined) return query
  if (lastEventId === undefined || !/^(0|[1-9][0-9]{0,14})$/.test(lastEventId.trim())) return undefined
  return Number(lastEventId.trim())
}

/**
 * The request-error middleware's layer: a body, query or path that does not decode is a 400 `BadRequest` naming the
 * field (`payload: agent is required`). `layerFor` provides it; so does every group that uses
 * `RequestErrors` (`ChatApi`).
 *
 * @since 0.2.0
 * @category middleware
 */
export const layerRequestErrors: Layer.Layer<RequestErrors> = HttpApiMiddleware.layerSchemaErrorTransform(RequestErrors, (error) =>
  Effect.fail(new BadRequest({ message: `${error.kind.toLowerCase()}: ${Decode.describeIssue(error.cause.issue, undefined)}` })))

/**
 * The group's handlers (and its request-error middleware) for `api`, an `HttpApi` that holds `group` (under any
 * prefix): its routes are registered at that API's paths. Over `Runs` and `Agents`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerFor = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  options: LayerOptions = {}
): Layer.Layer<HttpApiGroup.Service<Id, "valet"> | RequestErrors, never, Runs.Runs | Agents.Agents> => {
  // The handlers are typed against `Api`; the user's API holds the same group, maybe under a prefix, and the
  // routes are read from it at run time.
  return requireGroup("RunsApi", "valet", api, () =>
    HttpApiBuilder.group(api as unknown as typeof Api, "valet", build).pipe(
      Layer.provide(layerOwner(options.owner)),
      Layer.provideMerge(layerRequestErrors)
    )) as unknown as Layer.Layer<HttpApiGroup.Service<Id, "valet"> | RequestErrors, never, Runs.Runs | Agents.Agents>
}

/**
 * Options of the group's layer: `owner` finds the owner of a request to a thread route (the app's auth); every
 * request is `defaultOwner`'s without it. The thread routes use the `Threads` store of `Runs` (provide `Threads` to
 * `Runs.layer`); without one they answer 501 `ThreadsUnavailable` and the other routes work as before.
 *
 * @since 0.2.0
 * @category options
 */
export interface LayerOptions {
  readonly owner?: OwnerOf | undefined
}

const build = (handlers: Parameters<Parameters<typeof HttpApiBuilder.group<"valet", typeof group, "valet", unknown>>[2]>[0]) =>
    Effect.gen(function*() {
      const runs = yield* Runs.Runs
      const agents = yield* Agents.Agents
      return handlers
        .handle("health", () => Effect.succeed({ status: "ok" as const }))
        .handle("listAgents", () =>
          Effect.succeed({
            agents: agents.list.map((entry) => ({ name: entry.name, description: entry.description, architecture: entry.architecture }))
          }))
        // Runs are their owner's (the app's auth, `Owner`): another owner's run answers as an unknown one.
        .handle("createRun", ({ payload }) =>
          Effect.flatMap(Effect.service(CurrentOwner), (owner) =>
            runs.start(payload, { owner }).pipe(Effect.catchTag("TooManyRuns", (error) => Effect.succeed(RunStream.tooMany(error))))))
        .handle("listRuns", ({ query }) =>
          Effect.flatMap(Effect.service(CurrentOwner), (owner) =>
            Effect.flatMap(runs.list({ limit: query.limit, cursor: query.cursor, owner }), (page): Effect.Effect<Runs.RunPage<Runs.RunSummary | Runs.RunView>> =>
              !isTrue(query.full)
                ? Effect.succeed(page)
                : Effect.map(
                  // A run dropped between the two reads is left out.
                  Effect.forEach(page.runs, (run) => Effect.option(runs.get(run.runId, { owner }))),
                  // Without their input's parts: a page of 500 runs with images would be 500 bodies of bytes (`GET
                  // /runs/:id` has them).
                  (views) => ({ ...page, runs: views.flatMap((view) => (view._tag === "Some" ? [withoutParts(view.value)] : [])) })
                ))))
        .handle("getRun", ({ params }) => Effect.flatMap(Effect.service(CurrentOwner), (owner) => runs.get(params.runId, { owner })))
        .handle("runEvents", ({ headers, params, query }) => {
          const after = afterOf(query.after, headers["last-event-id"])
          // A reader of a run it did not start holds one of `maxEventStreams` slots while its response lasts (the
          // request's scope closes once the stream ended or the client went away): 429 with Retry-After beyond.
          return Effect.flatMap(Effect.service(CurrentOwner), (owner) =>
            // The run first: an unknown run is a 404 also when every slot is held.
            runs.events(params.runId, { after, owner }).pipe(
              Effect.tap(() => runs.holdEventStream),
              Effect.map((events) => sseResponse(events, after === undefined ? 0 : after + 1, isTrue(query.compact))),
              Effect.catchTag("TooManyEventStreams", (error) => Effect.succeed(RunStream.tooMany(error)))
            ))
        })
        .handle("cancelRun", ({ params }) =>
          Effect.flatMap(Effect.service(CurrentOwner), (owner) =>
            Effect.flatMap(runs.get(params.runId, { owner }), (run) =>
              Effect.as(runs.cancel(params.runId, { owner }), { runId: params.runId, cancelled: run.status === "running" || run.status === "waiting" }))))
        .handle("decide", ({ params, payload }) =>
          Effect.flatMap(Effect.service(CurrentOwner), (owner) => runs.decide(params.runId, params.toolCallId, payload, { owner })))
        .handle("answer", ({ params, payload }) =>
          Effect.flatMap(Effect.service(CurrentOwner), (owner) => runs.answer(params.runId, params.questionId, payload.answer, { owner })))
        .handle("streamRun", ({ payload, query }) =>
          Effect.flatMap(Effect.service(CurrentOwner), (owner) => runs.start(payload, { owner })).pipe(
            Effect.flatMap(({ runId }) => Effect.map(RunStream.followed(runs, runId), (events) => ({ runId, events }))),
            Effect.map(({ events, runId }) =>
              query.protocol === "ui-message" ? RunStream.uiMessageResponse(events, { runId }) : sseResponse(events, 0, isTrue(query.compact))),
            Effect.catchTag("TooManyRuns", (error) => Effect.succeed(RunStream.tooMany(error)))
          ))
        .handle("createThread", ({ payload }) =>
          withThreads((threads, owner) =>
            Effect.gen(function*() {
              // Bad metadata is the client's (400), not the store's failure.
              const metadata = yield* ThreadChecks.metadataOf("create", payload.metadata).pipe(
                Effect.mapError((error) => new BadRequest({ message: `payload: metadata: ${error.message.replace(/^Threads\.create: /, "")}` }))
              )
              const made = yield* Effect.result(threads.create({ id: payload.id, owner, metadata }))
              if (Result.isSuccess(made)) return made.success
              // The id is taken (before this request, or by one in between, in this process or another): 409, not the
              // store's 500. Looked up only now, so that a thread of another owner is never read on the way.
              if (payload.id !== undefined) {
                const taken = yield* Effect.option(Effect.catchTag(threads.get(payload.id), "ThreadNotFound", () => Effect.fail(undefined)))
                if (Option.isSome(taken)) {
                  return yield* new ThreadExists({ threadId: payload.id, message: `a thread ${JSON.stringify(payload.id)} exists` })
                }
              }
              return yield* made.failure
            })
          ))
        .handle("listThreads", ({ query }) =>
          withThreads((threads, owner): Effect.Effect<Threads.ThreadPage, Threads.ThreadError | BadRequest> =>
            Result.isFailure(ThreadChecks.parseCursor(query.cursor))
              ? Effect.fail(new BadRequest({ message: `query: cursor ${JSON.stringify(String(query.cursor).slice(0, 80))} is not one a page of threads gave` }))
              : threads.list(owner, { limit: query.limit, cursor: query.cursor })
          ))
        .handle("getThread", ({ params, query }) =>
          withThreads((threads, owner) =>
            Effect.gen(function*() {
              const thread = yield* threads.get(params.threadId, { owner })
              const page = yield* threads.messages(params.threadId, {
                owner,
                before: query.before === undefined ? undefined : Math.min(query.before, thread.messageCount),
                limit: query.limit
              })
              return { thread, messages: { start: page.start, total: page.total, messages: page.messages } }
            })
          ))
        .handle("deleteThread", ({ params }) => withThreads((threads, owner) => threads.delete(params.threadId, { owner })))
        .handle("createThreadRun", ({ params, payload }) =>
          Effect.flatMap(Effect.service(CurrentOwner), (owner) =>
            runs.startTurn(payload, { id: params.threadId, owner }).pipe(
              // The body is the run's ids alone.
              Effect.map(({ runId, sessionId }) => ({ runId, sessionId })),
              Effect.catchTag("TooManyRuns", (error) => Effect.succeed(RunStream.tooMany(error)))
            )))
        .handle("streamThreadRun", ({ params, payload, query }) =>
          Effect.flatMap(Effect.service(CurrentOwner), (owner) =>
            runs.startTurn(payload, { id: params.threadId, owner }).pipe(
              Effect.flatMap(({ runId }) => Effect.map(RunStream.followed(runs, runId), (events) => ({ runId, events }))),
              Effect.map(({ events, runId }) =>
                query.protocol === "ui-message" ? RunStream.uiMessageResponse(events, { runId }) : sseResponse(events, 0, isTrue(query.compact))),
              Effect.catchTag("TooManyRuns", (error) => Effect.succeed(RunStream.tooMany(error)))
            )))

      /** The store and the request's owner; 501 when the server keeps no threads. */
      function withThreads<A, E>(
        f: (threads: Threads.Service, owner: string) => Effect.Effect<A, E>
      ): Effect.Effect<A, E | Runs.ThreadsUnavailable, CurrentOwner> {
        return Option.isNone(runs.threads)
          ? Effect.fail(Runs.threadsUnavailable())
          : Effect.flatMap(Effect.service(CurrentOwner), (owner) => f((runs.threads as Option.Some<Threads.Service>).value, owner))
      }
    })

/**
 * The group's handlers for `Api` (the group alone).
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = layerFor(Api)

/**
 * valet's routes as an `effect/http-api` group (DESIGN §12): add `RunsApi.group` to your own `HttpApi` (under a
 * prefix, next to your groups, behind your middleware), provide `RunsApi.layer` with `Runs` and `Agents`, and
 * the OpenAPI document of your API describes them.
 *
 * - `GET /health` → `{"status":"ok"}`; `GET /agents` → the agents' names, descriptions and architectures.
 * - `POST /runs` `{agent, input, sessionId?, budget?: {maxCalls?, maxTotalTokens?, maxOutputTokens?, maxDuration?}}` → 201 `{runId,
 *   sessionId}`; the run goes on in the server. `GET /runs?limit=&cursor=` lists the runs kept, newest first, a
 *   page at a time (summaries; `full=true` for whole runs; `nextCursor` fetches the next page); `GET /runs/:runId`
 *   → status and, once ended, the `RunResult` (or the typed error).
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
 * Errors are JSON `{_tag, message, …}`: 400 naming the field of a body that does not fit, 404 for an unknown agent
 * or run, 429 with `Retry-After` beyond `maxConcurrentRuns`.
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
import { Effect, Layer, Schema, SchemaGetter, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema } from "effect/http-api"
import * as AgentEvent from "../core/AgentEvent.js"
import * as Decode from "../core/internal/decode.js"
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

/**
 * The group: mount it in your own `HttpApi` (`HttpApi.make("app").add(RunsApi.group.prefix("/agents-api"))`).
 *
 * @since 0.2.0
 * @category api
 */
export const group = HttpApiGroup.make("valet")
  .add(
    HttpApiEndpoint.get("health", "/health", { success: Schema.Struct({ status: Schema.Literal("ok") }) }),
    HttpApiEndpoint.get("listAgents", "/agents", { success: Schema.Struct({ agents: Schema.Array(AgentInfo) }) }),
    HttpApiEndpoint.post("createRun", "/runs", {
      payload: Runs.RunRequest,
      success: Runs.Started.pipe(HttpApiSchema.status(201)),
      error: [Runs.UnknownAgent, Runs.TooManyRuns, Runs.InvalidRunRequest]
    }),
    HttpApiEndpoint.get("listRuns", "/runs", {
      query: { limit: Schema.optional(PageLimit), cursor: Schema.optional(Cursor), full: Compact },
      success: Schema.Struct({
        runs: Schema.Array(Schema.Union([Runs.RunSummary, Runs.RunView])),
        nextCursor: Schema.optional(Schema.String)
      })
    }),
    HttpApiEndpoint.get("getRun", "/runs/:runId", { params: RunIdParams, success: Runs.RunView, error: Runs.RunNotFound }),
    HttpApiEndpoint.get("runEvents", "/runs/:runId/events", {
      params: RunIdParams,
      query: { after: Schema.optional(EventId), compact: Compact },
      headers: { "last-event-id": Schema.optional(Schema.String) },
      success: EventStream,
      error: Runs.RunNotFound
    }),
    HttpApiEndpoint.post("cancelRun", "/runs/:runId/cancel", {
      params: RunIdParams,
      success: Schema.Struct({ runId: Schema.String, cancelled: Schema.Boolean }).pipe(HttpApiSchema.status(202)),
      error: Runs.RunNotFound
    }),
    HttpApiEndpoint.post("streamRun", "/runs/stream", {
      payload: Runs.RunRequest,
      query: { compact: Compact, protocol: Schema.optional(Schema.Literals(["valet", "ui-message"])) },
      success: EventStream,
      error: [Runs.UnknownAgent, Runs.TooManyRuns, Runs.InvalidRunRequest]
    })
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
  api: HttpApi.HttpApi<Id, Groups>
): Layer.Layer<HttpApiGroup.Service<Id, "valet"> | RequestErrors, never, Runs.Runs | Agents.Agents> => {
  // The handlers are typed against `Api`; the user's API holds the same group, maybe under a prefix, and the
  // routes are read from it at run time.
  return requireGroup("RunsApi", "valet", api, () =>
    HttpApiBuilder.group(api as unknown as typeof Api, "valet", build).pipe(
      Layer.provideMerge(layerRequestErrors)
    )) as unknown as Layer.Layer<HttpApiGroup.Service<Id, "valet"> | RequestErrors, never, Runs.Runs | Agents.Agents>
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
        .handle("createRun", ({ payload }) =>
          runs.start(payload).pipe(Effect.catchTag("TooManyRuns", (error) => Effect.succeed(RunStream.tooMany(error)))))
        .handle("listRuns", ({ query }) =>
          Effect.flatMap(runs.list({ limit: query.limit, cursor: query.cursor }), (page): Effect.Effect<Runs.RunPage<Runs.RunSummary | Runs.RunView>> =>
            !isTrue(query.full)
              ? Effect.succeed(page)
              : Effect.map(
                // A run dropped between the two reads is left out.
                Effect.forEach(page.runs, (run) => Effect.option(runs.get(run.runId))),
                (views) => ({ ...page, runs: views.flatMap((view) => (view._tag === "Some" ? [view.value] : [])) })
              )))
        .handle("getRun", ({ params }) => runs.get(params.runId))
        .handle("runEvents", ({ headers, params, query }) => {
          const after = afterOf(query.after, headers["last-event-id"])
          return Effect.map(
            runs.events(params.runId, { after }),
            (events) => sseResponse(events, after === undefined ? 0 : after + 1, isTrue(query.compact))
          )
        })
        .handle("cancelRun", ({ params }) =>
          Effect.flatMap(runs.get(params.runId), (run) =>
            Effect.as(runs.cancel(params.runId), { runId: params.runId, cancelled: run.status === "running" })))
        .handle("streamRun", ({ payload, query }) =>
          runs.start(payload).pipe(
            Effect.flatMap(({ runId }) => RunStream.followed(runs, runId)),
            Effect.map((events) =>
              query.protocol === "ui-message" ? RunStream.uiMessageResponse(events) : sseResponse(events, 0, isTrue(query.compact))),
            Effect.catchTag("TooManyRuns", (error) => Effect.succeed(RunStream.tooMany(error)))
          ))
    })

/**
 * The group's handlers for `Api` (the group alone).
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = layerFor(Api)

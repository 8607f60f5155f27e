/**
 * What the routes that start a run and stream it in their response share (`POST /runs/stream`, `POST
 * /agents/:name/chat`): the run followed to its end and cancelled when the client goes away first, the UI message
 * stream response, and the 429 beyond `maxConcurrentRuns` (or, for a stream following a run, `maxEventStreams`).
 */
import { Effect, Exit, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import type * as Runs from "../Runs.js"
import * as UiMessageStream from "../UiMessageStream.js"

/** The run's events from the first; the stream ends with the run, and a client that goes away first cancels it. */
export const followed = (runs: Runs.Service, runId: string): Effect.Effect<Stream.Stream<Runs.Indexed, Runs.RunFailed>> =>
  Effect.map(runs.events(runId), (indexed) => indexed.pipe(Stream.ensuring(Effect.ignore(runs.cancel(runId))))).pipe(
    // The run was started by the caller just now: it is in the registry.
    Effect.catchTag("RunNotFound", (error) => Effect.die(error))
  )

/** A run's events as the AI SDK's UI message stream, with the protocol's headers (`options`: `UiMessageStream.Options`). */
export const uiMessageResponse = (
  events: Stream.Stream<Runs.Indexed, Runs.RunFailed>,
  options: UiMessageStream.Options = {}
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.stream(
    UiMessageStream.toSse(events.pipe(Stream.map((item) => item.event), Stream.mapError((failed) => failed.error)), options).pipe(Stream.encodeText),
    { headers: UiMessageStream.headers }
  )

/**
 * A chat's answer: the run's events from the first as the UI message stream, ending when the run waits for people
 * (the run goes on waiting for the answers, which the next request brings), from where the message last ended when
 * `continueAfter` is given. A client that goes away before the response ends cancels the run; a response that ended
 * (the run ended, or waits) does not.
 */
export const chatResponse = (
  runs: Runs.Service,
  runId: string,
  options: { readonly continueAfter?: number | undefined; readonly owner?: string | undefined } = {}
): Effect.Effect<HttpServerResponse.HttpServerResponse, Runs.RunNotFound> =>
  Effect.map(runs.events(runId, { owner: options.owner }), (events) => {
    const chunks = UiMessageStream.toSse(
      events.pipe(Stream.map((item) => item.event), Stream.mapError((failed) => failed.error)),
      { runId, endWhenWaiting: true, continueAfter: options.continueAfter }
    ).pipe(
      Stream.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : Effect.ignore(runs.cancel(runId))))
    )
    return HttpServerResponse.stream(Stream.encodeText(chunks), { headers: UiMessageStream.headers })
  })

/** 429 with `Retry-After`, the error as JSON. */
export const tooMany = (error: Runs.TooManyRuns | Runs.TooManyEventStreams): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.jsonUnsafe(
    { _tag: error._tag, limit: error.limit, retryAfterSeconds: error.retryAfterSeconds, message: error.message },
    { status: 429, headers: { "retry-after": String(error.retryAfterSeconds) } }
  )

/**
 * A run's events as Server-Sent Events, and back. One SSE event per `AgentEvent`: `id: <seq>`, `event: <_tag>`,
 * `data: <json>`. A stream that fails ends with `event: error` carrying the typed error as JSON (its `_tag`, its
 * `message` and its fields), so a reader always learns how a run ended. Comments (`: keep-alive`) are sent while
 * nothing else is, so proxies do not close a quiet connection.
 *
 * The compact form drops what a reader already knows: the `_tag` (it is the `event:` name) from every event, and
 * from a `TextDelta` the timestamp and the session, step and choice index when they are those of the previous
 * delta: `data: {"text":" Paris"}` instead of ~170 bytes. `decoder` restores the full events from either form.
 */
import { Cause, Duration, Stream } from "effect"
import * as Sse from "effect/encoding/Sse"

/**
 * The shape of an event as this module needs it (not `AgentEvent` itself, which re-exports this module: types in a
 * circle are still a circle).
 */
export interface EventLike {
  readonly _tag: string
  readonly sessionId: string
}

interface TextDeltaLike extends EventLike {
  readonly step: string
  readonly index: number
  readonly text: string
}

/** Options of `encode`. */
export interface EncodeOptions {
  /** The id of the first event (default 0); replaying from `Last-Event-ID: n` starts at `n + 1`. */
  readonly firstId?: number | undefined
  /** The compact form (default false). */
  readonly compact?: boolean | undefined
  /** A `: keep-alive` comment after this long without an event (default 15 s; 0: never). */
  readonly heartbeat?: Duration.Input | undefined
}

/** The name of the event that carries a failure. */
export const errorEvent = "error"

/**
 * A typed error as plain JSON: `_tag`, `message` and its own data fields (a nested error the same way, a
 * function or a cycle dropped).
 */
export const errorJson = (error: unknown, depth = 0): Record<string, unknown> => {
  if (typeof error !== "object" || error === null) return { _tag: "UnknownError", message: String(error) }
  const out: Record<string, unknown> = {}
  const tag = (error as { readonly _tag?: unknown })._tag
  out._tag = typeof tag === "string" ? tag : error instanceof Error ? error.name : "UnknownError"
  const message = (error as { readonly message?: unknown }).message
  if (typeof message === "string") out.message = message
  for (const [key, value] of Object.entries(error)) {
    if (key === "_tag" || key === "message" || key === "stack" || key === "cause" || typeof value === "function") continue
    if (value instanceof Error || (typeof value === "object" && value !== null && "_tag" in value)) {
      if (depth < 4) out[key] = errorJson(value, depth + 1)
      continue
    }
    try {
      JSON.stringify(value)
      out[key] = value
    } catch {
      // A cycle or a bigint: not data a reader can use.
    }
  }
  return out
}

interface DeltaContext {
  sessionId: string
  step: string
  index: number
}

const dataOf = (event: EventLike, compact: boolean, last: { delta: DeltaContext | undefined }): string => {
  if (!compact) return JSON.stringify(event)
  const { _tag, ...rest } = event
  if (event._tag !== "TextDelta") return JSON.stringify(rest)
  const delta = event as TextDeltaLike
  const previous = last.delta
  const data: Record<string, unknown> = { text: delta.text }
  if (previous === undefined || previous.sessionId !== delta.sessionId) data.sessionId = delta.sessionId
  if (previous === undefined || previous.step !== delta.step) data.step = delta.step
  if (previous === undefined || previous.index !== delta.index) data.index = delta.index
  last.delta = { sessionId: delta.sessionId, step: delta.step, index: delta.index }
  return JSON.stringify(data)
}

/** The SSE text of a stream of events; a failure becomes a final `event: error`. Never fails. */
export const encode = <E, R>(
  events: Stream.Stream<EventLike, E, R>,
  options: EncodeOptions = {}
): Stream.Stream<string, never, R> => {
  let id = options.firstId ?? 0
  const compact = options.compact ?? false
  const last: { delta: DeltaContext | undefined } = { delta: undefined }
  const frames = events.pipe(
    Stream.map((event) => {
      // A delta after another kind of event names its context again (a reader may have skipped deltas).
      if (event._tag !== "TextDelta") last.delta = undefined
      return Sse.encoder.write({ _tag: "Event", id: String(id++), event: event._tag, data: dataOf(event, compact, last) })
    }),
    Stream.catchCause((cause) =>
      Stream.succeed(Sse.encoder.write({
        _tag: "Event",
        id: String(id++),
        event: errorEvent,
        data: JSON.stringify(errorJson(failureOf(cause)))
      }))
    )
  )
  const every = Duration.fromInputUnsafe(options.heartbeat ?? Duration.seconds(15))
  if (Duration.toMillis(every) <= 0) return frames
  // Ticks from the start; the first is immediate, so skip it. The merge ends when the events end.
  const heartbeats = Stream.tick(every).pipe(Stream.drop(1), Stream.map(() => ": keep-alive\n\n"))
  return Stream.merge(frames, heartbeats, { haltStrategy: "left" })
}

/** The typed error of a failed stream; a defect or an interruption as an error of its own. */
const failureOf = (cause: Cause.Cause<unknown>): unknown => {
  const error = Cause.findErrorOption(cause)
  if (error._tag === "Some") return error.value
  if (Cause.hasInterruptsOnly(cause)) return { _tag: "Interrupted", message: "the run was interrupted" }
  const defect = Cause.squash(cause)
  return { _tag: "Defect", message: defect instanceof Error ? defect.message : String(defect) }
}

/** One SSE event as read: its name and its data. */
export interface Received {
  readonly event: string
  readonly data: string
}

/** What a decoder answers: an event of the run, or the error that ended it. */
export type Decoded =
  | { readonly _tag: "Event"; readonly event: Record<string, unknown> & { readonly _tag: string } }
  | { readonly _tag: "Error"; readonly error: Record<string, unknown> }

/**
 * A decoder of one connection's events, full or compact (it keeps the context compact deltas leave out, so use
 * one per connection, in order). The data is trusted to be valet's: decode it with `EventLike` when
 * it is not.
 */
export const decoder = (): (received: Received) => Decoded => {
  let delta: DeltaContext | undefined
  let timestamp = 0
  return (received) => {
    const data = JSON.parse(received.data) as Record<string, unknown>
    if (received.event === errorEvent) return { _tag: "Error", error: data }
    if (received.event !== "TextDelta") {
      delta = undefined
      timestamp = typeof data.timestamp === "number" ? data.timestamp : timestamp
      return { _tag: "Event", event: { ...data, _tag: received.event } }
    }
    const sessionId = typeof data.sessionId === "string" ? data.sessionId : delta?.sessionId ?? ""
    const step = typeof data.step === "string" ? data.step : delta?.step ?? ""
    const index = typeof data.index === "number" ? data.index : delta?.index ?? 0
    if (typeof data.timestamp === "number") timestamp = data.timestamp
    delta = { sessionId, step, index }
    return {
      _tag: "Event",
      event: { _tag: "TextDelta", sessionId, timestamp, step, index, text: String(data.text ?? "") }
    }
  }
}

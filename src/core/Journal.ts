/**
 * Record / replay of model calls. `layerRecord(path)` wraps a real `Model` and appends every call of a run to a
 * JSONL cassette; `layerReplay(path)` answers the same calls from the cassette with no model at all. A run
 * recorded once against a real server becomes a deterministic test.
 *
 * A call is keyed by its session (relative to the run's root, so a recording made under one random session id
 * replays under another; sub-agents have deterministic ids), its step name, a hash of the request and how many
 * times that same key was seen before. A call that was not recorded fails with `ReplayMiss` naming the key.
 *
 * The bytes of a content part (an image, a file, audio) are stored once per cassette, by digest: a line
 * `{"blob": "sha256:<hex>", "data": "<base64>"}` before the first entry that uses them, and in the entries the part's
 * `data` is that `sha256:<hex>` (a run that sends one image on every turn stores it once). A tool result's parts
 * are stored alike, and so is the base64 of a `data:` URL (`data:image/png;base64,sha256:<hex>`, sharing the blob of
 * the same bytes sent as `data`). `read` puts the bytes back.
 *
 * @example
 * ```ts
 * import * as NodeServices from "@effect/platform-node/NodeServices"
 * import { Effect, Layer } from "effect"
 * import { Agent, Journal, ScriptedModel } from "valet"
 *
 * const agent = Agent.make({ name: "geographer", instructions: "Answer in one word." })
 * const ask = Agent.run(agent, "The capital of France?")
 * const cassette = "test/cassettes/capital.jsonl"
 *
 * // Record: every call goes to the wrapped model (a real server in practice) and into the cassette.
 * const recorded = ask.pipe(Effect.provide(Journal.layerRecord(cassette).pipe(Layer.provide(ScriptedModel.layer(["Paris"])))))
 *
 * // Replay: the same run answered from the cassette, with no model at all (a deterministic test).
 * const replayed = ask.pipe(Effect.provide(Journal.layerReplay(cassette)))
 *
 * const program = Effect.andThen(recorded, replayed).pipe(Effect.provide(NodeServices.layer))
 * ```
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import { Effect, Exit, FileSystem, Layer, Path, Schema, Semaphore, Stream } from "effect"
import { describeIssue } from "./internal/decode.js"
import { canonicalJson } from "./internal/json.js"
import * as Chunks from "./internal/modelChunks.js"
import * as Model from "./Model.js"
import * as ModelError from "./ModelError.js"

/**
 * The cassette could not be read or written; `line` points at a bad record.
 *
 * @since 0.1.0
 * @category errors
 */
export class JournalError extends Schema.TaggedError<JournalError>()("JournalError", {
  path: Schema.String,
  line: Schema.optional(Schema.Number),
  message: Schema.String
}) {}

/**
 * One recorded call: its key, the request, and the response or the error it ended with.
 *
 * @since 0.1.0
 * @category models
 */
export const Entry = Schema.Struct({
  session: Schema.String,
  step: Schema.String,
  hash: Schema.String,
  occurrence: Schema.Int,
  request: Model.Request,
  response: Schema.optional(Model.Response),
  error: Schema.optional(ModelError.ModelError)
})
/**
 * One recorded call.
 *
 * @since 0.1.0
 * @category models
 */
export type Entry = typeof Entry.Type

const EntryLine = Schema.fromJsonString(Entry)
const encodeEntry = Schema.encodeSync(Entry)
const decodeEntry = Schema.decodeUnknownExit(Entry)
const decodeLine = Schema.decodeUnknownExit(EntryLine)

const blobPrefix = "sha256:"

type Json = Record<string, unknown>

/** A part list of a message: its content's, or a tool result's `parts`. */
const partLists = (message: Json): ReadonlyArray<"content" | "parts"> =>
  Array.isArray(message["content"])
    ? Array.isArray(message["parts"]) ? ["content", "parts"] : ["content"]
    : Array.isArray(message["parts"]) ? ["parts"] : []

/**
 * A part with its bytes swapped by `swap`: its `data`, or the base64 of a `data:` URL (which keeps its header, so
 * `data:image/png;base64,sha256:<hex>`: no base64 text holds a `:`, so a stored URL is never read as a digest by
 * mistake, and the same bytes sent as `data` or as a data URL share one blob).
 */
const swapPart = (part: Json, swap: (data: string) => string): Json => {
  if (typeof part["data"] === "string") return { ...part, data: swap(part["data"]) }
  const url = part["url"]
  if (typeof url !== "string" || url.slice(0, 5).toLowerCase() !== "data:") return part
  const comma = url.indexOf(",")
  if (comma < 0) return part
  return { ...part, url: url.slice(0, comma + 1) + swap(url.slice(comma + 1)) }
}

/**
 * `entry` (encoded) with each part's bytes swapped by `swap` (for its data): a user message's content parts and a
 * tool result's `parts`, `data` or data URL; `undefined` when it holds no parts, the common case, so plain entries
 * are not copied.
 */
const swapData = (entry: Json, swap: (data: string) => string): Json | undefined => {
  const request = entry["request"] as Json
  const messages = request["messages"] as ReadonlyArray<Json> | undefined
  if (messages === undefined || !messages.some((message) => partLists(message).length > 0)) return undefined
  return {
    ...entry,
    request: {
      ...request,
      messages: messages.map((message) => {
        const lists = partLists(message)
        if (lists.length === 0) return message
        const out: Json = { ...message }
        for (const list of lists) out[list] = (message[list] as ReadonlyArray<Json>).map((part) => swapPart(part, swap))
        return out
      })
    }
  }
}

/** The cassette lines of one entry: a blob line for each part's bytes not stored yet (`stored`), then the entry. */
const linesOf = (entry: Entry, stored: Set<string>): string => {
  const encoded = encodeEntry(entry) as unknown as Json
  let blobs = ""
  const swapped = swapData(encoded, (data) => {
    const digest = blobPrefix + createHash("sha256").update(data).digest("hex")
    if (!stored.has(digest)) {
      stored.add(digest)
      blobs += JSON.stringify({ blob: digest, data }) + "\n"
    }
    return digest
  })
  return blobs + JSON.stringify(swapped ?? encoded) + "\n"
}

/**
 * The hash of a request: the first 16 hex digits of the SHA-256 of its canonical JSON.
 *
 * @since 0.1.0
 * @category utils
 */
export const hashRequest = (request: Model.Request): string =>
  createHash("sha256").update(canonicalJson(request)).digest("hex").slice(0, 16)

interface Key {
  readonly session: string
  readonly step: string
  readonly hash: string
}

const keyOf = (context: Model.CallContext | undefined, request: Model.Request): Key => {
  const hash = hashRequest(request)
  if (context === undefined) return { session: "-", step: "call", hash }
  const session = context.sessionId.startsWith(context.rootSessionId)
    ? `root${context.sessionId.slice(context.rootSessionId.length)}`
    : context.sessionId
  return { session, step: context.step, hash }
}

const keyText = (key: Key, occurrence: number): string => `${key.session}/${key.step}/${key.hash}#${occurrence}`

/** Counts how often each key was seen, to tell apart identical calls of one step. */
const occurrences = () => {
  const seen = new Map<string, number>()
  return (key: Key): number => {
    const base = keyText(key, 0)
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    return n
  }
}

/**
 * Records every call of the wrapped `Model` to `path` (a new cassette: an existing file is replaced), and
 * answers as the wrapped model does.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRecord = (
  path: string
): Layer.Layer<Model.Model, JournalError, Model.Model | FileSystem.FileSystem | Path.Path> =>
  Layer.effect(
    Model.Model,
    Effect.gen(function*() {
      const inner = yield* Model.Model
      const fs = yield* FileSystem.FileSystem
      const paths = yield* Path.Path
      const fail = (error: unknown) => new JournalError({ path, message: String(error) })
      yield* fs.makeDirectory(paths.dirname(path), { recursive: true }).pipe(Effect.mapError(fail))
      yield* fs.writeFileString(path, "").pipe(Effect.mapError(fail))
      const next = occurrences()
      // The digests of the bytes already in the file.
      const stored = new Set<string>()
      // One writer at a time: concurrent sub-agents record into one file, a whole line each.
      const lock = yield* Semaphore.make(1)
      const write = (entry: Entry) =>
        lock.withPermits(1)(Effect.suspend(() => fs.writeFileString(path, linesOf(entry, stored), { flag: "a" }))).pipe(
          // A cassette that silently misses calls would replay wrongly later: fail loudly instead.
          Effect.catch((error) => Effect.die(fail(error)))
        )

      const begin = (request: Model.Request) =>
        Effect.map(Model.currentCallContext, (context) => {
          const key = keyOf(context, request)
          return { ...key, occurrence: next(key), request }
        })

      const service: Model.Service = {
        // The recorded model's window: compaction measures calls the same with and without the recording.
        ...(inner.contextWindow !== undefined ? { contextWindow: inner.contextWindow } : {}),
        generate: (request) =>
          Effect.flatMap(begin(request), (base) =>
            inner.generate(request).pipe(
              Effect.tap((response) => write({ ...base, response })),
              Effect.tapError((error) => write({ ...base, error }))
            )),
        stream: (request) =>
          Stream.unwrap(Effect.map(begin(request), (base) => {
            const acc = Chunks.emptyAccumulator()
            return inner.stream(request).pipe(
              Stream.tap((chunk) => Effect.sync(() => Chunks.addChunk(acc, chunk))),
              Stream.concat(Stream.fromEffectDrain(Effect.suspend(() => write({ ...base, response: Chunks.toResponse(acc) })))),
              Stream.tapError((error) => write({ ...base, error }))
            )
          })),
        streamInto: (request, onChunk) =>
          Effect.flatMap(begin(request), (base) =>
            Model.streamInto(request, onChunk).pipe(
              Effect.provideService(Model.Model, inner),
              Effect.tap((response) => write({ ...base, response })),
              Effect.tapError((error) => write({ ...base, error }))
            ))
      }
      return service
    })
  )

/** The one-line reason a line did not decode. */
const describe = (exit: Exit.Failure<unknown, Schema.SchemaError>, line: string): string => {
  const reason = exit.cause.reasons[0]
  return reason !== undefined && reason._tag === "Fail" ? describeIssue(reason.error.issue, line) : "unreadable"
}

/**
 * Reads a cassette: every line decoded, a bad one reported with its line number.
 *
 * @since 0.1.0
 * @category utils
 */
export const read = (path: string): Effect.Effect<ReadonlyArray<Entry>, JournalError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(path).pipe(
      Effect.mapError((error) => new JournalError({ path, message: `cannot read the cassette: ${error.message}` }))
    )
    const entries: Array<Entry> = []
    const blobs = new Map<string, string>()
    const lines = text.split("\n")
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!
      if (line.trim() === "") continue
      let json: unknown
      try {
        json = JSON.parse(line)
      } catch {
        json = undefined
      }
      const object = typeof json === "object" && json !== null && !Array.isArray(json) ? json as Json : undefined
      if (object !== undefined && typeof object["blob"] === "string" && typeof object["data"] === "string") {
        // The bytes must be those the digest names: an edited or damaged blob would replay other bytes silently.
        const digest = blobPrefix + createHash("sha256").update(object["data"]).digest("hex")
        if (digest !== object["blob"]) {
          return yield* new JournalError({
            path,
            line: i + 1,
            message: `${path}:${i + 1} holds bytes whose digest is ${digest}, not the ${object["blob"]} it names`
          })
        }
        blobs.set(object["blob"], object["data"])
        continue
      }
      let missing: string | undefined
      const whole = object !== undefined && typeof object["request"] === "object" && object["request"] !== null
        ? swapData(object, (data) => {
          if (!data.startsWith(blobPrefix)) return data
          const bytes = blobs.get(data)
          if (bytes === undefined) missing ??= data
          return bytes ?? data
        }) ?? object
        : undefined
      if (missing !== undefined) {
        return yield* new JournalError({ path, line: i + 1, message: `${path}:${i + 1} uses the bytes ${missing}, which no line before it holds` })
      }
      const decoded = whole !== undefined ? decodeEntry(whole) : decodeLine(line)
      if (Exit.isFailure(decoded)) {
        return yield* new JournalError({
          path,
          line: i + 1,
          message: `${path}:${i + 1} is not a journal entry: ${describe(decoded, line)}`
        })
      }
      entries.push(decoded.value)
    }
    return entries
  })

/**
 * Answers model calls from the cassette at `path`, with no model. An unrecorded call fails with `ReplayMiss`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerReplay = (path: string): Layer.Layer<Model.Model, JournalError, FileSystem.FileSystem> =>
  Layer.effect(
    Model.Model,
    Effect.gen(function*() {
      const entries = yield* read(path)
      const byKey = new Map<string, Entry>()
      for (const entry of entries) byKey.set(keyText(entry, entry.occurrence), entry)
      const next = occurrences()

      const lookup = (request: Model.Request): Effect.Effect<Model.Response, ModelError.ModelError> =>
        Effect.flatMap(Model.currentCallContext, (context) => {
          const key = keyOf(context, request)
          const text = keyText(key, next(key))
          const entry = byKey.get(text)
          if (entry === undefined) return Effect.fail(new ModelError.ReplayMiss({ key: text, path }))
          if (entry.error !== undefined) return Effect.fail(entry.error)
          if (entry.response !== undefined) return Effect.succeed(entry.response)
          return Effect.fail(new ModelError.ReplayMiss({ key: text, path }))
        })

      const service: Model.Service = {
        generate: lookup,
        stream: (request) => Stream.unwrap(Effect.map(lookup(request), (response) => Stream.fromIterable(Model.toChunks(response)))),
        streamInto: (request, onChunk) => Effect.flatMap(lookup(request), (response) => Model.replayInto(response, onChunk))
      }
      return service
    })
  )

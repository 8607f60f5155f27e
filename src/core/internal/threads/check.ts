/**
 * What both thread stores check the same way: the arguments a caller gives (ids, owners, limits, cursors, messages)
 * and the owner of a thread found. Each refusal is an error naming the operation, the thread and the field.
 */
import { Effect, Result, Schema } from "effect"
import { formatIssue } from "../decode.js"
import { randomHex20 } from "../ids.js"
import { Message } from "../modelSchema.js"
import { vectorProblem } from "../vectors.js"
import { type MessageVector, type RecallQuery, type Summary, type Thread, ThreadForbidden, threadIdProblem, ThreadStoreError } from "./model.js"

const decodeMessage = Schema.decodeUnknownResult(Message)

export const newThreadId = (): string => `thr_${randomHex20()}`

export const newLeaseToken = (): string => `lease_${randomHex20()}`

/**
 * The part of a turn key's lease token that every execution of the turn shares (`turn_<key>#`), so that a resumed
 * turn takes back its own lease at once; never a random token's prefix.
 */
export const turnLeasePrefix = (turnKey: string): string => `turn_${turnKey}#`

/**
 * A turn key's lease token: the turn's prefix and a part of this execution's own, so that an earlier execution of
 * the same turn, still ending somewhere, cannot give back (or renew) the lease its resumed copy holds now.
 */
export const turnLeaseToken = (turnKey: string): string => `${turnLeasePrefix(turnKey)}${randomHex20()}`

/** A turn key: a non-empty string of at most 256 characters (a durable turn's run id). */
export const checkTurnKey = (operation: string, turnKey: string | undefined, threadId: string): Effect.Effect<void, ThreadStoreError> =>
  turnKey === undefined || (typeof turnKey === "string" && turnKey.length > 0 && turnKey.length <= 256)
    ? Effect.void
    : Effect.fail(refuse(operation, `turnKey must be a non-empty string of at most 256 characters, got ${JSON.stringify(String(turnKey).slice(0, 60))}`, threadId))

export const refuse = (operation: string, message: string, threadId?: string, index?: number) =>
  new ThreadStoreError({
    operation,
    message: `Threads.${operation}: ${message}`,
    ...(threadId !== undefined ? { threadId } : {}),
    ...(index !== undefined ? { index } : {})
  })

export const checkId = (operation: string, id: string): Effect.Effect<void, ThreadStoreError> => {
  const problem = typeof id === "string" ? threadIdProblem(id) : "the thread id must be a string"
  return problem === undefined ? Effect.void : Effect.fail(refuse(operation, problem))
}

export const checkOwner = (operation: string, owner: unknown, threadId?: string): Effect.Effect<void, ThreadStoreError> =>
  typeof owner === "string" && owner.length > 0 && owner.length <= 256
    ? Effect.void
    : Effect.fail(refuse(operation, "owner must be a non-empty string of at most 256 characters", threadId))

/** The thread, when `owner` is not given or is its owner. */
export const owned = (operation: string, thread: Thread, owner: string | undefined): Effect.Effect<Thread, ThreadForbidden> =>
  owner === undefined || owner === thread.owner
    ? Effect.succeed(thread)
    : Effect.fail(new ThreadForbidden({ threadId: thread.id, message: `Threads.${operation}: thread ${JSON.stringify(thread.id)} belongs to another owner` }))

export const checkInteger = (
  operation: string,
  field: string,
  value: number | undefined,
  fallback: number,
  min: number,
  max: number,
  threadId?: string
): Effect.Effect<number, ThreadStoreError> => {
  if (value === undefined) return Effect.succeed(fallback)
  return Number.isInteger(value) && value >= min && value <= max
    ? Effect.succeed(value)
    : Effect.fail(refuse(operation, `${field} must be an integer in [${min}, ${max}], got ${String(value)}`, threadId))
}

/** The messages to append, each checked: the first that is not a message is refused by its position. */
export const checkMessages = (
  operation: string,
  threadId: string,
  messages: ReadonlyArray<unknown>,
  firstIndex: number
): Effect.Effect<ReadonlyArray<Message>, ThreadStoreError> => {
  const checked: Array<Message> = []
  for (let i = 0; i < messages.length; i++) {
    const decoded = decodeMessage(messages[i])
    if (Result.isFailure(decoded)) {
      return Effect.fail(refuse(operation, formatIssue(`messages[${i}] (message ${firstIndex + i} of thread ${JSON.stringify(threadId)}) is not a message`, decoded.failure.issue, messages[i]), threadId, firstIndex + i))
    }
    checked.push(decoded.success)
  }
  return Effect.succeed(checked)
}

/** An owner's threads are listed by (updatedAt, id), newest first; a cursor is where the last page ended. */
export const cursorOf = (thread: Thread): string => `${thread.updatedAt}.${thread.id}`

export const parseCursor = (cursor: string | undefined): Result.Result<{ readonly updatedAt: number; readonly id: string } | undefined, string> => {
  if (cursor === undefined) return Result.succeed(undefined)
  const match = /^(\d{1,16})\.(.+)$/.exec(cursor)
  if (match === null || threadIdProblem(match[2]!) !== undefined) return Result.fail(`cursor ${JSON.stringify(cursor.slice(0, 80))} is not one a page of threads gave`)
  return Result.succeed({ updatedAt: Number(match[1]), id: match[2]! })
}

export const metadataOf = (operation: string, metadata: unknown, threadId?: string): Effect.Effect<Readonly<Record<string, unknown>>, ThreadStoreError> => {
  if (metadata === undefined) return Effect.succeed({})
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) {
    return Effect.fail(refuse(operation, "metadata must be a JSON object", threadId))
  }
  try {
    // Stored as JSON: what does not survive it (functions, cycles) is refused here rather than lost.
    const text = JSON.stringify(metadata)
    if (text.length > 65_536) return Effect.fail(refuse(operation, `metadata must be at most 65536 characters of JSON, got ${text.length}`, threadId))
    return Effect.succeed(JSON.parse(text) as Record<string, unknown>)
  } catch (error) {
    return Effect.fail(refuse(operation, `metadata is not JSON: ${error instanceof Error ? error.message : String(error)}`, threadId))
  }
}

/** A working-memory document as stored: JSON text of at most 64 KiB, or why not. */
export const memoryText = (key: string, document: unknown): Effect.Effect<string, ThreadStoreError> => {
  if (typeof key !== "string" || key.length === 0 || key.length > 300) {
    return Effect.fail(refuse("writeMemory", "the key must be a non-empty string of at most 300 characters"))
  }
  try {
    const text = JSON.stringify(document)
    if (text === undefined) return Effect.fail(refuse("writeMemory", `the document of ${JSON.stringify(key)} is not JSON`))
    if (text.length > 65_536) return Effect.fail(refuse("writeMemory", `the document of ${JSON.stringify(key)} must be at most 65536 characters of JSON, got ${text.length}`))
    return Effect.succeed(text)
  } catch (error) {
    return Effect.fail(refuse("writeMemory", `the document of ${JSON.stringify(key)} is not JSON: ${error instanceof Error ? error.message : String(error)}`))
  }
}

/** A model name as stored with a vector: what recall matches on. */
const checkModel = (operation: string, model: unknown, threadId?: string): Effect.Effect<string, ThreadStoreError> =>
  typeof model === "string" && model.length > 0 && model.length <= 256
    ? Effect.succeed(model)
    : Effect.fail(refuse(operation, "the embedding model's name must be a non-empty string of at most 256 characters", threadId))

/** The most dimensions a stored vector may have (pgvector's limit for a column without a size is 16,000). */
export const maxDimensions = 16_000

/**
 * The vectors to store, each checked: its index a message of the thread (below `messageCount`), once; its vector
 * finite, not all zeros, of the same length as the others. The first that is not is refused by its index.
 */
export const checkVectors = (
  threadId: string,
  model: unknown,
  vectors: ReadonlyArray<MessageVector>,
  messageCount: number
): Effect.Effect<{ readonly model: string; readonly dimensions: number; readonly vectors: ReadonlyArray<{ readonly index: number; readonly vector: Float32Array }> }, ThreadStoreError> =>
  Effect.flatMap(checkModel("storeVectors", model, threadId), (name) => {
    const out: Array<{ index: number; vector: Float32Array }> = []
    const seen = new Set<number>()
    const dimensions = vectors[0]?.vector.length ?? 0
    for (const { index, vector } of vectors) {
      const where = `message ${index} of thread ${JSON.stringify(threadId)}`
      if (!Number.isInteger(index) || index < 0 || index >= messageCount) {
        return Effect.fail(refuse("storeVectors", `index ${String(index)} is not a message of thread ${JSON.stringify(threadId)} (it holds ${messageCount})`, threadId))
      }
      if (seen.has(index)) return Effect.fail(refuse("storeVectors", `the vector of ${where} is given twice`, threadId, index))
      seen.add(index)
      if (!Array.isArray(vector) && !(vector instanceof Float32Array)) {
        return Effect.fail(refuse("storeVectors", `the vector of ${where} is not a list of numbers`, threadId, index))
      }
      const problem = vectorProblem(vector)
      if (problem !== undefined) return Effect.fail(refuse("storeVectors", `the vector of ${where} cannot be stored: ${problem}`, threadId, index))
      if (vector.length !== dimensions || vector.length > maxDimensions) {
        return Effect.fail(refuse("storeVectors", `the vector of ${where} has ${vector.length} dimensions, not ${dimensions} as the others (at most ${maxDimensions})`, threadId, index))
      }
      out.push({ index, vector: Float32Array.from(vector) })
    }
    return Effect.succeed({ model: name, dimensions, vectors: out })
  })

/** A recall query, checked: owner, model, vector, `topK` in [1, 100], `minScore` in [-1, 1], the thread ids. */
export const checkRecall = (query: RecallQuery): Effect.Effect<{ readonly query: RecallQuery; readonly vector: Float32Array }, ThreadStoreError> =>
  Effect.gen(function*() {
    yield* checkOwner("recall", query.owner)
    yield* checkModel("recall", query.model)
    yield* checkInteger("recall", "topK", query.topK, 5, 1, 100)
    if (query.minScore !== undefined && !(query.minScore >= -1 && query.minScore <= 1)) {
      return yield* refuse("recall", `minScore must be a number in [-1, 1], got ${String(query.minScore)}`)
    }
    if (query.threadId !== undefined) yield* checkId("recall", query.threadId)
    if (query.exclude !== undefined) yield* checkId("recall", query.exclude.threadId)
    const problem = Array.isArray(query.vector) || query.vector instanceof Float32Array ? vectorProblem(query.vector) : "it is not a list of numbers"
    if (problem !== undefined) return yield* refuse("recall", `the query vector cannot be compared: ${problem}`)
    if (query.vector.length > maxDimensions) return yield* refuse("recall", `the query vector has ${query.vector.length} dimensions, more than ${maxDimensions}`)
    return { query, vector: Float32Array.from(query.vector) }
  })

/** Whether the message at (`threadId`, `index`) is left out by the query. */
export const excluded = (query: RecallQuery, threadId: string, index: number): boolean => {
  const exclude = query.exclude
  return exclude !== undefined && exclude.threadId === threadId && index >= exclude.start && (exclude.end === undefined || index < exclude.end)
}

/** A summary to keep: text of at most 256 KiB, standing for 1 to `count` messages of the thread. */
export const checkSummary = (threadId: string, summary: Summary, count: number): Effect.Effect<Summary, ThreadStoreError> => {
  if (typeof summary !== "object" || summary === null || typeof summary.content !== "string" || summary.content.length === 0 || summary.content.length > 262_144) {
    return Effect.fail(refuse("writeSummary", "content must be a non-empty string of at most 262144 characters", threadId))
  }
  if (!Number.isInteger(summary.through) || summary.through < 1 || summary.through > count) {
    return Effect.fail(refuse("writeSummary", `through must be an integer in [1, ${count}] (the thread's messages), got ${String(summary.through)}`, threadId))
  }
  return Effect.succeed({ content: summary.content, through: summary.through })
}

/**
 * The data, errors and service interface of `Threads`, apart from the module so that the stores built on them
 * (memory, SQL) and the turn do not import the module that exports them.
 */
import { type Effect, Schema } from "effect"
import type { Message } from "../modelSchema.js"

// ---------------------------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------------------------

/**
 * A thread as stored, without its messages.
 *
 * @since 0.2.0
 * @category models
 */
export interface Thread {
  readonly id: string
  /** Whose it is: set by the embedding app (its auth), checked on every read and write that names an owner. */
  readonly owner: string
  readonly metadata: Readonly<Record<string, unknown>>
  /** Milliseconds since the epoch, by the `Clock`. */
  readonly createdAt: number
  readonly updatedAt: number
  /** How many messages it holds: the index the next message gets. */
  readonly messageCount: number
}

/**
 * A page of a thread's messages, oldest first: those with indexes `[start, start + messages.length)`.
 *
 * @since 0.2.0
 * @category models
 */
export interface Page {
  readonly threadId: string
  readonly start: number
  readonly messages: ReadonlyArray<Message>
  /** The thread's message count when read. */
  readonly total: number
}

/**
 * A thread's summary: what a turn's compaction made of the thread's first `through` messages (indexes
 * `[0, through)`), kept beside them — the messages themselves are never changed. The next turn is given the summary
 * and only the messages after it.
 *
 * @since 0.2.0
 * @category models
 */
export interface Summary {
  /** The summary message's text (it starts with `Compaction.summaryPrefix`). */
  readonly content: string
  /** How many of the thread's first messages it stands for. */
  readonly through: number
}

/**
 * A page of an owner's threads, most recently updated first; `nextCursor` reads the next page.
 *
 * @since 0.2.0
 * @category models
 */
export interface ThreadPage {
  readonly threads: ReadonlyArray<Thread>
  readonly nextCursor?: string | undefined
}

/**
 * Why `id` cannot be a thread id, or `undefined` when it can: letters, digits, `-`, `.`, `:` and `_`, at most
 * 128 characters (the same rule as a session id).
 *
 * @since 0.2.0
 * @category names
 */
export const threadIdProblem = (id: string): string | undefined =>
  /^[A-Za-z0-9][A-Za-z0-9_.:-]*$/.test(id) && !id.includes("__") && id.length <= 128
    ? undefined
    : `invalid thread id ${JSON.stringify(id.length > 60 ? `${id.slice(0, 57)}...` : id)}: use letters, digits, -, ., : and single _, at most 128 characters`

/**
 * A thread id as a schema (see `threadIdProblem`).
 *
 * @since 0.2.0
 * @category names
 */
export const ThreadId = Schema.String.check(Schema.makeFilter((id: string) => threadIdProblem(id) ?? true))

// ---------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------

/**
 * No thread has this id (or it was deleted).
 *
 * @since 0.2.0
 * @category errors
 */
export class ThreadNotFound extends Schema.TaggedError<ThreadNotFound>()("ThreadNotFound", {
  threadId: Schema.String,
  message: Schema.String
}) {}

/**
 * The thread belongs to another owner than the one named (403 over HTTP).
 *
 * @since 0.2.0
 * @category errors
 */
export class ThreadForbidden extends Schema.TaggedError<ThreadForbidden>()("ThreadForbidden", {
  threadId: Schema.String,
  message: Schema.String
}) {}

/**
 * Another turn holds the thread (in this process or another), and the turn was told not to wait (or waited in
 * vain).
 *
 * @since 0.2.0
 * @category errors
 */
export class ThreadBusy extends Schema.TaggedError<ThreadBusy>()("ThreadBusy", {
  threadId: Schema.String,
  message: Schema.String
}) {}

/**
 * The store failed, refused bad input, or read a damaged row: `message` says which, naming the thread and the
 * message's index where there is one.
 *
 * @since 0.2.0
 * @category errors
 */
export class ThreadStoreError extends Schema.TaggedError<ThreadStoreError>()("ThreadStoreError", {
  operation: Schema.String,
  threadId: Schema.optional(Schema.String),
  index: Schema.optional(Schema.Number),
  message: Schema.String
}) {}

/**
 * What a thread operation can fail with.
 *
 * @since 0.2.0
 * @category errors
 */
export type ThreadError = ThreadNotFound | ThreadForbidden | ThreadBusy | ThreadStoreError

// ---------------------------------------------------------------------------------------------------------
// Recall
// ---------------------------------------------------------------------------------------------------------

/**
 * How a store finds the vectors nearest a query: `"memory"` (the memory store), `"sqlite-vec"` (SQLite with the
 * `sqlite-vec` extension loaded: distances computed in SQL), `"pgvector"` (PostgreSQL with the `vector` extension),
 * `"scan"` (any other SQL database: the owner's vectors read a page at a time and compared in JavaScript).
 *
 * @since 0.2.0
 * @category recall
 */
export type VectorSearch = "memory" | "scan" | "sqlite-vec" | "pgvector"

/**
 * The vector of one message of a thread, to store: the message's index and its embedding.
 *
 * @since 0.2.0
 * @category recall
 */
export interface MessageVector {
  readonly index: number
  readonly vector: ReadonlyArray<number>
}

/**
 * What to recall: the `topK` messages of `owner` whose vectors (of `model`) are nearest `vector` by cosine
 * similarity, at least `minScore`, in one thread only when `threadId` is given, leaving out the messages of
 * `exclude.threadId` with indexes in `[exclude.start, exclude.end)` (the page a turn already shows).
 *
 * @since 0.2.0
 * @category recall
 */
export interface RecallQuery {
  readonly owner: string
  readonly model: string
  readonly vector: ReadonlyArray<number>
  readonly topK: number
  readonly minScore?: number | undefined
  readonly threadId?: string | undefined
  readonly exclude?: { readonly threadId: string; readonly start: number; readonly end?: number | undefined } | undefined
}

/**
 * A message recalled: where it is, how near (cosine similarity, 1 the nearest), and the message.
 *
 * @since 0.2.0
 * @category recall
 */
export interface Recalled {
  readonly threadId: string
  readonly index: number
  readonly score: number
  readonly message: Message
}

/**
 * Where a keyed turn is (a turn that took the lease and appended with a `turnKey`): `appended`, its messages being
 * `[start, start + count)` of the thread; or `running`, while that key's lease holds the thread and nothing of the
 * turn is appended yet.
 *
 * @since 0.2.0
 * @category models
 */
export type KeyedTurn =
  | { readonly status: "appended"; readonly start: number; readonly count: number }
  | { readonly status: "running" }

// ---------------------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------------------

/**
 * Options that name the caller's owner: when given, a thread of another owner is `ThreadForbidden`.
 *
 * @since 0.2.0
 * @category options
 */
export interface OwnerOptions {
  readonly owner?: string | undefined
}

/**
 * A lease on a thread: one turn at a time. Held until `release` or until `until` passes (a process that died
 * holding it blocks the thread for one lease at most); `renew` extends it.
 *
 * @since 0.2.0
 * @category models
 */
export interface Lease {
  readonly threadId: string
  readonly token: string
}

/**
 * A thread store. Every write is atomic; every read is schema-checked.
 *
 * @since 0.2.0
 * @category services
 */
export interface Service {
  readonly create: (options: {
    readonly id?: string | undefined
    readonly owner: string
    readonly metadata?: Readonly<Record<string, unknown>> | undefined
  }) => Effect.Effect<Thread, ThreadStoreError>
  readonly get: (threadId: string, options?: OwnerOptions) => Effect.Effect<Thread, ThreadError>
  /** Up to `limit` messages (default 100, at most 1,000) ending before index `before` (default: the end). */
  readonly messages: (
    threadId: string,
    options?: OwnerOptions & { readonly before?: number | undefined; readonly limit?: number | undefined }
  ) => Effect.Effect<Page, ThreadError>
  /** An owner's threads, most recently updated first, `limit` at a time (default 50, at most 500). */
  readonly list: (
    owner: string,
    options?: { readonly limit?: number | undefined; readonly cursor?: string | undefined }
  ) => Effect.Effect<ThreadPage, ThreadError>
  /**
   * Appends messages in one write. With `expectedCount`, only if the thread still holds that many (else
   * `ThreadBusy`: someone else wrote); with `lease`, only while that lease holds it. With `turnKey`, at most once
   * per key and thread: the key is stored with the messages, in the same write, and an append whose key is already
   * stored appends nothing and answers the thread (its count, counting that turn's messages once) — looked up before
   * the count and the lease are checked, so a turn that repeats its append after it landed (a durable turn resumed
   * on another process) is answered, not refused. Two appends of one key at once: one lands, the other is answered.
   */
  readonly append: (
    threadId: string,
    messages: ReadonlyArray<Message>,
    options?: OwnerOptions & {
      readonly expectedCount?: number | undefined
      readonly lease?: Lease | undefined
      readonly turnKey?: string | undefined
    }
  ) => Effect.Effect<Thread, ThreadError>
  /**
   * Where the turn appended with `turnKey` is on the thread (see `KeyedTurn`), or `undefined` when no append carried
   * that key and no lease of it holds the thread: a turn that stored nothing, or never began. (A fork does not carry
   * the keys of the turns it copies.)
   */
  readonly turnOf: (threadId: string, turnKey: string, options?: OwnerOptions) => Effect.Effect<KeyedTurn | undefined, ThreadError>
  /**
   * A new thread (same owner and metadata unless given) holding this one's messages before index `at`, and its
   * summary when that stands for no message at or after `at`.
   */
  readonly fork: (
    threadId: string,
    options: OwnerOptions & {
      readonly at: number
      readonly id?: string | undefined
      readonly metadata?: Readonly<Record<string, unknown>> | undefined
    }
  ) => Effect.Effect<Thread, ThreadError>
  readonly delete: (threadId: string, options?: OwnerOptions) => Effect.Effect<void, ThreadError>
  /**
   * Takes the thread's lease for `durationMs`, or fails with `ThreadBusy` when another holds it. With `turnKey`, the
   * lease is the turn's (its token made from the key), and a lease of the same turn key is taken again even while it
   * holds: a durable turn resumed after its process died takes back its own lease at once, while any other turn
   * waits for that lease to be given back or to expire.
   */
  readonly acquire: (
    threadId: string,
    options: OwnerOptions & { readonly durationMs: number; readonly turnKey?: string | undefined }
  ) => Effect.Effect<Lease, ThreadError>
  /** Extends a lease held; `ThreadBusy` when it was lost (expired and taken). */
  readonly renew: (lease: Lease, durationMs: number) => Effect.Effect<void, ThreadError>
  /** Gives a lease back (nothing when it was lost). */
  readonly release: (lease: Lease) => Effect.Effect<void, ThreadStoreError>
  /**
   * A working-memory document (JSON) by key (`owner:<owner>` or `thread:<id>`, see `Threads.workingMemoryKey`), or
   * `undefined` when none was written.
   */
  readonly readMemory: (key: string) => Effect.Effect<unknown, ThreadStoreError>
  /** Writes a working-memory document (JSON, at most 64 KiB), in one write. */
  readonly writeMemory: (key: string, document: unknown) => Effect.Effect<void, ThreadStoreError>
  /** The thread's summary (see `Summary`), or `undefined` when no turn made one. */
  readonly summary: (threadId: string, options?: OwnerOptions) => Effect.Effect<Summary | undefined, ThreadError>
  /**
   * Replaces the thread's summary, in one write; `through` must be within the thread's messages (1 to its count).
   * With `lease`, only while that lease holds the thread (else `ThreadBusy`).
   */
  readonly writeSummary: (
    threadId: string,
    summary: Summary,
    options?: OwnerOptions & { readonly lease?: Lease | undefined }
  ) => Effect.Effect<void, ThreadError>
  /** How this store searches vectors (see `VectorSearch`). */
  readonly vectorSearch: VectorSearch
  /**
   * Stores the vectors of messages of a thread (embedded by `model`), in one write; a message's vector replaces the
   * one it had. Each index must be a message of the thread; each vector finite, not all zeros, all of one length.
   * Deleted with the thread; copied by `fork` with the messages they belong to.
   */
  readonly storeVectors: (
    threadId: string,
    model: string,
    vectors: ReadonlyArray<MessageVector>,
    options?: OwnerOptions
  ) => Effect.Effect<void, ThreadError>
  /**
   * The messages nearest a vector, best first (see `RecallQuery`). A stored vector that is damaged (not the length
   * its row says, not finite) is a `ThreadStoreError` naming its thread and index.
   */
  readonly recall: (query: RecallQuery) => Effect.Effect<ReadonlyArray<Recalled>, ThreadStoreError>
}


/**
 * Conversations that persist (DESIGN §14): a thread is an id, an owner (a user or tenant id the embedding app sets
 * from its own auth, never from a request body), metadata, and its messages in order — user messages, assistant
 * messages with their tool calls, tool results. `Agent.run(agent, input, { thread })` is a turn: it loads the
 * thread's recent messages (a page, never the whole history of a long thread), runs, and appends the turn's
 * messages in one write when the run ends; one turn at a time per thread, across processes (a lease on the thread's
 * row). A failed or interrupted turn appends the user message and a note of how it ended (or what the app
 * chooses), never half a tool exchange.
 *
 * When a turn's run compacts its history with a summary (`Compaction`), the thread keeps that summary beside its
 * messages (`Threads.summary`: the text and how many of the first messages it stands for): the next turn is given
 * the summary and only the messages after it (still a page of `historyLimit` at most), and its compaction takes the
 * summary in as the earlier one. So a long conversation asks for a summary once every few turns, not on every turn
 * past the window's threshold. The messages are never changed (`messages` reads them all); a fork keeps the summary
 * when it stands for messages before the fork only.
 *
 * Exactly once: an append may carry a **turn key** (`append(id, messages, { turnKey })`), stored with the messages in
 * the same write; an append whose key the thread already holds appends nothing and answers the thread. A lease taken
 * with a turn key is that turn's: the same key takes it again at once, any other turn waits for it to be given back
 * or to expire. Durable thread turns (`Durable.AgentRun` with `thread`, in `valet/Durable`) key both by their run id,
 * so a turn resumed on another process after its own died appends its messages once and does not wait out its own
 * lease. `turnOf(id, key)` reads where a keyed turn's messages landed (or that it still holds the thread), so a key
 * can name a turn: the Responses API's stored response ids do.
 *
 * Layers: `layerMemory` (tests, one process) and `layerSql` on any `effect/sql` `SqlClient` — SQLite
 * (`SqliteClient.layer({ filename })` from `valet/SqliteClient`) or PostgreSQL (`@effect/sql-pg`'s `PgClient`);
 * tables `valet_threads`, `valet_thread_messages`, `valet_thread_turns` (turn keys), `valet_working_memory`,
 * `valet_thread_summaries` and `valet_thread_vectors`, each created when missing (a database made by an earlier valet
 * gets the newer ones when a store opens it). Rows read back are schema-checked: a damaged one is a
 * `ThreadStoreError` naming the thread and the message's index.
 *
 * Semantic recall (`recall` on a turn): messages are embedded by an `EmbeddingModel` when appended, and a turn is
 * shown the owner's past messages nearest its task. Vectors are searched with `sqlite-vec` (SQLite, when the
 * connection loads it), pgvector (PostgreSQL, when the server has it), or a scan.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, ScriptedModel, Threads } from "valet"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief." })
 *
 * const program = Effect.gen(function*() {
 *   const thread = yield* Threads.create({ owner: "user-7" })
 *   yield* Agent.run(assistant, "My name is Ada.", { thread: thread.id })
 *   // The second turn's model sees the first turn: "Your name is Ada."
 *   const second = yield* Agent.run(assistant, "What is my name?", { thread: thread.id })
 *   const page = yield* Threads.messages(thread.id)
 *   return { answer: second.output, messages: page.messages.length } // 4 messages: two turns
 * }).pipe(
 *   Effect.provide(Threads.layerMemory()),
 *   Effect.provide(ScriptedModel.layer(["Hello, Ada.", "Your name is Ada."]))
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Context, Effect, Layer, type Schema } from "effect"
import type { SqlClient } from "effect/sql"
import type { Message } from "./internal/modelSchema.js"
import * as Memory from "./internal/threads/memory.js"
import * as Model from "./internal/threads/model.js"
import * as Sql from "./internal/threads/sql.js"
import type * as Recall from "./internal/threads/recall.js"
import type * as Turn from "./internal/threads/turn.js"
import * as WorkingMemoryInternal from "./internal/threads/workingMemory.js"

// ---------------------------------------------------------------------------------------------------------
// Models, errors, the service's interface (defined in internal/threads/model.ts)
// ---------------------------------------------------------------------------------------------------------

/**
 * A thread as stored, without its messages: id, owner, metadata, times, message count.
 *
 * @since 0.2.0
 * @category models
 */
export type Thread = Model.Thread

/**
 * A page of a thread's messages, oldest first: indexes `[start, start + messages.length)`.
 *
 * @since 0.2.0
 * @category models
 */
export type Page = Model.Page

/**
 * A page of an owner's threads, most recently updated first; `nextCursor` reads the next page.
 *
 * @since 0.2.0
 * @category models
 */
export type ThreadPage = Model.ThreadPage

/**
 * A thread's summary: the text a turn's compaction made of the thread's first `through` messages, kept beside them
 * (the messages are never changed); the next turn is given it and only the messages after it.
 *
 * @since 0.2.0
 * @category models
 */
export type Summary = Model.Summary

/**
 * Options that name the caller's owner: when given, a thread of another owner is `ThreadForbidden`.
 *
 * @since 0.2.0
 * @category options
 */
export type OwnerOptions = Model.OwnerOptions

/**
 * A lease on a thread: one turn at a time, across processes.
 *
 * @since 0.2.0
 * @category models
 */
export type Lease = Model.Lease

/**
 * Where a keyed turn is on its thread: `appended` (its messages `[start, start + count)`) or `running` (its lease
 * holds the thread, nothing appended yet). `Service.turnOf` reads it.
 *
 * @since 0.2.0
 * @category models
 */
export type KeyedTurn = Model.KeyedTurn

/**
 * A thread store: create, get, messages (paged), list (by owner, paged), append (atomic), fork, delete, and the
 * lease of a turn (acquire, renew, release).
 *
 * @since 0.2.0
 * @category services
 */
export type Service = Model.Service

/**
 * Why `id` cannot be a thread id, or `undefined` when it can: letters, digits, `-`, `.`, `:` and single `_`, at
 * most 128 characters.
 *
 * @since 0.2.0
 * @category names
 */
export const threadIdProblem: (id: string) => string | undefined = Model.threadIdProblem

/**
 * A thread id as a schema (see `threadIdProblem`).
 *
 * @since 0.2.0
 * @category names
 */
export const ThreadId = Model.ThreadId

/**
 * No thread has this id (or it was deleted).
 *
 * @since 0.2.0
 * @category errors
 */
export const ThreadNotFound = Model.ThreadNotFound
/**
 * No thread has this id.
 *
 * @since 0.2.0
 * @category errors
 */
export type ThreadNotFound = Model.ThreadNotFound

/**
 * The thread belongs to another owner than the one named (403 over HTTP).
 *
 * @since 0.2.0
 * @category errors
 */
export const ThreadForbidden = Model.ThreadForbidden
/**
 * The thread belongs to another owner.
 *
 * @since 0.2.0
 * @category errors
 */
export type ThreadForbidden = Model.ThreadForbidden

/**
 * Another turn holds the thread, and this one was told not to wait (or waited in vain).
 *
 * @since 0.2.0
 * @category errors
 */
export const ThreadBusy = Model.ThreadBusy
/**
 * Another turn holds the thread.
 *
 * @since 0.2.0
 * @category errors
 */
export type ThreadBusy = Model.ThreadBusy

/**
 * The store failed, refused bad input, or read a damaged row (naming the thread and the message's index).
 *
 * @since 0.2.0
 * @category errors
 */
export const ThreadStoreError = Model.ThreadStoreError
/**
 * The store failed, refused bad input, or read a damaged row.
 *
 * @since 0.2.0
 * @category errors
 */
export type ThreadStoreError = Model.ThreadStoreError

/**
 * A turn's options (`Agent.run(agent, task, { thread: { id, … } })`): the thread's `id`, the caller's `owner`,
 * `onBusy` (`"fail"`, the default, or `"wait"` up to `busyTimeout`), `historyLimit` (the last 100 messages by
 * default), `incomplete` (how a turn that did not complete is kept), `leaseDuration` (60 seconds, renewed),
 * `workingMemory` and `recall` (semantic recall: `RecallOptions`).
 *
 * @since 0.2.0
 * @category options
 */
export type TurnOptions = Turn.TurnOptions

/**
 * How a turn that did not complete is kept: `"note"` (the task and a note of how it ended, with its partial
 * answer; nothing when an input guardrail refused the task), `"drop"` (nothing), or a function giving the messages (from the task, the partial output, the reason, and
 * the run's result when it ended early with one — `undefined` when it failed or its fiber was interrupted).
 *
 * @since 0.2.0
 * @category options
 */
export type Incomplete = Turn.Incomplete

/**
 * What a thread operation can fail with.
 *
 * @since 0.2.0
 * @category errors
 */
export type ThreadError = Model.ThreadError

/**
 * How a store searches vectors: `"memory"`, `"sqlite-vec"`, `"pgvector"` or `"scan"`.
 *
 * @since 0.2.0
 * @category recall
 */
export type VectorSearch = Model.VectorSearch

/**
 * The vector of one message of a thread (its index and embedding), for `storeVectors`.
 *
 * @since 0.2.0
 * @category recall
 */
export type MessageVector = Model.MessageVector

/**
 * What `recall` looks for: an owner's messages nearest a vector of one embedding model.
 *
 * @since 0.2.0
 * @category recall
 */
export type RecallQuery = Model.RecallQuery

/**
 * A message recalled: its thread, index, score (cosine similarity) and the message.
 *
 * @since 0.2.0
 * @category recall
 */
export type Recalled = Model.Recalled

/**
 * Semantic recall on a turn (`{ thread: { id, recall: { topK: 5 } } }`): the task is embedded, the owner's past
 * messages nearest it (not those already in the history given) are shown to the model as one system message, and
 * the turn's user and assistant messages are embedded and stored right after they are appended (in a write of their
 * own: the append, the turn's commit, never waits on the embedding model). `embedding` is the model (default: the
 * `EmbeddingModel` in context), `topK` (5), `minScore`, `scope` (`"owner"`, the default, or `"thread"`), and
 * `onError`: `"skip"` (the default: an embedding failure is logged, the turn runs without recall and its messages
 * are kept without vectors) or `"fail"` (the turn fails with the `ModelError`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, HashedEmbeddingModel, ScriptedModel, Threads } from "valet"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief." })
 *
 * const program = Effect.gen(function*() {
 *   const first = yield* Threads.create({ owner: "ada" })
 *   yield* Agent.run(assistant, "My cat is called Tom.", { thread: { id: first.id, recall: { topK: 3 } } })
 *   // Another conversation of Ada's: the model is shown "[user, thread …] My cat is called Tom." before the task.
 *   const second = yield* Threads.create({ owner: "ada" })
 *   return yield* Agent.run(assistant, "What is my cat called?", { thread: { id: second.id, recall: { topK: 3 } } })
 * }).pipe(
 *   Effect.provide(Threads.layerMemory()),
 *   Effect.provide(HashedEmbeddingModel.layer()), // OpenAiCompatible.layerEmbeddingModelNode({ … }) for a real model
 *   Effect.provide(ScriptedModel.layer(["Nice name.", "Tom."]))
 * )
 * ```
 *
 * @since 0.2.0
 * @category recall
 */
export type RecallOptions = Recall.RecallOptions

// ---------------------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------------------

/**
 * The thread store in context.
 *
 * @since 0.2.0
 * @category services
 */
export class Threads extends Context.Service<Threads, Service>()("valet/Threads") {}

/**
 * Creates a thread (`thr_<random>` unless an id is given).
 *
 * @since 0.2.0
 * @category accessors
 */
export const create = (options: Parameters<Service["create"]>[0]): Effect.Effect<Thread, ThreadStoreError, Threads> =>
  Effect.flatMap(Effect.service(Threads), (threads) => threads.create(options))

/**
 * A thread, without its messages.
 *
 * @since 0.2.0
 * @category accessors
 */
export const get = (threadId: string, options?: OwnerOptions): Effect.Effect<Thread, ThreadError, Threads> =>
  Effect.flatMap(Effect.service(Threads), (threads) => threads.get(threadId, options))

/**
 * A page of a thread's messages (the last 100 by default).
 *
 * @since 0.2.0
 * @category accessors
 */
export const messages = (
  threadId: string,
  options?: Parameters<Service["messages"]>[1]
): Effect.Effect<Page, ThreadError, Threads> => Effect.flatMap(Effect.service(Threads), (threads) => threads.messages(threadId, options))

/**
 * A page of an owner's threads.
 *
 * @since 0.2.0
 * @category accessors
 */
export const list = (owner: string, options?: Parameters<Service["list"]>[1]): Effect.Effect<ThreadPage, ThreadError, Threads> =>
  Effect.flatMap(Effect.service(Threads), (threads) => threads.list(owner, options))

/**
 * Appends messages to a thread in one write.
 *
 * @since 0.2.0
 * @category accessors
 */
export const append = (
  threadId: string,
  messages: ReadonlyArray<Message>,
  options?: Parameters<Service["append"]>[2]
): Effect.Effect<Thread, ThreadError, Threads> => Effect.flatMap(Effect.service(Threads), (threads) => threads.append(threadId, messages, options))

/**
 * Where the turn appended with `turnKey` is on the thread (`KeyedTurn`), or `undefined` when no append carried that
 * key and no lease of it holds the thread.
 *
 * @since 0.2.0
 * @category accessors
 */
export const turnOf = (threadId: string, turnKey: string, options?: OwnerOptions): Effect.Effect<KeyedTurn | undefined, ThreadError, Threads> =>
  Effect.flatMap(Effect.service(Threads), (threads) => threads.turnOf(threadId, turnKey, options))

/**
 * A copy of a thread up to a message (edit and retry: fork before the message to change, then run from there), with
 * the thread's summary when it stands for messages before `at` only.
 *
 * @since 0.2.0
 * @category accessors
 */
export const fork = (threadId: string, options: Parameters<Service["fork"]>[1]): Effect.Effect<Thread, ThreadError, Threads> =>
  Effect.flatMap(Effect.service(Threads), (threads) => threads.fork(threadId, options))

/**
 * The thread's summary (the last one a turn's compaction kept), or `undefined`. `messages` still reads every message.
 *
 * @since 0.2.0
 * @category accessors
 */
export const summary = (threadId: string, options?: OwnerOptions): Effect.Effect<Summary | undefined, ThreadError, Threads> =>
  Effect.flatMap(Effect.service(Threads), (threads) => threads.summary(threadId, options))

/**
 * Deletes a thread and its messages.
 *
 * @since 0.2.0
 * @category accessors
 */
const delete_ = (threadId: string, options?: OwnerOptions): Effect.Effect<void, ThreadError, Threads> =>
  Effect.flatMap(Effect.service(Threads), (threads) => threads.delete(threadId, options))
export {
  /**
   * Deletes a thread and its messages.
   *
   * @since 0.2.0
   * @category accessors
   */
  delete_ as delete
}

/**
 * Stores the vectors of messages of a thread (embedded by the model named), in one write.
 *
 * @since 0.2.0
 * @category recall
 */
export const storeVectors = (
  threadId: string,
  model: string,
  vectors: ReadonlyArray<MessageVector>,
  options?: OwnerOptions
): Effect.Effect<void, ThreadError, Threads> =>
  Effect.flatMap(Effect.service(Threads), (threads) => threads.storeVectors(threadId, model, vectors, options))

/**
 * The owner's messages nearest a vector, best first.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { EmbeddingModel, HashedEmbeddingModel, Threads } from "valet"
 *
 * const program = Effect.gen(function*() {
 *   const thread = yield* Threads.create({ owner: "ada" })
 *   const texts = ["My cat is called Tom.", "The invoice is due Friday."]
 *   yield* Threads.append(thread.id, texts.map((content) => ({ role: "user" as const, content })))
 *   const model = yield* EmbeddingModel.EmbeddingModel
 *   const vectors = yield* model.embed(texts)
 *   yield* Threads.storeVectors(thread.id, model.model, vectors.map((vector, index) => ({ index, vector })))
 *   const [query] = yield* model.embed(["what is the cat called?"])
 *   const [best] = yield* Threads.recall({ owner: "ada", model: model.model, vector: query!, topK: 1 })
 *   return best?.message.content // "My cat is called Tom."
 * }).pipe(Effect.provide(Threads.layerMemory()), Effect.provide(HashedEmbeddingModel.layer()))
 * ```
 *
 * @since 0.2.0
 * @category recall
 */
export const recall = (query: RecallQuery): Effect.Effect<ReadonlyArray<Recalled>, ThreadStoreError, Threads> =>
  Effect.flatMap(Effect.service(Threads), (threads) => threads.recall(query))

// ---------------------------------------------------------------------------------------------------------
// Working memory
// ---------------------------------------------------------------------------------------------------------

/**
 * A working memory for thread turns (`{ thread: { id, workingMemory } }`): where it lives and how it is shown.
 *
 * @since 0.2.0
 * @category working memory
 */
export type WorkingMemory = WorkingMemoryInternal.WorkingMemory

/**
 * A working memory: a document with a schema (a `Schema.Struct`: it is also the tool's parameters), per thread (the
 * default) or shared by all of an owner's threads (`scope: "owner"`). Each turn shows it to the model as a system
 * message after the instructions (the `initial` document until one is written) and gives the agent the
 * `update_working_memory` tool, which replaces it (the whole document, checked by the schema). Stored with the
 * threads; a stored document that no longer fits the schema is a `ThreadStoreError` naming it.
 *
 * @example
 * ```ts
 * import { Effect, Schema } from "effect"
 * import { Agent, ScriptedModel, Threads } from "valet"
 *
 * const Profile = Schema.Struct({ name: Schema.optional(Schema.String), likes: Schema.Array(Schema.String) })
 * const memory = Threads.workingMemory(Profile, { initial: { likes: [] }, scope: "owner" })
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Remember what the user tells you." })
 *
 * const program = Effect.gen(function*() {
 *   const thread = yield* Threads.create({ owner: "user-7" })
 *   // The model calls update_working_memory({ name: "Ada", likes: ["tea"] }), then answers.
 *   yield* Agent.run(assistant, "I am Ada and I like tea.", { thread: { id: thread.id, workingMemory: memory } })
 * }).pipe(
 *   Effect.provide(Threads.layerMemory()),
 *   Effect.provide(ScriptedModel.layer([
 *     { toolCalls: [{ name: "update_working_memory", arguments: { name: "Ada", likes: ["tea"] } }] },
 *     "Noted."
 *   ]))
 * )
 * ```
 *
 * @since 0.2.0
 * @category working memory
 */
export const workingMemory = <A, I>(
  schema: Schema.Codec<A, I>,
  options: { readonly initial: A; readonly scope?: "owner" | "thread" | undefined; readonly description?: string | undefined }
): WorkingMemory => WorkingMemoryInternal.make(schema, options)

// ---------------------------------------------------------------------------------------------------------
// Layers
// ---------------------------------------------------------------------------------------------------------

/**
 * A store in memory, for tests and one process.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeMemory: () => Effect.Effect<Service> = Memory.make

/**
 * `makeMemory` as a layer.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerMemory = (): Layer.Layer<Threads> => Layer.effect(Threads, Memory.make())

/**
 * The tables of the SQL store.
 *
 * @since 0.2.0
 * @category constants
 */
export const tableNames = Sql.tableNames

/**
 * A store on the `SqlClient` in context (SQLite or PostgreSQL); creates its tables when missing.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeSql: Effect.Effect<Service, ThreadStoreError, SqlClient.SqlClient> = Sql.make

/**
 * `makeSql` as a layer: `Threads.layerSql.pipe(Layer.provide(SqliteClient.layer({ filename: "data/threads.db" })))`
 * keeps threads in a SQLite file; with `PgClient.layer(…)`, in PostgreSQL.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerSql: Layer.Layer<Threads, ThreadStoreError, SqlClient.SqlClient> = Layer.effect(Threads, Sql.make)

/**
 * How the SQL store is made: `vectorSearch` — `"auto"` (the default: `sqlite-vec` when the SQLite connection has it
 * loaded, pgvector when the PostgreSQL server has the extension — created when available — else a scan) or `"scan"`.
 *
 * @since 0.2.0
 * @category options
 */
export type SqlOptions = Sql.Options

/**
 * `makeSql` with options.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeSqlWith: (options?: SqlOptions) => Effect.Effect<Service, ThreadStoreError, SqlClient.SqlClient> = Sql.makeWith

/**
 * `layerSql` with options: `Threads.layerSqlWith({ vectorSearch: "scan" })`.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerSqlWith = (options?: SqlOptions): Layer.Layer<Threads, ThreadStoreError, SqlClient.SqlClient> =>
  Layer.effect(Threads, Sql.makeWith(options))

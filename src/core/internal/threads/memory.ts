/**
 * The thread store in memory: the same rules as the SQL store (the conformance suite runs both), on maps.
 */
import { Clock, Effect, Result } from "effect"
import type { Message } from "../modelSchema.js"
import { cosineWith, norm, TopK } from "../vectors.js"
import * as Check from "./check.js"
import { type KeyedTurn, type Lease, type Recalled, type Service, type Summary, type Thread, ThreadBusy, type ThreadForbidden, ThreadNotFound, type ThreadStoreError } from "./model.js"

interface Entry {
  thread: Thread
  readonly messages: Array<Message>
  lease: { readonly token: string; until: number } | undefined
  /** The messages' vectors by index, with the model that embedded them. */
  readonly vectors: Map<number, { readonly model: string; readonly vector: Float32Array }>
  summary?: Summary | undefined
  /** The turn keys appended with, and where their messages landed. */
  readonly turns: Map<string, { readonly start: number; readonly count: number }>
}

export const make = (): Effect.Effect<Service> =>
  Effect.sync(() => {
    const entries = new Map<string, Entry>()

    const find = (
      operation: string,
      threadId: string,
      owner: string | undefined
    ): Effect.Effect<Entry, ThreadNotFound | ThreadForbidden | ThreadStoreError> =>
      Effect.flatMap(Check.checkId(operation, threadId), (): Effect.Effect<Entry, ThreadNotFound | ThreadForbidden> => {
        const entry = entries.get(threadId)
        return entry === undefined
          ? Effect.fail(new ThreadNotFound({ threadId, message: `Threads.${operation}: no thread ${JSON.stringify(threadId)}` }))
          : Effect.as(Check.owned(operation, entry.thread, owner), entry)
      })

    const busy = (operation: string, threadId: string, why: string) =>
      new ThreadBusy({ threadId, message: `Threads.${operation}: thread ${JSON.stringify(threadId)} ${why}` })

    const create: Service["create"] = (options) =>
      Effect.gen(function*() {
        const id = options.id ?? Check.newThreadId()
        yield* Check.checkId("create", id)
        yield* Check.checkOwner("create", options.owner, id)
        const metadata = yield* Check.metadataOf("create", options.metadata, id)
        if (entries.has(id)) return yield* Check.refuse("create", `a thread ${JSON.stringify(id)} exists`, id)
        const now = yield* Clock.currentTimeMillis
        const thread: Thread = { id, owner: options.owner, metadata, createdAt: now, updatedAt: now, messageCount: 0 }
        entries.set(id, { thread, messages: [], lease: undefined, vectors: new Map(), turns: new Map() })
        return thread
      })

    const messages: Service["messages"] = (threadId, options) =>
      Effect.gen(function*() {
        const entry = yield* find("messages", threadId, options?.owner)
        const total = entry.messages.length
        const before = yield* Check.checkInteger("messages", "before", options?.before, total, 0, total, threadId)
        const limit = yield* Check.checkInteger("messages", "limit", options?.limit, 100, 1, 1000, threadId)
        const start = Math.max(0, before - limit)
        return { threadId, start, messages: entry.messages.slice(start, before), total }
      })

    const list: Service["list"] = (owner, options) =>
      Effect.gen(function*() {
        yield* Check.checkOwner("list", owner)
        const limit = yield* Check.checkInteger("list", "limit", options?.limit, 50, 1, 500)
        const cursor = Check.parseCursor(options?.cursor)
        if (Result.isFailure(cursor)) return yield* Check.refuse("list", cursor.failure)
        const after = cursor.success
        const mine = [...entries.values()]
          .map((entry) => entry.thread)
          .filter((thread) => thread.owner === owner)
          .filter((thread) =>
            after === undefined || thread.updatedAt < after.updatedAt || (thread.updatedAt === after.updatedAt && thread.id < after.id)
          )
          .sort((a, b) => b.updatedAt - a.updatedAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
        const threads = mine.slice(0, limit)
        return mine.length > limit ? { threads, nextCursor: Check.cursorOf(threads.at(-1)!) } : { threads }
      })

    const holds = (entry: Entry, lease: Lease, now: number) =>
      entry.lease !== undefined && entry.lease.token === lease.token && entry.lease.until >= now

    const append: Service["append"] = (threadId, added, options) =>
      Effect.gen(function*() {
        const entry = yield* find("append", threadId, options?.owner)
        const turnKey = options?.turnKey
        yield* Check.checkTurnKey("append", turnKey, threadId)
        const checked = yield* Check.checkMessages("append", threadId, added, entry.messages.length)
        const now = yield* Clock.currentTimeMillis
        // From here on nothing yields: the key's lookup and the write are one step, as the SQL store's transaction.
        if (turnKey !== undefined && entry.turns.has(turnKey)) return entry.thread
        if (options?.expectedCount !== undefined && options.expectedCount !== entry.messages.length) {
          return yield* busy("append", threadId, `holds ${entry.messages.length} messages, not the ${options.expectedCount} expected: another writer appended`)
        }
        if (options?.lease !== undefined && !holds(entry, options.lease, now)) {
          return yield* busy("append", threadId, "is no longer held by this turn's lease")
        }
        if (turnKey !== undefined) entry.turns.set(turnKey, { start: entry.messages.length, count: checked.length })
        entry.messages.push(...checked)
        entry.thread = { ...entry.thread, updatedAt: now, messageCount: entry.messages.length }
        return entry.thread
      })

    const turnOf: Service["turnOf"] = (threadId, turnKey, options) =>
      Effect.gen(function*() {
        const entry = yield* find("turnOf", threadId, options?.owner)
        yield* Check.checkTurnKey("turnOf", turnKey, threadId)
        const now = yield* Clock.currentTimeMillis
        const appended = entry.turns.get(turnKey)
        if (appended !== undefined) return { status: "appended", ...appended } satisfies KeyedTurn
        const lease = entry.lease
        return lease !== undefined && lease.until >= now && lease.token.startsWith(Check.turnLeasePrefix(turnKey))
          ? { status: "running" } satisfies KeyedTurn
          : undefined
      })

    const fork: Service["fork"] = (threadId, options) =>
      Effect.gen(function*() {
        const entry = yield* find("fork", threadId, options.owner)
        const at = yield* Check.checkInteger("fork", "at", options.at, 0, 0, entry.messages.length, threadId)
        const forked = yield* create({
          ...(options.id !== undefined ? { id: options.id } : {}),
          owner: entry.thread.owner,
          metadata: options.metadata ?? entry.thread.metadata
        }).pipe(Effect.mapError((error) => Check.refuse("fork", error.message.replace(/^Threads\.create: /, ""), threadId)))
        const copy = entries.get(forked.id)!
        copy.messages.push(...entry.messages.slice(0, at))
        for (const [index, stored] of entry.vectors) if (index < at) copy.vectors.set(index, stored)
        copy.thread = { ...copy.thread, messageCount: at }
        // A summary of messages the fork holds, and of no later one, still stands for them.
        if (entry.summary !== undefined && entry.summary.through <= at) copy.summary = entry.summary
        return copy.thread
      })

    const delete_: Service["delete"] = (threadId, options) =>
      Effect.map(find("delete", threadId, options?.owner), () => void entries.delete(threadId))

    const acquire: Service["acquire"] = (threadId, options) =>
      Effect.gen(function*() {
        const entry = yield* find("acquire", threadId, options.owner)
        yield* Check.checkTurnKey("acquire", options.turnKey, threadId)
        const now = yield* Clock.currentTimeMillis
        const token = options.turnKey !== undefined ? Check.turnLeaseToken(options.turnKey) : Check.newLeaseToken()
        // A turn key's own lease is taken again (by its prefix); a random token's prefix is no turn's.
        const prefix = options.turnKey !== undefined ? Check.turnLeasePrefix(options.turnKey) : token
        if (entry.lease !== undefined && entry.lease.until >= now && !entry.lease.token.startsWith(prefix)) {
          return yield* busy("acquire", threadId, "is in another turn")
        }
        entry.lease = { token, until: now + options.durationMs }
        return { threadId, token }
      })

    const renew: Service["renew"] = (lease, durationMs) =>
      Effect.gen(function*() {
        const entry = yield* find("renew", lease.threadId, undefined)
        const now = yield* Clock.currentTimeMillis
        // Expired but not taken by another turn: still ours.
        if (entry.lease === undefined || entry.lease.token !== lease.token) return yield* busy("renew", lease.threadId, "was taken by another turn")
        entry.lease.until = now + durationMs
      })

    const release: Service["release"] = (lease) =>
      Effect.sync(() => {
        const entry = entries.get(lease.threadId)
        if (entry?.lease?.token === lease.token) entry.lease = undefined
      })

    const memories = new Map<string, string>()

    const storeVectors: Service["storeVectors"] = (threadId, model, vectors, options) =>
      Effect.gen(function*() {
        const entry = yield* find("storeVectors", threadId, options?.owner)
        const checked = yield* Check.checkVectors(threadId, model, vectors, entry.messages.length)
        for (const { index, vector } of checked.vectors) entry.vectors.set(index, { model: checked.model, vector })
      })

    const recall: Service["recall"] = (query) =>
      Effect.map(Check.checkRecall(query), ({ vector }) => {
        const best = new TopK<{ readonly threadId: string; readonly index: number; readonly message: Message }>(query.topK)
        const queryNorm = norm(vector)
        for (const entry of entries.values()) {
          const thread = entry.thread
          if (thread.owner !== query.owner || (query.threadId !== undefined && thread.id !== query.threadId)) continue
          for (const [index, stored] of entry.vectors) {
            if (stored.model !== query.model || stored.vector.length !== vector.length || Check.excluded(query, thread.id, index)) continue
            const score = cosineWith(vector, queryNorm, stored.vector)
            if (query.minScore === undefined || score >= query.minScore) best.offer(score, { threadId: thread.id, index, message: entry.messages[index]! })
          }
        }
        return best.result().map(({ item, score }): Recalled => ({ ...item, score }))
      })

    const writeSummary: Service["writeSummary"] = (threadId, summary, options) =>
      Effect.gen(function*() {
        const entry = yield* find("writeSummary", threadId, options?.owner)
        const checked = yield* Check.checkSummary(threadId, summary, entry.messages.length)
        const now = yield* Clock.currentTimeMillis
        if (options?.lease !== undefined && !holds(entry, options.lease, now)) {
          return yield* busy("writeSummary", threadId, "is no longer held by this turn's lease")
        }
        entry.summary = checked
      })

    return {
      readMemory: (key) => Effect.sync(() => {
        const text = memories.get(key)
        return text === undefined ? undefined : JSON.parse(text) as unknown
      }),
      writeMemory: (key, document) => Effect.map(Check.memoryText(key, document), (text) => void memories.set(key, text)),
      vectorSearch: "memory",
      storeVectors,
      recall,
      summary: (threadId, options) => Effect.map(find("summary", threadId, options?.owner), (entry) => entry.summary),
      writeSummary,
      create,
      get: (threadId, options) => Effect.map(find("get", threadId, options?.owner), (entry) => entry.thread),
      messages,
      list,
      append,
      turnOf,
      fork,
      delete: delete_,
      acquire,
      renew,
      release
    } satisfies Service
  })

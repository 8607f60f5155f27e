/**
 * A task's writer lock: `<task_id>.jsonl.lock`, created exclusively, naming the process, host and store that holds
 * it (see `TrajectoryStore`'s module doc). Another store that finds it is refused, naming the holder; a lock left by a
 * process that died (same host, no such pid), or left empty by a writer that died while creating it, is taken over.
 */
import { Effect, type FileSystem, Option, Result, Schema } from "effect"
import { hostname } from "node:os"
import { processExists } from "../processes.js"
import { failure, TrajectoryStoreError } from "./error.js"

/** What a writer lock file says about its holder. */
const LockOwner = Schema.Struct({ pid: Schema.Int, host: Schema.String, store: Schema.String, since: Schema.Number })
type LockOwner = typeof LockOwner.Type
const decodeLockOwner = Schema.decodeUnknownResult(Schema.fromJsonString(LockOwner))

/** A lock file that stays empty (or unreadable) this long was left by a writer that died while creating it. */
const abandonedLockMs = 10_000

/** A store as the holder of its locks: who it is, and the line its lock files hold. */
export interface Owner {
  readonly owner: LockOwner
  readonly line: string
}

/** This process, this host and a store id of its own: a new store's identity as a lock holder. */
export const makeOwner = (): Owner => {
  const owner: LockOwner = {
    pid: process.pid,
    host: hostname(),
    store: Math.random().toString(36).slice(2, 12),
    since: Date.now()
  }
  return { owner, line: JSON.stringify(owner) }
}

/**
 * Takes the writer lock of task `taskId`, whose file is `path`, or fails naming who holds it. Call with the task's
 * own lock held (appends of one task take turns).
 */
export const take = (
  fs: FileSystem.FileSystem,
  { line: ownerLine, owner }: Owner,
  taskId: string,
  path: string
): Effect.Effect<void, TrajectoryStoreError> => {
  const lockPath = `${path}.lock`
  const fail = failure("lock", taskId, lockPath)
  const refuse = (message: string) =>
    Effect.fail(new TrajectoryStoreError({ operation: "lock", taskId, path: lockPath, message }))
  const attempt = (triesLeft: number): Effect.Effect<void, TrajectoryStoreError> =>
    fs.writeFileString(lockPath, ownerLine, { flag: "wx" }).pipe(
      Effect.catchIf(
        (error) => error.reason._tag === "AlreadyExists" && triesLeft > 0,
        () =>
          Effect.gen(function*() {
            const text = yield* fs.readFileString(lockPath).pipe(
              // Removed between our create and our read: try again.
              Effect.catchIf((error) => error.reason._tag === "NotFound", () => Effect.succeed(undefined)),
              Effect.mapError(fail)
            )
            if (text === undefined) return yield* attempt(triesLeft - 1)
            const holder = decodeLockOwner(text)
            if (Result.isFailure(holder)) {
              const age = Date.now() - Number((yield* fs.stat(lockPath).pipe(Effect.mapError(fail))).mtime.pipe(
                Option.map((date) => date.getTime()),
                Option.getOrElse(() => 0)
              ))
              if (age < abandonedLockMs) {
                return yield* refuse(`${path} is being locked by another writer (${lockPath} was just created)`)
              }
            } else {
              const held = holder.success
              if (held.host !== owner.host || processExists(held.pid)) {
                const who = held.pid === owner.pid && held.host === owner.host
                  ? "another TrajectoryStore in this process"
                  : `process ${held.pid} on ${held.host}`
                return yield* refuse(
                  `${path} is being written by ${who} since ${new Date(held.since).toISOString()}; a task has one ` +
                    `writer at a time (the lock is ${lockPath}; remove it only if that writer is gone)`
                )
              }
            }
            // Left by a writer that died: take it over.
            yield* Effect.logWarning(`trajectory ${path}: taking over ${lockPath}, left by a writer that is gone`)
            yield* fs.remove(lockPath).pipe(
              Effect.catchIf((error) => error.reason._tag === "NotFound", () => Effect.void),
              Effect.mapError(fail)
            )
            return yield* attempt(triesLeft - 1)
          })
      ),
      Effect.mapError((error) => error._tag === "TrajectoryStoreError" ? error : fail(error))
    )
  return attempt(3)
}

/** Gives back the lock of the task whose file is `path`, if it still names this store. */
export const release = (fs: FileSystem.FileSystem, { line: ownerLine }: Owner, path: string): Effect.Effect<void> => {
  const lockPath = `${path}.lock`
  return fs.readFileString(lockPath).pipe(
    Effect.flatMap((text) => text === ownerLine ? fs.remove(lockPath) : Effect.void),
    Effect.ignore
  )
}

/**
 * The JSONL file store behind `TrajectoryStore.makeFile`: one file per task under `<root>/raw`, its writer lock
 * (`lock.ts`), its torn last line repaired when first opened, appends through the open-file cache (`openFiles.ts`),
 * reads and counts of whole lines only. It deals in lines: `TrajectoryStore` gives it the record's codec (`Codec`),
 * so this module does not import the public one.
 */
import { Effect, FileSystem, Option, Result, type Scope, Semaphore, Stream } from "effect"
import { join } from "node:path"
import { checkTaskId, failure, TrajectoryStoreError } from "./error.js"
import * as Lock from "./lock.js"
import * as OpenFiles from "./openFiles.js"

/** How the store turns records into lines and back. */
export interface Codec<A, N extends { readonly taskId: string }> {
  /** The record to append as step `step`, checked, with its JSON form (the fields of the line written). */
  readonly toLine: (record: N, step: number) => Result.Result<{ readonly record: A; readonly encoded: unknown }, TrajectoryStoreError>
  /** A JSON line as a record, or what is wrong with it (`what` names the line in the message). */
  readonly decodeLine: (line: string, what: string) => Result.Result<A, string>
}

/** What the file store answers: `TrajectoryStore.Service` for records `A` appended as `N`. */
export interface FileStore<A, N> {
  readonly append: (record: N) => Effect.Effect<A, TrajectoryStoreError>
  readonly read: (taskId: string) => Stream.Stream<A, TrajectoryStoreError>
  readonly count: (taskId: string) => Effect.Effect<number, TrajectoryStoreError>
}

/** An append waiting for its line to be written: settled by whichever append holds the lock when it is taken. */
interface Queued<A, N> {
  readonly record: N
  result: Result.Result<A, TrajectoryStoreError> | undefined
}

interface TaskFile<A, N> extends OpenFiles.Handle {
  readonly lock: Semaphore.Semaphore
  /** Appends of this task not yet taken into a write, in the order they were asked. */
  readonly queued: Array<Queued<A, N>>
  /** Records in the file, known once this store took the writer lock and opened (and repaired) it. */
  records: number | undefined
  /** Whether this store holds the task's writer lock. */
  held: boolean
}

const countLines = (text: string): number => {
  let records = 0
  for (const line of text.split("\n")) if (line.trim() !== "") records++
  return records
}

/** A store of JSONL files under `<root>/raw`, one per task; its locks are given back and its files closed with `Scope`. */
export const make = <A, N extends { readonly taskId: string }>(
  options: { readonly root: string; readonly fsync: boolean },
  codec: Codec<A, N>
): Effect.Effect<FileStore<A, N>, TrajectoryStoreError, FileSystem.FileSystem | Scope.Scope> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = join(options.root, "raw")
    yield* fs.makeDirectory(dir, { recursive: true }).pipe(
      Effect.mapError((error) =>
        new TrajectoryStoreError({ operation: "open", taskId: "-", path: dir, message: `cannot create ${dir}: ${error.message}` })
      )
    )
    const owner = Lock.makeOwner()
    const files = new Map<string, TaskFile<A, N>>()
    const fileOf = (taskId: string): TaskFile<A, N> => {
      let file = files.get(taskId)
      if (file === undefined) {
        file = { lock: Semaphore.makeUnsafe(1), queued: [], records: undefined, held: false, handle: undefined, writing: false }
        files.set(taskId, file)
      }
      return file
    }
    const pathOf = (taskId: string) => join(dir, `${taskId}.jsonl`)

    // Give back every lock this store took (only those that still name it).
    yield* Effect.addFinalizer(() =>
      Effect.forEach(
        [...files.entries()].filter(([, file]) => file.held),
        ([taskId]) => Lock.release(fs, owner, pathOf(taskId)),
        { discard: true }
      )
    )

    /** Takes the task's writer lock (once per store), or fails naming who holds it. Call with `file.lock` held. */
    const takeLock = (taskId: string, file: TaskFile<A, N>): Effect.Effect<void, TrajectoryStoreError> =>
      file.held ? Effect.void : Effect.map(Lock.take(fs, owner, taskId, pathOf(taskId)), () => {
        file.held = true
      })

    /**
     * Takes the writer lock, reads the file once, repairs a torn last line, and counts its records. Call with
     * `file.lock` held.
     */
    const open = (taskId: string, file: TaskFile<A, N>): Effect.Effect<number, TrajectoryStoreError> =>
      file.records !== undefined ? Effect.succeed(file.records) : Effect.gen(function*() {
        yield* takeLock(taskId, file)
        const path = pathOf(taskId)
        const fail = failure("open", taskId, path)
        const exists = yield* fs.exists(path).pipe(Effect.mapError(fail))
        let text = exists ? yield* fs.readFileString(path).pipe(Effect.mapError(fail)) : ""
        if (text !== "" && !text.endsWith("\n")) {
          const cut = text.lastIndexOf("\n") + 1
          const fragment = text.slice(cut)
          if (Result.isSuccess(codec.decodeLine(fragment, "the last line"))) {
            // A whole record that only lacks its newline (the crash came between the two).
            yield* fs.writeFileString(path, "\n", { flag: "a" }).pipe(Effect.mapError(fail))
            text += "\n"
          } else {
            yield* fs.writeFileString(`${path}.torn`, fragment + "\n", { flag: "a" }).pipe(Effect.mapError(fail))
            yield* fs.truncate(path, Buffer.byteLength(text.slice(0, cut))).pipe(Effect.mapError(fail))
            text = text.slice(0, cut)
            yield* Effect.logWarning(
              `trajectory ${path}: its last line was torn (a crash mid-write); moved ${fragment.length} characters to ${path}.torn`
            )
          }
        }
        const records = countLines(text)
        file.records = records
        return records
      })

    const openFiles = yield* OpenFiles.make(fs, options.fsync)

    /**
     * Writes the task's queued appends as one write (a group commit), numbered on from the file's count, and settles
     * each with its record or its error. Call with `file.lock` held. A record the codec refuses fails alone and takes
     * no step number; a failed write fails every append of the batch, and the file (which may now end in a partial
     * line) is repaired by the next append, through the path, opened anew. The batch is taken once the file is open
     * (what was asked while it opened goes in the same write) and from then on the write is uninterruptible: the
     * appends of other fibers ride on it, and a rollout that is stopped waits for the line being written rather than
     * tearing it. Interrupted while opening, it took nothing: the next holder writes the queue.
     */
    const writeQueued = (taskId: string, file: TaskFile<A, N>): Effect.Effect<void> =>
      Effect.suspend(() => {
        const path = pathOf(taskId)
        const fail = failure("append", taskId, path)
        let batch: Array<Queued<A, N>> = []
        const settle = (error: TrajectoryStoreError) => {
          for (const entry of batch) entry.result ??= Result.fail(error)
        }
        const write = (records: number): Effect.Effect<void> => {
          batch = file.queued.splice(0, file.queued.length)
          let lines = ""
          let step = records
          const written: Array<{ readonly entry: Queued<A, N>; readonly record: A }> = []
          for (const entry of batch) {
            const checked = codec.toLine(entry.record, step + 1)
            if (Result.isFailure(checked)) {
              entry.result = Result.fail(checked.failure)
              continue
            }
            step++
            lines += JSON.stringify(checked.success.encoded) + "\n"
            written.push({ entry, record: checked.success.record })
          }
          if (written.length === 0) return Effect.void
          return Effect.matchEffect(openFiles.write(taskId, file, path, lines), {
            onFailure: (error) =>
              Effect.andThen(
                Effect.sync(() => {
                  file.records = undefined
                  settle(fail(error))
                }),
                openFiles.drop(taskId, file)
              ),
            onSuccess: () =>
              Effect.sync(() => {
                file.records = step
                for (const { entry, record } of written) entry.result = Result.succeed(record)
              })
          })
        }
        return Effect.matchEffect(open(taskId, file), {
          onFailure: (error) =>
            Effect.sync(() => {
              batch = file.queued.splice(0, file.queued.length)
              settle(error)
            }),
          onSuccess: (records) =>
            Effect.uninterruptible(Effect.suspend(() => write(records))).pipe(
              // Whatever stopped the write (a defect), no append of its batch is left waiting for an answer. The error
              // is made only then: an error captures a stack trace, ~4 % of a rollout step's CPU when made every write.
              Effect.ensuring(Effect.sync(() => {
                if (batch.some((entry) => entry.result === undefined)) {
                  settle(new TrajectoryStoreError({ operation: "append", taskId, path, message: `${path}: the write did not complete` }))
                }
              }))
            )
        })
      })

    // Each append queues its record and takes the task's lock; the holder writes every record queued by then in one
    // write, so appends that arrive while a line is being written share the next write instead of each waiting for
    // its own (a rollout's group members finish their steps together: one write for several records). The lines'
    // order is the order the appends were asked, as when each wrote its own.
    const append = (record: N): Effect.Effect<A, TrajectoryStoreError> =>
      Effect.andThen(
        checkTaskId("append", record.taskId),
        Effect.suspend(() => {
          const file = fileOf(record.taskId)
          const entry: Queued<A, N> = { record, result: undefined }
          file.queued.push(entry)
          const settled = Effect.suspend(() => Effect.fromResult(entry.result!))
          return file.lock.withPermits(1)(
            Effect.suspend(() => (entry.result !== undefined ? settled : Effect.andThen(writeQueued(record.taskId, file), settled)))
          ).pipe(
            // Interrupted while waiting: not written, unless a write had already taken it.
            Effect.onInterrupt(() =>
              Effect.sync(() => {
                const at = file.queued.indexOf(entry)
                if (at !== -1) file.queued.splice(at, 1)
              })
            )
          )
        })
      )

    /**
     * The size of the file's whole lines (a torn or half-written last line is left out); 0 when absent. Reads
     * back from the end, a window at a time, to the last newline.
     */
    const wholeLinesSize = (path: string, fail: (error: { readonly message: string }) => TrajectoryStoreError) =>
      Effect.scoped(Effect.gen(function*() {
        const exists = yield* fs.exists(path).pipe(Effect.mapError(fail))
        if (!exists) return 0
        const handle = yield* fs.open(path, { flag: "r" }).pipe(Effect.mapError(fail))
        let end = Number((yield* handle.stat.pipe(Effect.mapError(fail))).size)
        const window = 64 * 1024
        while (end > 0) {
          const start = Math.max(0, end - window)
          const chunk = yield* handle.readAlloc(end - start, { position: BigInt(start) }).pipe(Effect.mapError(fail))
          const bytes = Option.getOrElse(chunk, () => new Uint8Array(0))
          const newline = bytes.lastIndexOf(10)
          if (newline !== -1) return start + newline + 1
          end = start
        }
        return 0
      }))

    const read = (taskId: string): Stream.Stream<A, TrajectoryStoreError> =>
      Stream.unwrap(Effect.gen(function*() {
        yield* checkTaskId("read", taskId)
        const file = fileOf(taskId)
        const path = pathOf(taskId)
        const fail = failure("read", taskId, path)
        // Measured under the lock: appends this store makes while we read are not half-seen, and another
        // writer's line in progress is not read.
        const size = yield* file.lock.withPermits(1)(wholeLinesSize(path, fail))
        if (size === 0) return Stream.empty
        return fs.stream(path, { bytesToRead: BigInt(size) }).pipe(
          Stream.mapError(fail),
          Stream.decodeText(),
          Stream.splitLines,
          Stream.zipWithIndex,
          Stream.filter(([line]) => line.trim() !== ""),
          Stream.mapEffect(([line, index]) =>
            Result.match(codec.decodeLine(line, `${path} line ${index + 1}`), {
              onFailure: (message) =>
                Effect.fail(new TrajectoryStoreError({ operation: "read", taskId, path, line: index + 1, message })),
              onSuccess: Effect.succeed
            })
          )
        )
      }))

    const count = (taskId: string) =>
      Effect.andThen(
        checkTaskId("count", taskId),
        Effect.suspend(() => {
          const file = fileOf(taskId)
          if (file.records !== undefined) return Effect.succeed(file.records)
          const path = pathOf(taskId)
          const fail = failure("count", taskId, path)
          // Counts the whole lines: another writer's line in progress is not one yet.
          return file.lock.withPermits(1)(Effect.flatMap(wholeLinesSize(path, fail), (size) =>
            size === 0 ? Effect.succeed(0) : fs.stream(path, { bytesToRead: BigInt(size) }).pipe(
              Stream.mapError(fail),
              Stream.decodeText(),
              Stream.splitLines,
              Stream.runFold(() => 0, (n, line) => (line.trim() === "" ? n : n + 1))
            )))
        })
      )

    return { append, read, count } satisfies FileStore<A, N>
  })

/**
 * The task files a store keeps open for appending. Opening, writing and closing the file per record (three syscalls
 * and their Effect wrappers) was ~5 % of a rollout step's CPU; a rollout appends to the same few tasks over and over.
 * Past `openHandles` files, the least recently written idle one is closed, so a run over thousands of tasks stays far
 * below the process's file descriptor limit. Everything open is closed with the store's scope.
 */
import { Effect, Exit, type FileSystem, Scope } from "effect"

/** How many task files a store keeps open for appending. */
const openHandles = 64

/** What the cache keeps on a task's file. */
export interface Handle {
  /** The file open for appending, and the scope that closes it. */
  handle: { readonly file: FileSystem.File; readonly scope: Scope.Closeable } | undefined
  /** An append is opening or writing through `handle`: it is not closed under it. */
  writing: boolean
}

/** A store's open task files. */
export interface OpenFiles {
  /**
   * Writes `line` to the task's file at `path`, opening it if it is not open. Appends of one task take turns (the
   * caller holds the task's lock): `writing` is this append's alone from its open to its last byte.
   */
  readonly write: (taskId: string, file: Handle, path: string, line: string) => Effect.Effect<void, { readonly message: string }>
  /** Closes the task's file and forgets it (after a failed write: the next append opens it anew). */
  readonly drop: (taskId: string, file: Handle) => Effect.Effect<void>
}

/** The open files of a store whose appends sync the disk after each record when `fsync`; closed with the scope. */
export const make = (fs: FileSystem.FileSystem, fsync: boolean): Effect.Effect<OpenFiles, never, Scope.Scope> =>
  Effect.gen(function*() {
    // The task files open for appending, least recently written first (a Map keeps insertion order; a write
    // re-inserts). A task is listed only once its file is open, so everything open is closed with the store.
    const openFiles = new Map<string, Handle>()
    const utf8 = new TextEncoder()
    const closeHandle = (file: Handle): Effect.Effect<void> => {
      const handle = file.handle
      if (handle === undefined) return Effect.void
      file.handle = undefined
      return Scope.close(handle.scope, Exit.void)
    }
    yield* Effect.addFinalizer(() => Effect.forEach([...openFiles.values()], closeHandle, { discard: true }))

    /**
     * Closes idle files, least recently written first, until there is room for one more under `openHandles`. A file
     * being opened or written (`writing`, set before its open) is never closed under its append; with more appends
     * than that in flight at once the count goes over for as long, and comes back down at the next open.
     */
    // Files being opened, not listed yet: counted, so that appends opening at once do not all see the same room.
    let opening = 0
    const makeRoom = Effect.gen(function*() {
      for (const [other, candidate] of openFiles) {
        if (openFiles.size + opening <= openHandles) return
        if (candidate.writing) continue
        openFiles.delete(other)
        yield* closeHandle(candidate)
      }
    })

    const write = (taskId: string, file: Handle, path: string, line: string): Effect.Effect<void, { readonly message: string }> =>
      Effect.suspend(() => {
        file.writing = true
        return Effect.gen(function*() {
          let handle = file.handle?.file
          if (handle === undefined) {
            opening++
            const opened = yield* Effect.gen(function*() {
              yield* makeRoom
              const scope = yield* Scope.make()
              const opened = yield* Scope.provide(fs.open(path, { flag: "a" }), scope).pipe(
                Effect.onError(() => Scope.close(scope, Exit.void))
              )
              // Listed in the same step as it is held: nothing open goes unlisted (the store's close finds it).
              file.handle = { file: opened, scope }
              openFiles.set(taskId, file)
              return opened
            }).pipe(Effect.ensuring(Effect.sync(() => {
              opening--
            })))
            handle = opened
          } else {
            openFiles.delete(taskId)
            openFiles.set(taskId, file)
          }
          yield* handle.writeAll(utf8.encode(line))
          if (fsync) yield* handle.sync
        }).pipe(Effect.ensuring(Effect.sync(() => {
          file.writing = false
        })))
      })

    const drop = (taskId: string, file: Handle): Effect.Effect<void> =>
      Effect.suspend(() => {
        openFiles.delete(taskId)
        return closeHandle(file)
      })

    return { write, drop }
  })

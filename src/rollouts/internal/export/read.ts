/**
 * Reading a file store's trajectories for an export, leniently: a line that is not a record (a corrupt line, a torn
 * last line of a writer that crashed or is still writing) is reported with its number and left out, and the export
 * goes on. `TrajectoryStore.read` stops at such a line instead (right for a store that must not lose a step).
 */
import { Effect, FileSystem, Result, Schema, Stream } from "effect"
import { join } from "node:path"
import { formatIssue } from "../../../core/internal/decode.js"
import * as TrajectoryStore from "../../../environment/TrajectoryStore.js"
import { ExportError } from "./error.js"
import type { Item } from "./rows.js"

const decodeRecord = Schema.decodeUnknownResult(TrajectoryStore.TrajectoryRecord)

/** A line as a record, or why it is not one. */
export const decodeLine = (line: string): Result.Result<TrajectoryStore.TrajectoryRecord, string> => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (error) {
    return Result.fail(`not JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  return Result.mapError(decodeRecord(json), (error) => formatIssue("not a trajectory record", error.issue, json))
}

/** One task's records, and the lines of its file that were not records. */
export interface TaskRecords {
  readonly taskId: string
  readonly records: ReadonlyArray<TrajectoryStore.TrajectoryRecord>
  readonly corrupt: ReadonlyArray<Item<never>>
}

/** The task ids with a file under `<root>/raw`, sorted (`only`: just those, when they have one). */
export const taskIds = (
  root: string,
  only?: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<string>, ExportError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = join(root, "raw")
    const names = yield* fs.readDirectory(dir).pipe(
      Effect.mapError((error) =>
        new ExportError({
          path: dir,
          message: error.reason._tag === "NotFound"
            ? `no trajectories at ${root}: ${dir} does not exist (records are ${dir}/<task_id>.jsonl)`
            : `cannot list ${dir}: ${error.message}`
        })
      )
    )
    const ids = names.filter((name) => name.endsWith(".jsonl")).map((name) => name.slice(0, -".jsonl".length)).sort()
    return only === undefined ? ids : ids.filter((id) => only.includes(id))
  })

/** Reads a task's file line by line: the records, and the corrupt lines by number. */
export const readTask = (
  root: string,
  taskId: string
): Effect.Effect<TaskRecords, ExportError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = join(root, "raw", `${taskId}.jsonl`)
    const records: Array<TrajectoryStore.TrajectoryRecord> = []
    const corrupt: Array<Item<never>> = []
    yield* fs.stream(path).pipe(
      Stream.mapError((error) => new ExportError({ path, message: `cannot read ${path}: ${error.message}` })),
      Stream.decodeText(),
      Stream.splitLines,
      Stream.zipWithIndex,
      Stream.runForEach(([line, index]) =>
        Effect.sync(() => {
          if (line.trim() === "") return
          const decoded = decodeLine(line)
          if (Result.isSuccess(decoded)) records.push(decoded.success)
          else {
            corrupt.push({
              _tag: "Skipped",
              reason: "corrupt_line",
              taskId,
              records: 1,
              path,
              line: index + 1,
              message: decoded.failure
            })
          }
        })
      )
    )
    return { taskId, records, corrupt }
  })

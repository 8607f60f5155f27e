/**
 * RL trajectories: one record per step of a task, as JSON lines in `trajectories/raw/<task_id>.jsonl`, in snake
 * case as the seed's readers expect. `append` numbers the step (one more than the records already there, also
 * when several fibers append to one task at once); `read` streams the records back, schema-checked.
 *
 * Crash safety: a line is written with one append, so a crash can only leave the *last* line torn (no newline
 * at the end). The first time a task's file is opened, a torn tail is repaired: if it is a whole record that
 * only lacks its newline, the newline is added; otherwise the fragment is moved to `<task_id>.jsonl.torn` (kept,
 * never lost) and the file is cut back to its last complete line — so it is never glued to the next record.
 *
 * One writer per task: the first append takes `<task_id>.jsonl.lock` (created exclusively; it names the process,
 * host and store) and holds it until the store's scope closes. Another store — in another process or in this
 * one — that tries to append to the same task is refused with a `TrajectoryStoreError` (`operation: "lock"`)
 * naming the holder, rather than writing duplicate step numbers. A lock left by a process that died (same host,
 * no such pid) is taken over. Reading and counting need no lock: they see whole lines only. The writer keeps up to
 * 64 task files open for appending while its scope is open: do not move or delete a task's file under a running
 * store (its appends would go on into the moved file); rotate files between runs.
 *
 * Token-level data (DESIGN §18) rides beside each step in `tokens`, packed rather than as JSON arrays of objects:
 * base64 of int32 / float32 little-endian values (`StepTokens`; `decodeTokens` unpacks, NumPy's `frombuffer` reads
 * it). Only what the server sent is there; the record's other fields are as they always were.
 *
 * Layers: `layerFile` (the default; needs a `FileSystem`) and `layerMemory` (tests).
 *
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import * as StateStore from "valet/StateStore"
 * import * as TrajectoryStore from "valet/TrajectoryStore"
 *
 * // A step of a task, recorded: the store numbers it and checks it against the schema.
 * const program = Effect.gen(function*() {
 *   const recorded = yield* TrajectoryStore.append({
 *     taskId: "task-7",
 *     prompt: "Make the failing test pass.",
 *     stateBefore: StateStore.empty,
 *     stateAfter: StateStore.empty,
 *     modelOutput: { raw: "I give up.", think: null, action: null, stateUpdate: null, parseError: null },
 *     sandboxResult: null,
 *     reward: null,
 *     metrics: { actorLatencySec: 1.5, sandboxFailed: true }
 *   })
 *   const steps = yield* Stream.runCollect(TrajectoryStore.read("task-7"))
 *   return `step ${recorded.step} of ${steps.length}`
 * })
 *
 * // In memory for a test; `TrajectoryStore.layerFile()` writes `trajectories/raw/task-7.jsonl` (needs a `FileSystem`).
 * const recorded = program.pipe(Effect.provide(TrajectoryStore.layerMemory))
 * ```
 *
 * @since 0.1.0
 */
import { Context, Effect, Exit, FileSystem, Layer, Option, Result, Schema, Scope, Semaphore, Stream } from "effect"
import { hostname } from "node:os"
import { join } from "node:path"
import { formatIssue } from "../core/internal/decode.js"
import * as Packed_ from "./internal/packedTokens.js"
import * as RecordJson from "./internal/recordJson.js"
import { describeUnsafeTaskId, isSafeTaskId } from "./internal/taskId.js"
import * as Sandbox from "./Sandbox.js"
import * as StateStore from "./StateStore.js"

// ---------------------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------------------

/**
 * What the model wrote, and what was parsed from it. `parseError` names the first block that did not parse.
 *
 * @since 0.1.0
 * @category models
 */
export const ModelOutput = Schema.Struct({
  raw: Schema.String,
  think: Schema.NullOr(Schema.String),
  /** The `<action>` JSON as parsed (its `command` goes to the sandbox). */
  action: Schema.NullOr(Schema.Unknown),
  /** The `<state_update>` JSON as parsed. */
  stateUpdate: Schema.NullOr(Schema.Unknown),
  /** `invalid_action_json` or `invalid_state_update_json` (the first that failed), or null. */
  parseError: Schema.NullOr(Schema.String),
  /** What exactly failed to parse, for every block that failed. */
  parseErrorDetail: Schema.optional(Schema.NullOr(Schema.String))
}).pipe(Schema.encodeKeys({ stateUpdate: "state_update", parseError: "parse_error", parseErrorDetail: "parse_error_detail" }))
/**
 * What the model wrote, and what was parsed from it.
 *
 * @since 0.1.0
 * @category models
 */
export type ModelOutput = typeof ModelOutput.Type

/**
 * Measurements of a step.
 *
 * @since 0.1.0
 * @category models
 */
export const Metrics = Schema.Struct({
  actorLatencySec: Schema.Finite,
  /** True when no action ran or its exit code was not 0. */
  sandboxFailed: Schema.Boolean,
  inputTokens: Schema.optional(Schema.Int),
  outputTokens: Schema.optional(Schema.Int),
  finishReason: Schema.optional(Schema.String),
  /** The model that answered (as the server named it). */
  model: Schema.optional(Schema.String),
  sandboxDurationSec: Schema.optional(Schema.Finite),
  /** Why the action could not be run at all (its workspace could not be made or used). */
  sandboxError: Schema.optional(Schema.String)
}).pipe(Schema.encodeKeys({
  actorLatencySec: "actor_latency_sec",
  sandboxFailed: "sandbox_failed",
  inputTokens: "input_tokens",
  outputTokens: "output_tokens",
  finishReason: "finish_reason",
  sandboxDurationSec: "sandbox_duration_sec",
  sandboxError: "sandbox_error"
}))
/**
 * Measurements of a step.
 *
 * @since 0.1.0
 * @category models
 */
export type Metrics = typeof Metrics.Type

const Packed = (what: string) =>
  Schema.String.check(Schema.makeFilter((text: string) =>
    Packed_.isPacked(text) || `${what}: expected base64 of 4-byte little-endian values`
  ))

/**
 * The token-level data of a step, packed (DESIGN §18): each field base64 (RFC 4648, padded) of 4-byte
 * little-endian values — `prompt_ids` and `completion_ids` int32, `completion_logprobs` and `prompt_logprobs`
 * float32 (NaN where the server gave none: the first prompt token). Present only as far as the server sent them
 * (`Vllm` with `tokens: true`); never made up. `decodeTokens` unpacks; in Python
 * `np.frombuffer(base64.b64decode(s), "<i4")` (ids) or `"<f4"` (log-probabilities). Log-probabilities are
 * rounded to float32 (what trainers compute in).
 *
 * @since 0.2.0
 * @category models
 */
export const StepTokens = Schema.Struct({
  promptIds: Schema.optional(Packed("prompt_ids")),
  completionIds: Schema.optional(Packed("completion_ids")),
  completionLogprobs: Schema.optional(Packed("completion_logprobs")),
  promptLogprobs: Schema.optional(Packed("prompt_logprobs"))
}).pipe(Schema.encodeKeys({
  promptIds: "prompt_ids",
  completionIds: "completion_ids",
  completionLogprobs: "completion_logprobs",
  promptLogprobs: "prompt_logprobs"
}))
/**
 * The token-level data of a step, packed.
 *
 * @since 0.2.0
 * @category models
 */
export type StepTokens = typeof StepTokens.Type

/**
 * A step's token data unpacked: what `encodeTokens` takes and `decodeTokens` answers. Absent fields are absent.
 *
 * @since 0.2.0
 * @category models
 */
export interface TokenArrays {
  readonly promptIds?: ReadonlyArray<number> | Int32Array | undefined
  readonly completionIds?: ReadonlyArray<number> | Int32Array | undefined
  readonly completionLogprobs?: ReadonlyArray<number> | Float32Array | undefined
  /** `null` (NaN once packed): no log-probability for that prompt token. */
  readonly promptLogprobs?: ReadonlyArray<number | null> | Float32Array | undefined
}

/**
 * Packs token arrays for a record's `tokens`; `undefined` when there is nothing to store.
 *
 * @since 0.2.0
 * @category tokens
 */
export const encodeTokens = (arrays: TokenArrays): StepTokens | undefined => {
  const out: { -readonly [K in keyof StepTokens]: StepTokens[K] } = {}
  if (arrays.promptIds !== undefined) out.promptIds = Packed_.packInt32(arrays.promptIds)
  if (arrays.completionIds !== undefined) out.completionIds = Packed_.packInt32(arrays.completionIds)
  if (arrays.completionLogprobs !== undefined) out.completionLogprobs = Packed_.packFloat32(arrays.completionLogprobs)
  if (arrays.promptLogprobs !== undefined) out.promptLogprobs = Packed_.packFloat32(arrays.promptLogprobs)
  return Object.keys(out).length === 0 ? undefined : out
}

/**
 * Unpacks a record's `tokens`: ids as `Int32Array`, log-probabilities as `Float32Array` (NaN: none given).
 *
 * @since 0.2.0
 * @category tokens
 */
export const decodeTokens = (tokens: StepTokens): {
  readonly promptIds?: Int32Array
  readonly completionIds?: Int32Array
  readonly completionLogprobs?: Float32Array
  readonly promptLogprobs?: Float32Array
} => ({
  ...(tokens.promptIds !== undefined ? { promptIds: Packed_.unpackInt32(tokens.promptIds) } : {}),
  ...(tokens.completionIds !== undefined ? { completionIds: Packed_.unpackInt32(tokens.completionIds) } : {}),
  ...(tokens.completionLogprobs !== undefined ? { completionLogprobs: Packed_.unpackFloat32(tokens.completionLogprobs) } : {}),
  ...(tokens.promptLogprobs !== undefined ? { promptLogprobs: Packed_.unpackFloat32(tokens.promptLogprobs) } : {})
})

/**
 * Why a part of a step's reward could not be scored (`Reward.RewardFailed`, as stored): its `reason` and what
 * exactly went wrong.
 *
 * @since 0.2.0
 * @category models
 */
export const RewardError = Schema.Struct({ reason: Schema.String, message: Schema.String })
/**
 * Why a part of a step's reward could not be scored.
 *
 * @since 0.2.0
 * @category models
 */
export type RewardError = typeof RewardError.Type

/**
 * One part of a step's reward (`valet/Reward`): its name, its value (null when it failed, `error` saying why) and
 * its weight in the sum that is the record's `reward`.
 *
 * @since 0.2.0
 * @category models
 */
export const RewardPart = Schema.Struct({
  name: Schema.String,
  value: Schema.NullOr(Schema.Finite),
  weight: Schema.Finite,
  error: Schema.optional(RewardError)
})
/**
 * One part of a step's reward.
 *
 * @since 0.2.0
 * @category models
 */
export type RewardPart = typeof RewardPart.Type

/**
 * One step of a task, as stored (DESIGN §3.7); the encoded form is snake case.
 *
 * @since 0.1.0
 * @category models
 */
export const TrajectoryRecord = Schema.Struct({
  taskId: Schema.String,
  step: Schema.Int.check(Schema.isGreaterThan(0)),
  prompt: Schema.String,
  stateBefore: StateStore.State,
  stateAfter: StateStore.State,
  modelOutput: ModelOutput,
  sandboxResult: Schema.NullOr(Sandbox.SandboxResult),
  /**
   * The step's reward, a number (what the origin's readers expect): the weighted sum of `rewardParts`, a failed
   * part counting 0. Null when no reward was given.
   */
  reward: Schema.NullOr(Schema.Finite),
  /** The parts `reward` sums (`valet/Reward`); absent when no reward was given. */
  rewardParts: Schema.optional(Schema.Array(RewardPart)),
  metrics: Metrics,
  /** The agent session that produced the step (its events carry the same id). */
  sessionId: Schema.optional(Schema.String),
  /** Epoch milliseconds. */
  createdAt: Schema.optional(Schema.Number),
  /**
   * The step's token ids and log-probabilities, packed (`StepTokens`); absent when the server sent none.
   *
   * @since 0.2.0
   */
  tokens: Schema.optional(StepTokens),
  /**
   * The episode the step belongs to (`ActorLoop.episode`): one id for all its steps.
   *
   * @since 0.2.0
   */
  episodeId: Schema.optional(Schema.String),
  /**
   * The step's place in its episode, from 1 (`step` counts the task's steps across episodes).
   *
   * @since 0.2.0
   */
  episodeStep: Schema.optional(Schema.Int.check(Schema.isGreaterThan(0))),
  /**
   * The group of rollouts of one task the episode belongs to (`ActorLoop.group`), for group-relative advantages.
   *
   * @since 0.2.0
   */
  groupId: Schema.optional(Schema.String),
  /**
   * The sampling seed the step's request carried, when it carried one.
   *
   * @since 0.2.0
   */
  seed: Schema.optional(Schema.Int),
  /**
   * On an episode's last step only: why it ended — the model said `<done/>`, a reward reached the threshold, or
   * `maxSteps` was reached. An episode none of whose lines has it did not finish (its run failed or was stopped):
   * drop its lines.
   *
   * @since 0.2.0
   */
  episodeEnd: Schema.optional(Schema.Literals(["done", "reward", "max_steps"])),
  /**
   * On an episode's last step only: the episode's reward (`Reward.episode` of its steps), null without a reward.
   * On the last line so that a trainer reading the JSONL in order has it when the episode's lines are complete.
   *
   * @since 0.2.0
   */
  episodeReward: Schema.optional(Schema.NullOr(Schema.Finite))
}).pipe(Schema.encodeKeys({
  taskId: "task_id",
  episodeId: "episode_id",
  episodeStep: "episode_step",
  groupId: "group_id",
  episodeEnd: "episode_end",
  episodeReward: "episode_reward",
  stateBefore: "state_before",
  stateAfter: "state_after",
  modelOutput: "model_output",
  sandboxResult: "sandbox_result",
  rewardParts: "reward_parts",
  sessionId: "session_id",
  createdAt: "created_at"
}))
/**
 * One step of a task.
 *
 * @since 0.1.0
 * @category models
 */
export type TrajectoryRecord = typeof TrajectoryRecord.Type

/**
 * A record to append: the store numbers its `step`.
 *
 * @since 0.1.0
 * @category models
 */
export type NewRecord = Omit<TrajectoryRecord, "step">

const encodeRecord = Schema.encodeResult(TrajectoryRecord)
const decodeRecord = Schema.decodeUnknownResult(TrajectoryRecord)

/**
 * The encoded form of each record a store appended, by the record's identity: the actor loop hands the record it
 * got back from `append` on as JSON too, and encoding it a second time cost as much CPU as the first (~40 µs).
 */
const encodedRecords = new WeakMap<TrajectoryRecord, typeof TrajectoryRecord.Encoded>()
const encodeRecordSync = Schema.encodeSync(TrajectoryRecord)

/**
 * A record in its JSON form (the fields of a JSONL line). For a record a store's `append` answered, the encoding
 * the store wrote (no second encoding); for another record, an encoding checked against the schema.
 *
 * @since 0.2.0
 * @category encoding
 */
export const encode = (record: TrajectoryRecord): typeof TrajectoryRecord.Encoded =>
  encodedRecords.get(record) ?? encodeRecordSync(record)

/** A JSON line as a record, or what is wrong with it (`what` names the line in the message). */
const decodeLine = (line: string, what: string): Result.Result<TrajectoryRecord, string> => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (error) {
    return Result.fail(`${what} is not JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  return Result.mapError(decodeRecord(json), (error) => formatIssue(`${what} is not a trajectory record`, error.issue, json))
}

// ---------------------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------------------

/**
 * A trajectory could not be written or read; `path` and `line` point at the bad place.
 *
 * @since 0.1.0
 * @category errors
 */
export class TrajectoryStoreError extends Schema.TaggedError<TrajectoryStoreError>()("TrajectoryStoreError", {
  operation: Schema.String,
  taskId: Schema.String,
  path: Schema.optional(Schema.String),
  line: Schema.optional(Schema.Int),
  message: Schema.String
}) {}

/**
 * What a trajectory store does.
 *
 * @since 0.1.0
 * @category services
 */
export interface Service {
  /** Appends a record as the task's next step; answers it with its `step`. */
  readonly append: (record: NewRecord) => Effect.Effect<TrajectoryRecord, TrajectoryStoreError>
  /** The records of a task, in order, schema-checked (a bad one ends the stream with an error naming its line). */
  readonly read: (taskId: string) => Stream.Stream<TrajectoryRecord, TrajectoryStoreError>
  /** How many records a task has. */
  readonly count: (taskId: string) => Effect.Effect<number, TrajectoryStoreError>
}

/**
 * The trajectory store service.
 *
 * @since 0.1.0
 * @category services
 */
export class TrajectoryStore extends Context.Service<TrajectoryStore, Service>()("valet/TrajectoryStore") {}

/**
 * Appends a record as the task's next step.
 *
 * @since 0.1.0
 * @category accessors
 */
export const append = (record: NewRecord): Effect.Effect<TrajectoryRecord, TrajectoryStoreError, TrajectoryStore> =>
  Effect.flatMap(TrajectoryStore, (store) => store.append(record))

/**
 * Streams the records of a task.
 *
 * @since 0.1.0
 * @category accessors
 */
export const read = (taskId: string): Stream.Stream<TrajectoryRecord, TrajectoryStoreError, TrajectoryStore> =>
  Stream.unwrap(Effect.map(TrajectoryStore, (store) => store.read(taskId)))

/**
 * How many records a task has.
 *
 * @since 0.1.0
 * @category accessors
 */
export const count = (taskId: string): Effect.Effect<number, TrajectoryStoreError, TrajectoryStore> =>
  Effect.flatMap(TrajectoryStore, (store) => store.count(taskId))

const checkTaskId = (operation: string, taskId: string): Effect.Effect<void, TrajectoryStoreError> =>
  isSafeTaskId(taskId)
    ? Effect.void
    : Effect.fail(new TrajectoryStoreError({ operation, taskId, message: describeUnsafeTaskId(taskId) }))

/** The record with its step, checked against the schema, and its JSON form (the line a file store writes). */
const toLine = (
  record: NewRecord,
  step: number
): Result.Result<{ record: TrajectoryRecord; encoded: typeof TrajectoryRecord.Encoded }, TrajectoryStoreError> => {
  const full: TrajectoryRecord = { ...record, step }
  // The usual record skips the schema walk (internal/recordJson.ts); anything unusual is encoded by the schema.
  const fast = RecordJson.encodeRecord(full) as typeof TrajectoryRecord.Encoded | undefined
  return Result.mapBoth(fast !== undefined ? Result.succeed(fast) : encodeRecord(full), {
    onFailure: (error) =>
      new TrajectoryStoreError({
        operation: "append",
        taskId: record.taskId,
        message: formatIssue(`the record of step ${step} is not a trajectory record`, error.issue, full)
      }),
    onSuccess: (encoded) => {
      encodedRecords.set(full, encoded)
      return { record: full, encoded }
    }
  })
}

// ---------------------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------------------

/**
 * A store in this process's memory. Records are checked against the schema as the file layer does.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory: Effect.Effect<Service> = Effect.sync(() => {
  const tasks = new Map<string, Array<TrajectoryRecord>>()
  return {
    append: (record) =>
      Effect.andThen(
        checkTaskId("append", record.taskId),
        Effect.suspend(() => {
          const records = tasks.get(record.taskId) ?? []
          const checked = toLine(record, records.length + 1)
          if (Result.isFailure(checked)) return Effect.fail(checked.failure)
          records.push(checked.success.record)
          tasks.set(record.taskId, records)
          return Effect.succeed(checked.success.record)
        })
      ),
    read: (taskId) =>
      Stream.unwrap(Effect.as(checkTaskId("read", taskId), Stream.suspend(() => Stream.fromIterable((tasks.get(taskId) ?? []).slice())))),
    count: (taskId) => Effect.andThen(checkTaskId("count", taskId), Effect.sync(() => tasks.get(taskId)?.length ?? 0))
  }
})

/**
 * A store in this process's memory: records last as long as the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory: Layer.Layer<TrajectoryStore> = Layer.effect(TrajectoryStore, makeMemory)

// ---------------------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------------------

/**
 * Options of `layerFile`.
 *
 * @since 0.1.0
 * @category options
 */
export interface FileOptions {
  /** The trajectories directory; records go to `<root>/raw/<task_id>.jsonl` (default `trajectories`). */
  readonly root?: string | undefined
  /** fsync after every record, so a power loss cannot lose an acknowledged step (default false). */
  readonly fsync?: boolean | undefined
}

/**
 * The default trajectories directory.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultRoot = "trajectories"

interface TaskFile {
  readonly lock: Semaphore.Semaphore
  /** Records in the file, known once this store took the writer lock and opened (and repaired) it. */
  records: number | undefined
  /** Whether this store holds the task's writer lock. */
  held: boolean
  /** The file open for appending (see `openHandles`), and the scope that closes it. */
  handle: { readonly file: FileSystem.File; readonly scope: Scope.Closeable } | undefined
  /** An append is opening or writing through `handle`: it is not closed under it. */
  writing: boolean
}

/**
 * How many task files a store keeps open for appending. Opening, writing and closing the file per record (three
 * syscalls and their Effect wrappers) was ~5 % of a rollout step's CPU; a rollout appends to the same few tasks
 * over and over. Past this many, the least recently written idle one is closed, so a run over thousands of tasks
 * stays far below the process's file descriptor limit.
 */
const openHandles = 64

/** What a writer lock file says about its holder. */
const LockOwner = Schema.Struct({ pid: Schema.Int, host: Schema.String, store: Schema.String, since: Schema.Number })
type LockOwner = typeof LockOwner.Type
const decodeLockOwner = Schema.decodeUnknownResult(Schema.fromJsonString(LockOwner))

/** Whether a process with this pid exists on this machine (EPERM: it exists, and is someone else's). */
const processExists = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** A lock file that stays empty (or unreadable) this long was left by a writer that died while creating it. */
const abandonedLockMs = 10_000

/**
 * A store of JSONL files, one per task. The writer locks it takes are removed when `Scope` closes (see the
 * module doc).
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeFile = (
  options: FileOptions = {}
): Effect.Effect<Service, TrajectoryStoreError, FileSystem.FileSystem | Scope.Scope> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = join(options.root ?? defaultRoot, "raw")
    yield* fs.makeDirectory(dir, { recursive: true }).pipe(
      Effect.mapError((error) =>
        new TrajectoryStoreError({ operation: "open", taskId: "-", path: dir, message: `cannot create ${dir}: ${error.message}` })
      )
    )
    const owner: LockOwner = {
      pid: process.pid,
      host: hostname(),
      store: Math.random().toString(36).slice(2, 12),
      since: Date.now()
    }
    const ownerLine = JSON.stringify(owner)
    const files = new Map<string, TaskFile>()
    const fileOf = (taskId: string): TaskFile => {
      let file = files.get(taskId)
      if (file === undefined) {
        file = { lock: Semaphore.makeUnsafe(1), records: undefined, held: false, handle: undefined, writing: false }
        files.set(taskId, file)
      }
      return file
    }
    const pathOf = (taskId: string) => join(dir, `${taskId}.jsonl`)
    const failure = (operation: string, taskId: string, path: string) => (error: { readonly message: string }) =>
      new TrajectoryStoreError({ operation, taskId, path, message: `${path}: ${error.message}` })

    // Give back every lock this store took (only those that still name it).
    yield* Effect.addFinalizer(() =>
      Effect.forEach(
        [...files.entries()].filter(([, file]) => file.held),
        ([taskId]) => {
          const lockPath = `${pathOf(taskId)}.lock`
          return fs.readFileString(lockPath).pipe(
            Effect.flatMap((text) => text === ownerLine ? fs.remove(lockPath) : Effect.void),
            Effect.ignore
          )
        },
        { discard: true }
      )
    )

    /** Takes the task's writer lock (once per store), or fails naming who holds it. Call with `file.lock` held. */
    const takeLock = (taskId: string, file: TaskFile): Effect.Effect<void, TrajectoryStoreError> => {
      if (file.held) return Effect.void
      const path = pathOf(taskId)
      const lockPath = `${path}.lock`
      const fail = failure("lock", taskId, lockPath)
      const refuse = (message: string) =>
        Effect.fail(new TrajectoryStoreError({ operation: "lock", taskId, path: lockPath, message }))
      const attempt = (triesLeft: number): Effect.Effect<void, TrajectoryStoreError> =>
        fs.writeFileString(lockPath, ownerLine, { flag: "wx" }).pipe(
          Effect.map(() => {
            file.held = true
          }),
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

    /**
     * Takes the writer lock, reads the file once, repairs a torn last line, and counts its records. Call with
     * `file.lock` held.
     */
    const open = (taskId: string, file: TaskFile): Effect.Effect<number, TrajectoryStoreError> =>
      file.records !== undefined ? Effect.succeed(file.records) : Effect.gen(function*() {
        yield* takeLock(taskId, file)
        const path = pathOf(taskId)
        const fail = failure("open", taskId, path)
        const exists = yield* fs.exists(path).pipe(Effect.mapError(fail))
        let text = exists ? yield* fs.readFileString(path).pipe(Effect.mapError(fail)) : ""
        if (text !== "" && !text.endsWith("\n")) {
          const cut = text.lastIndexOf("\n") + 1
          const fragment = text.slice(cut)
          if (Result.isSuccess(decodeLine(fragment, "the last line"))) {
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

    // The task files open for appending, least recently written first (a Map keeps insertion order; a write
    // re-inserts). A task is listed only once its file is open, so everything open is closed with the store.
    const openFiles = new Map<string, TaskFile>()
    const utf8 = new TextEncoder()
    const closeHandle = (file: TaskFile): Effect.Effect<void> => {
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

    // Appends of one task take turns (its `lock`): `writing` is this append's alone from its open to its last byte.
    const write = (taskId: string, file: TaskFile, path: string, line: string): Effect.Effect<void, { readonly message: string }> =>
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
          if (options.fsync === true) yield* handle.sync
        }).pipe(Effect.ensuring(Effect.sync(() => {
          file.writing = false
        })))
      })

    const append = (record: NewRecord) =>
      Effect.andThen(
        checkTaskId("append", record.taskId),
        Effect.suspend(() => {
          const file = fileOf(record.taskId)
          const path = pathOf(record.taskId)
          return file.lock.withPermits(1)(Effect.gen(function*() {
            const records = yield* open(record.taskId, file)
            const checked = toLine(record, records + 1)
            if (Result.isFailure(checked)) return yield* checked.failure
            yield* write(record.taskId, file, path, JSON.stringify(checked.success.encoded) + "\n").pipe(
              // The file may now end in a partial line: have the next append repair it first (through the path,
              // then open it anew). Failed or interrupted alike: an interrupted write may have written part of it.
              Effect.onError(() =>
                Effect.andThen(
                  Effect.sync(() => {
                    file.records = undefined
                    openFiles.delete(record.taskId)
                  }),
                  closeHandle(file)
                )
              ),
              Effect.mapError(failure("append", record.taskId, path))
            )
            file.records = records + 1
            return checked.success.record
          }))
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

    const read = (taskId: string): Stream.Stream<TrajectoryRecord, TrajectoryStoreError> =>
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
            Result.match(decodeLine(line, `${path} line ${index + 1}`), {
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

    return { append, read, count } satisfies Service
  })

const countLines = (text: string): number => {
  let records = 0
  for (const line of text.split("\n")) if (line.trim() !== "") records++
  return records
}

/**
 * JSONL files under `root` (default `trajectories`): the default store.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFile = (options: FileOptions = {}): Layer.Layer<TrajectoryStore, TrajectoryStoreError, FileSystem.FileSystem> =>
  Layer.effect(TrajectoryStore, makeFile(options))

/**
 * The path a task's records are written to under `root`.
 *
 * @since 0.1.0
 * @category utils
 */
export const pathOf = (taskId: string, root: string = defaultRoot): Option.Option<string> =>
  isSafeTaskId(taskId) ? Option.some(join(root, "raw", `${taskId}.jsonl`)) : Option.none()

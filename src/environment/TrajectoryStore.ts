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
import { Context, Effect, type FileSystem, Layer, Option, Result, Schema, type Scope, Stream } from "effect"
import { join } from "node:path"
import { formatIssue } from "../core/internal/decode.js"
import * as Packed_ from "./internal/packedTokens.js"
import { checkTaskId, TrajectoryStoreError } from "./internal/trajectoryStore/error.js"
import * as FileStore from "./internal/trajectoryStore/file.js"
import * as RecordJson from "./internal/recordJson.js"
import { isSafeTaskId } from "./internal/taskId.js"
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
  episodeReward: Schema.optional(Schema.NullOr(Schema.Finite)),
  /**
   * On an episode's last step only, and only when true: a part of a step reward that `episodeReward` counts failed
   * (a command that could not run, a judge that did not answer), so `episodeReward` (a failed part counting 0) is not
   * what the episode was worth. With the `last` aggregate only the last step's parts count. The exports leave such an
   * episode out where its reward matters (`valet/Export`).
   *
   * @since 0.2.0
   */
  episodeRewardFailed: Schema.optional(Schema.Boolean)
}).pipe(Schema.encodeKeys({
  taskId: "task_id",
  episodeId: "episode_id",
  episodeStep: "episode_step",
  groupId: "group_id",
  episodeEnd: "episode_end",
  episodeReward: "episode_reward",
  episodeRewardFailed: "episode_reward_failed",
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

export {
  /**
   * A trajectory could not be written or read; `path` and `line` point at the bad place.
   *
   * @since 0.1.0
   * @category errors
   */
  TrajectoryStoreError
}

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
  FileStore.make({ root: options.root ?? defaultRoot, fsync: options.fsync === true }, { toLine, decodeLine })

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

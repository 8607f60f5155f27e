/**
 * Trajectories as training data (DESIGN §18): the trajectory store's records exported in the three shapes trainers
 * load, as JSONL or Parquet, streamed a task at a time.
 *
 * - `sft-chat` — one row per step: `{"messages": [{"role": "user", …}, {"role": "assistant", …}]}`, what TRL's
 *   `SFTTrainer` and OpenAI fine-tuning read. Per step, not per episode: a step's prompt already carries the task's
 *   state (the actor loop renders it into every prompt), and the model never saw earlier steps as chat turns, so
 *   joining an episode's steps into one conversation would train on a context the model was never given. Steps of an
 *   interrupted episode are kept (each is still a prompt and its answer) unless `minReward` asks for the episode's
 *   reward, which an interrupted episode does not have.
 * - `grpo` — one row per step of a complete episode that belongs to a group (`ActorLoop` with `group`): TRL's
 *   `prompt` / `completion` (conversational) / `reward` / `advantage` and verl's `data_source` / `reward_model` /
 *   `extra_info` / `uid` (the group, what verl's GRPO groups by). A group's rows are together; `reward` is the
 *   episode's reward (what the group compares), `advantage` the group-relative one GRPO computes. An episode without
 *   `episode_end` (interrupted) is left out, and so is a step outside any group and an episode whose reward had a
 *   part fail (`episodeRewardFailed`: a failed part counts 0, not what the episode was worth; its group's advantages
 *   are computed without it): all counted as `Skipped`.
 * - `tokens` — one row per step with token data: `prompt_ids`, `completion_ids`, `completion_logprobs`,
 *   `prompt_logprobs`, and `input_ids` (prompt then completion) with its `attention_mask` and `loss_mask` (1 on the
 *   completion). A step without token ids is counted, never given made-up ones; log-probabilities the server did
 *   not send are `null`, not zeros; so are `reward` and `episode_reward` when a part of them failed.
 *
 * Every export emits `Item`s: a `Row`, or a `Skipped` saying which records were left out and why (a corrupt line of
 * the store with its number, an interrupted episode…), so a caller can say so and go on.
 *
 * @example
 * ```ts
 * import { NodeServices } from "@effect/platform-node"
 * import { Effect, Stream } from "effect"
 * import * as Export from "valet/Export"
 *
 * // The GRPO rows of ./trajectories as JSONL lines, the skipped records counted.
 * const program = Export.fromStore("grpo", { root: "trajectories" }).pipe(
 *   Stream.runFold(() => ({ lines: [] as Array<string>, skipped: 0 }), (acc, item) => {
 *     if (item._tag === "Row") acc.lines.push(JSON.stringify(item.row))
 *     else acc.skipped += item.records
 *     return acc
 *   }),
 *   Effect.provide(NodeServices.layer)
 * )
 * ```
 *
 * @since 0.2.0
 */
import { type FileSystem, Result, Schema, Stream } from "effect"
import type * as TrajectoryStore from "../environment/TrajectoryStore.js"
import { ExportError } from "./internal/export/error.js"
import * as Parquet from "./internal/export/parquet.js"
import * as Read from "./internal/export/read.js"
import * as Rows from "./internal/export/rows.js"

export {
  /**
   * An export could not read its trajectories or write its output (a corrupt record is skipped, not an error).
   *
   * @since 0.2.0
   * @category errors
   */
  ExportError
}

// ---------------------------------------------------------------------------------------------------------
// Formats and their rows
// ---------------------------------------------------------------------------------------------------------

/**
 * The export formats: `sft-chat`, `grpo`, `tokens`.
 *
 * @since 0.2.0
 * @category models
 */
export const Format = Schema.Literals(["sft-chat", "grpo", "tokens"])
/**
 * An export format.
 *
 * @since 0.2.0
 * @category models
 */
export type Format = typeof Format.Type

/**
 * A chat message of an exported row (`role`, `content`: the chat format trainers read). `system` only when the
 * export is given the system message the steps ran with (`Options.system`).
 *
 * @since 0.2.0
 * @category models
 */
export const Message = Schema.Struct({ role: Schema.Literals(["system", "user", "assistant"]), content: Schema.String })

/**
 * A row of `sft-chat`: the step's prompt as the user's turn and the model's raw answer as the assistant's.
 *
 * @since 0.2.0
 * @category models
 */
export const SftChatRow = Schema.Struct({ messages: Schema.Array(Message) })
/**
 * A row of `sft-chat`.
 *
 * @since 0.2.0
 * @category models
 */
export type SftChatRow = typeof SftChatRow.Type

/**
 * A row of `grpo`: one step of a complete episode of a group. `reward` is the episode's reward, `advantage`
 * `(reward - mean) / (std + 1e-4)` over the group's complete episodes (`std` with Bessel's correction, as TRL's
 * `GRPOTrainer`; 0 in a group of one; null where the reward is null), `step_reward` the step's own. `uid` repeats
 * `group_id` under the name verl groups by; `reward_model.style` is `valet` (the reward is already computed, there
 * is no reference to recompute it from).
 *
 * @since 0.2.0
 * @category models
 */
export const GrpoRow = Schema.Struct({
  prompt: Schema.Array(Message),
  completion: Schema.Array(Message),
  reward: Schema.NullOr(Schema.Number),
  advantage: Schema.NullOr(Schema.Number),
  group_id: Schema.String,
  uid: Schema.String,
  group_size: Schema.Int,
  data_source: Schema.String,
  reward_model: Schema.Struct({ style: Schema.String, ground_truth: Schema.NullOr(Schema.String) }),
  extra_info: Schema.Struct({
    index: Schema.Int,
    task_id: Schema.String,
    step: Schema.Int,
    episode_id: Schema.String,
    episode_step: Schema.Int,
    episode_end: Schema.String,
    seed: Schema.NullOr(Schema.Int),
    step_reward: Schema.NullOr(Schema.Number)
  })
})
/**
 * A row of `grpo`.
 *
 * @since 0.2.0
 * @category models
 */
export type GrpoRow = typeof GrpoRow.Type

/**
 * A row of `tokens`: a step's token ids and log-probabilities as the server returned them (float32), with
 * `input_ids` = prompt then completion, `attention_mask` all 1 and `loss_mask` 0 on the prompt, 1 on the completion.
 * `completion_logprobs` / `prompt_logprobs` are null when the server sent none; an element is null where it gave
 * none (the first prompt token). `reward` is the step's, `episode_reward` its episode's once ended.
 *
 * @since 0.2.0
 * @category models
 */
export const TokensRow = Schema.Struct({
  task_id: Schema.String,
  step: Schema.Int,
  episode_id: Schema.NullOr(Schema.String),
  episode_step: Schema.NullOr(Schema.Int),
  group_id: Schema.NullOr(Schema.String),
  reward: Schema.NullOr(Schema.Number),
  episode_reward: Schema.NullOr(Schema.Number),
  prompt_ids: Schema.Array(Schema.Int),
  completion_ids: Schema.Array(Schema.Int),
  completion_logprobs: Schema.NullOr(Schema.Array(Schema.NullOr(Schema.Number))),
  prompt_logprobs: Schema.NullOr(Schema.Array(Schema.NullOr(Schema.Number))),
  input_ids: Schema.Array(Schema.Int),
  attention_mask: Schema.Array(Schema.Int),
  loss_mask: Schema.Array(Schema.Int)
})
/**
 * A row of `tokens`.
 *
 * @since 0.2.0
 * @category models
 */
export type TokensRow = typeof TokensRow.Type

/**
 * The row of a format.
 *
 * @since 0.2.0
 * @category models
 */
export type Row<F extends Format> = F extends "sft-chat" ? SftChatRow : F extends "grpo" ? GrpoRow : TokensRow

/**
 * The schema of a format's rows (to decode an exported line).
 *
 * @since 0.2.0
 * @category models
 */
export const rowSchema = {
  "sft-chat": SftChatRow,
  grpo: GrpoRow,
  tokens: TokensRow
} as const

/**
 * Why records were left out: `corrupt_line` (a store line that is not a record), `no_token_data` /
 * `partial_token_data` (`tokens` without prompt and completion ids), `interrupted_episode` and `no_group` (`grpo`),
 * `below_min_reward`, `reward_failed` (a part of the reward failed: `grpo` leaves such an episode out, the others
 * when `minReward` asks for the reward).
 *
 * @since 0.2.0
 * @category models
 */
export type SkipReason = Rows.SkipReason

/**
 * What an export emits: a `Row`, or `Skipped` — `records` left out of `taskId` for `reason` (`episodes` for an
 * episode's reason; `path`, `line`, `message` for a corrupt line).
 *
 * @since 0.2.0
 * @category models
 */
export type Item<R> = Rows.Item<R>

/**
 * Options of an export.
 *
 * @since 0.2.0
 * @category options
 */
export interface Options {
  /**
   * Keep only steps whose reward is at least this: the episode's reward for a step of an episode (so an episode is
   * kept or left whole), else the step's; a step without a reward is left out. In `grpo` the advantages are
   * computed over the whole group first.
   */
  readonly minReward?: number | undefined
  /**
   * The system message the steps were run with (`ActorLoop`'s `system` in chat mode): a record does not keep it, so
   * `sft-chat` and `grpo` put it first only when given here.
   */
  readonly system?: string | undefined
}

// The rows built inside are the rows the schemas describe.
type Agrees<A, B> = [A] extends [B] ? true : never
const _agree: [Agrees<Rows.SftChatRow, SftChatRow>, Agrees<Rows.GrpoRow, GrpoRow>, Agrees<Rows.TokensRow, TokensRow>] = [true, true, true]
void _agree

const rowsOfTask = (format: Format, records: ReadonlyArray<TrajectoryStore.TrajectoryRecord>, options: Options, counter: Rows.Counter) => {
  if (records.length === 0) return []
  switch (format) {
    case "sft-chat":
      return Rows.sftChat(records, options)
    case "grpo":
      return Rows.grpo(records, options, counter)
    case "tokens":
      return Rows.tokens(records, options)
  }
}

// ---------------------------------------------------------------------------------------------------------
// Exports
// ---------------------------------------------------------------------------------------------------------

/**
 * A format's items from a stream of records in store order (a task's records together, as `TrajectoryStore.read`
 * streams them task after task): each task's records are held until the next task begins, since a group and the
 * end of an episode can only be known from all of them.
 *
 * @since 0.2.0
 * @category exports
 */
export const rows = <F extends Format>(format: F, options: Options = {}) =>
<E, R>(records: Stream.Stream<TrajectoryStore.TrajectoryRecord, E, R>): Stream.Stream<Item<Row<F>>, E, R> =>
  Stream.suspend(() => {
    const counter: Rows.Counter = { next: 0 }
    return records.pipe(
      Stream.groupAdjacentBy((record) => record.taskId),
      Stream.flatMap(([, task]) => Stream.fromIterable(rowsOfTask(format, task, options, counter) as Array<Item<Row<F>>>))
    )
  })

/**
 * Options of `fromStore`.
 *
 * @since 0.2.0
 * @category options
 */
export interface StoreOptions extends Options {
  /** The trajectories directory of `TrajectoryStore.layerFile` (default `trajectories`): `<root>/raw/<task_id>.jsonl`. */
  readonly root?: string | undefined
  /** Only these tasks. */
  readonly tasks?: ReadonlyArray<string> | undefined
}

/**
 * A format's items from a file store, task by task in task id order. Read leniently: a line that is not a record is
 * `Skipped` (`corrupt_line`, with its path and number) and the export goes on; a missing directory is an
 * `ExportError`.
 *
 * @since 0.2.0
 * @category exports
 */
export const fromStore = <F extends Format>(
  format: F,
  options: StoreOptions = {}
): Stream.Stream<Item<Row<F>>, ExportError, FileSystem.FileSystem> =>
  Stream.suspend(() => {
    const root = options.root ?? "trajectories"
    const counter: Rows.Counter = { next: 0 }
    return Stream.fromIterableEffect(Read.taskIds(root, options.tasks)).pipe(
      Stream.mapEffect((taskId) => Read.readTask(root, taskId)),
      Stream.flatMap((task) =>
        Stream.fromIterable<Item<Row<F>>>([
          ...task.corrupt,
          ...(rowsOfTask(format, task.records, options, counter) as Array<Item<Row<F>>>)
        ])
      )
    )
  })

/**
 * Rows as JSON lines (each ending in a newline).
 *
 * @since 0.2.0
 * @category output
 */
export const jsonl = <A, E, R>(rows: Stream.Stream<A, E, R>): Stream.Stream<string, E, R> =>
  Stream.map(rows, (row) => `${JSON.stringify(row)}\n`)

/**
 * Rows of a format as a Parquet file's bytes, a row group (1,000 rows) at a time, then the footer. Needs the
 * optional package `hyparquet-writer` (an `ExportError` naming it when it is not installed). Columns are typed:
 * messages `list<struct<role, content>>`, ids `list<int32>`, log-probabilities `list<float>`, rewards `double`,
 * `extra_info` a struct (`index` and `seed` int64).
 *
 * @since 0.2.0
 * @category output
 */
export const parquet = <F extends Format>(format: F) =>
<E, R>(rows: Stream.Stream<Row<F>, E, R>): Stream.Stream<Uint8Array, E | ExportError, R> => Parquet.encode(format, rows)

/**
 * The rows of a stream of items (the skipped records dropped).
 *
 * @since 0.2.0
 * @category exports
 */
export const rowsOf = <A, E, R>(items: Stream.Stream<Item<A>, E, R>): Stream.Stream<A, E, R> =>
  Stream.filterMap(items, (item: Item<A>) => (item._tag === "Row" ? Result.succeed(item.row) : Result.fail(item)))

/**
 * `valet trajectories export --format <sft-chat | grpo | tokens>`: the trajectory store's records as training data
 * (`valet/Export`), JSONL on stdout or `--out FILE`, Parquet with `--parquet` or an `--out` ending in `.parquet`.
 * What was left out goes to stderr: each corrupt line with its number as it is met, then one summary line.
 */
import { Effect, FileSystem, Option, Stdio, Stream } from "effect"
import type { PlatformError } from "effect/PlatformError"
import { Command, Flag } from "effect/cli"
import * as TrajectoryStore from "../../environment/TrajectoryStore.js"
import * as Export from "../../rollouts/Export.js"

/** What `exportTrajectories` is asked. */
export interface Settings {
  readonly format: Export.Format
  /** The trajectories directory (`--trajectories`, as `valet actor-loop` writes it). */
  readonly root: string
  /** A file to write; stdout when absent. */
  readonly out?: string | undefined
  /** Parquet instead of JSONL (also when `out` ends in `.parquet`). */
  readonly parquet?: boolean | undefined
  readonly minReward?: number | undefined
  readonly system?: string | undefined
  readonly tasks?: ReadonlyArray<string> | undefined
}

/** What an export did: rows written, and the records left out by reason. */
export interface Summary {
  readonly rows: number
  readonly skipped: Readonly<Partial<Record<Export.SkipReason, { readonly records: number; readonly episodes: number }>>>
}

/** Whether an error is a write to a pipe whose reader is gone (EPIPE), somewhere down its causes. */
const closedPipe = (error: unknown): boolean => {
  for (let at: unknown = error, depth = 0; typeof at === "object" && at !== null && depth < 5; depth++) {
    if ((at as { readonly code?: unknown }).code === "EPIPE") return true
    at = "reason" in at ? (at as { readonly reason: unknown }).reason : (at as { readonly cause?: unknown }).cause
  }
  return false
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/** `skipped 2 corrupt lines, 1 interrupted episode (3 records), …` — or nothing when nothing was left out. */
export const skippedText = (summary: Summary): string => {
  const parts: Array<string> = []
  const s = summary.skipped
  if (s.corrupt_line) parts.push(plural(s.corrupt_line.records, "corrupt line"))
  if (s.interrupted_episode) {
    parts.push(`${plural(s.interrupted_episode.episodes, "interrupted episode")} (${plural(s.interrupted_episode.records, "record")}, no episode_end)`)
  }
  if (s.no_group) parts.push(`${plural(s.no_group.records, "record")} outside any group (no group_id: run with --group)`)
  if (s.no_token_data) parts.push(`${plural(s.no_token_data.records, "record")} without token data`)
  if (s.partial_token_data) parts.push(`${plural(s.partial_token_data.records, "record")} without prompt or completion ids`)
  if (s.below_min_reward) parts.push(`${plural(s.below_min_reward.records, "record")} below --min-reward or without a reward`)
  if (s.reward_failed) {
    parts.push(
      s.reward_failed.episodes > 0
        ? `${plural(s.reward_failed.episodes, "episode")} whose reward failed (${plural(s.reward_failed.records, "record")}: reward_parts says why)`
        : `${plural(s.reward_failed.records, "record")} whose reward failed (reward_parts says why)`
    )
  }
  return parts.length === 0 ? "" : `; skipped ${parts.join(", ")}`
}

/**
 * Exports the store at `settings.root` in `settings.format`: rows to `out` (or stdout), corrupt lines and the
 * summary to stderr.
 */
export const exportTrajectories = (
  settings: Settings
): Effect.Effect<Summary, Export.ExportError | PlatformError, FileSystem.FileSystem | Stdio.Stdio> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const stdio = yield* Stdio.Stdio
    const stderr = (line: string) => Stream.run(Stream.make(`${line}\n`), stdio.stderr({ endOnDone: false }))
    const parquet = settings.parquet === true || (settings.out?.endsWith(".parquet") ?? false)
    let rows = 0
    const skipped: Record<string, { records: number; episodes: number }> = {}
    const items = Export.fromStore(settings.format, {
      root: settings.root,
      ...(settings.tasks !== undefined && settings.tasks.length > 0 ? { tasks: settings.tasks } : {}),
      ...(settings.minReward !== undefined ? { minReward: settings.minReward } : {}),
      ...(settings.system !== undefined ? { system: settings.system } : {})
    }).pipe(
      Stream.tap((item) =>
        Effect.gen(function*() {
          if (item._tag === "Row") {
            rows++
            return
          }
          const counted = skipped[item.reason] ?? { records: 0, episodes: 0 }
          counted.records += item.records
          counted.episodes += item.episodes ?? 0
          skipped[item.reason] = counted
          if (item.reason === "corrupt_line") yield* stderr(`skipped ${item.path}:${item.line}: ${item.message}`)
        })
      )
    )
    const rowStream = Export.rowsOf(items)
    const encoded = parquet ? Export.parquet(settings.format)(rowStream) : Stream.encodeText(Export.jsonl(rowStream))
    let closed = false
    if (settings.out === undefined) {
      // A reader that stops early (`| head`) closes the pipe: the export ends there, as a Unix filter does.
      closed = yield* Stream.run(encoded, stdio.stdout({ endOnDone: false })).pipe(
        Effect.as(false),
        Effect.catchIf(closedPipe, () => Effect.succeed(true))
      )
    } else {
      // Written beside and renamed when whole: a failed export leaves no half file (a Parquet one would not open).
      const out = settings.out
      const partial = `${out}.partial`
      yield* Stream.run(encoded, fs.sink(partial)).pipe(
        Effect.andThen(fs.rename(partial, out)),
        Effect.onError(() => Effect.ignore(fs.remove(partial)))
      )
    }
    const summary: Summary = { rows, skipped }
    yield* stderr(
      `exported ${plural(rows, "row")} (${settings.format}${parquet ? ", Parquet" : ""}) from ${settings.root} to ` +
        `${settings.out ?? "stdout"}${closed ? " (closed by its reader)" : ""}${skippedText(summary)}`
    )
    return summary
  })

const exportCommand = Command.make(
  "export",
  {
    format: Flag.Literals("format", Export.Format.literals).pipe(
      Flag.withDescription(
        "sft-chat: {messages} per step (TRL SFTTrainer, OpenAI fine-tuning); grpo: prompt/completion/reward/advantage rows of " +
          "complete episodes, a group's rows together (TRL and verl names); tokens: token ids, log-probabilities and masks."
      )
    ),
    trajectories: Flag.String("trajectories").pipe(
      Flag.withDescription(`The trajectories directory: <dir>/raw/<task_id>.jsonl (default ${TrajectoryStore.defaultRoot}).`),
      Flag.withDefault(TrajectoryStore.defaultRoot)
    ),
    out: Flag.String("out").pipe(Flag.withDescription("Write to this file instead of stdout (Parquet when it ends in .parquet)."), Flag.optional),
    parquet: Flag.Boolean("parquet").pipe(
      Flag.withDescription("Write Parquet (needs the package hyparquet-writer) instead of JSONL."),
      Flag.withDefault(false)
    ),
    minReward: Flag.Finite("min-reward").pipe(
      Flag.withDescription("Keep only steps whose reward (their episode's, for episodes) is at least this."),
      Flag.optional
    ),
    system: Flag.String("system").pipe(
      Flag.withDescription("The system message the steps ran with (ActorLoop's system option in chat mode; records do not keep it), put first in sft-chat and grpo prompts."),
      Flag.optional
    ),
    task: Flag.String("task").pipe(Flag.withDescription("Export only this task (repeat for several)."), Flag.atLeast(0))
  },
  ({ format, minReward, out, parquet, system, task, trajectories }) =>
    Effect.asVoid(exportTrajectories({
      format,
      root: trajectories,
      parquet,
      tasks: task,
      ...(Option.isSome(out) ? { out: out.value } : {}),
      ...(Option.isSome(minReward) ? { minReward: minReward.value } : {}),
      ...(Option.isSome(system) ? { system: system.value } : {})
    }))
).pipe(
  Command.withDescription(
    "Exports the trajectories as training data: JSONL (or Parquet) rows for SFT (sft-chat), GRPO (grpo) or token-level " +
      "training (tokens). Corrupt lines are skipped with their line number; what was left out is said on stderr."
  )
)

/** `valet trajectories …`: the recorded trajectories. */
export const trajectoriesCommand = Command.make("trajectories").pipe(
  Command.withDescription("Work with the recorded RL trajectories."),
  Command.withSubcommands([exportCommand])
)

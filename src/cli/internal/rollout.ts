/**
 * `valet rollout tasks.jsonl --group 8 --max-steps 6`: the RL entry point. The same run as `valet actor-loop` (its
 * flags, task reading, layers and `ActorLoop.run`, shared from actorLoop.ts), reported for hundreds of episodes at
 * once: instead of a line per episode, one progress line on stderr —
 * `rollout: 37/256 episodes · 0 failed · 142 steps · 1830 tokens/s · reward mean 0.42 · ETA 12 s` — rewritten in
 * place on a terminal and printed as a line otherwise, at most once per `progressInterval` (a `Schedule`, so a test
 * moves it with `TestClock`), then a summary line. Steps and tokens count as the steps are appended (the trajectory
 * store of the run is wrapped to count them), so the line moves while long episodes are still running; tokens are
 * the completions' (`output_tokens`). Skipped task lines are reported with their line numbers; a failed episode gets
 * a line of its own. Stdout stays empty: the trajectories are in their files.
 *
 * Interrupted (Ctrl-C), the run stops its episodes (their workspaces are scoped: removed on the way out) and a line
 * says how far it got. Each record is appended as one whole line (one write), so an interrupted run leaves complete
 * lines; a line torn by a harder stop (SIGKILL mid-write) is moved to `<file>.torn` by the trajectory store the next
 * time it opens the file. An episode without its `episode_end` line is partial: a trainer drops it.
 */
import { Clock, Duration, Effect, Layer, Option, Schedule } from "effect"
import { Command } from "effect/cli"
import * as TrajectoryStore from "../../environment/TrajectoryStore.js"
import type * as Model from "../../core/Model.js"
import type * as ActorLoop from "../../rollouts/ActorLoop.js"
import {
  commandArguments,
  type FlagValues,
  layersFor,
  prepareTasks,
  runOutcomes,
  type Settings,
  settingsOf,
  vllmModel
} from "./actorLoop.js"
import { storeOf } from "./durable.js"
import { requireNoFailures } from "./failure.js"
import { oneLine, type Output, seconds, stderrOutput } from "./output.js"
import { rewardOfSpecs } from "./rewardFlag.js"

/** How far a rollout got: what the progress line and the summary show. */
export interface Progress {
  /** Episodes in the run: tasks × group. */
  readonly total: number
  /** Episodes ended (recorded or failed). */
  readonly done: number
  readonly failed: number
  /** Steps appended so far (of ended and running episodes). */
  readonly steps: number
  /** Completion tokens of the steps appended so far. */
  readonly outputTokens: number
  /** The sum and count of the episode rewards of the recorded episodes that were scored. */
  readonly rewardSum: number
  readonly rewarded: number
  readonly elapsedMs: number
}

const rate = (count: number, elapsedMs: number): number => (elapsedMs > 0 ? (count * 1000) / elapsedMs : 0)

const rewardMean = (progress: Progress): string =>
  progress.rewarded === 0 ? "reward mean –" : `reward mean ${(progress.rewardSum / progress.rewarded).toFixed(3)}`

/**
 * The progress line: `rollout: 37/256 episodes · 1 failed · 142 steps · 1830 tokens/s · reward mean 0.420 · ETA 12 s`.
 * The ETA is the episodes left at the rate episodes ended so far (`?` before the first ends).
 */
export const progressLine = (progress: Progress): string => {
  const episodesPerSecond = rate(progress.done, progress.elapsedMs)
  const left = progress.total - progress.done
  const eta = left === 0 ? "0 s" : episodesPerSecond > 0 ? seconds((left / episodesPerSecond) * 1000) : "?"
  return `rollout: ${progress.done}/${progress.total} episodes · ${progress.failed} failed · ${progress.steps} steps · ` +
    `${Math.round(rate(progress.outputTokens, progress.elapsedMs))} tokens/s · ${rewardMean(progress)} · ETA ${eta}`
}

/** What a rollout did. */
export interface Summary extends Progress {
  readonly tasks: number
  readonly skippedLines: number
}

/**
 * The summary line: `rollout: 256 episodes of 32 tasks · 255 recorded · 1 failed · 1536 steps · 12288 tokens
 * (2083 tokens/s) · 43.4 episodes/s · reward mean 0.420 · 0 malformed lines skipped · 5.9 s`.
 */
export const summaryLine = (summary: Summary): string =>
  `rollout: ${summary.total} episodes of ${summary.tasks} tasks · ${summary.done - summary.failed} recorded · ` +
  `${summary.failed} failed · ${summary.steps} steps · ${summary.outputTokens} tokens ` +
  `(${Math.round(rate(summary.outputTokens, summary.elapsedMs))} tokens/s) · ` +
  `${rate(summary.done, summary.elapsedMs).toFixed(2)} episodes/s · ${rewardMean(summary)} · ` +
  `${summary.skippedLines} malformed line${summary.skippedLines === 1 ? "" : "s"} skipped · ${seconds(summary.elapsedMs)}`

/** Settings of a rollout: the actor loop's, and how often the progress line may change (default 1 s). */
export interface RolloutSettings extends Settings {
  readonly progressInterval?: Duration.Input | undefined
}

/** The trajectory store of `layer`, wrapped to count each appended step and its completion tokens. */
const counting = <E>(
  layer: Layer.Layer<ActorLoop.Requirements, E>,
  onStep: (record: TrajectoryStore.TrajectoryRecord) => void
): Layer.Layer<ActorLoop.Requirements, E> =>
  Layer.effect(
    TrajectoryStore.TrajectoryStore,
    Effect.map(TrajectoryStore.TrajectoryStore, (store): TrajectoryStore.Service => ({
      ...store,
      append: (record) => Effect.tap(store.append(record), (appended) => Effect.sync(() => onStep(appended)))
    }))
  ).pipe(Layer.provideMerge(layer))

/**
 * Runs every task of the file at `path` (`group` rollouts of each, up to `maxSteps` steps) with the services of
 * `layer`, writing the progress line and the summary to `output`; with `durable`, every episode is a durable workflow
 * (`Durable.actorLoop`). Fails as `runTasksFile` does: `ActorLoopFailed` when no task could run, `InvalidOptions`
 * for settings out of range.
 */
export const runRollout = <E>(
  path: string,
  settings: RolloutSettings,
  layer: Layer.Layer<ActorLoop.Requirements, E>,
  output: Output,
  durable?: string | undefined
) =>
  Effect.gen(function*() {
    const { progressInterval, ...runSettings } = settings
    const { issues, tasks, total } = yield* prepareTasks(path, runSettings, output)
    const remoteSteps = durable !== undefined && storeOf(durable)._tag === "Postgres"
    const startedAt = yield* Clock.currentTimeMillis
    let done = 0
    let failed = 0
    let steps = 0
    let outputTokens = 0
    let rewardSum = 0
    let rewarded = 0
    const progress = Effect.map(Clock.currentTimeMillis, (now): Progress => ({
      total,
      done,
      failed,
      steps,
      outputTokens,
      rewardSum,
      rewarded,
      elapsedMs: now - startedAt
    }))
    // Written only when something moved: a plain-lines log gets no repeats while a long step runs.
    let shown = ""
    const show = Effect.flatMap(progress, (now) => {
      const moved = `${now.done}/${now.steps}`
      if (moved === shown) return Effect.void
      shown = moved
      return output.status(progressLine(now))
    })
    const onOutcome = (outcome: ActorLoop.Outcome) =>
      Effect.gen(function*() {
        done++
        // PostgreSQL runners append the steps in their own processes: here an outcome brings its episode's steps (or
        // the one step it ran).
        if (remoteSteps && outcome._tag === "Recorded") {
          for (const record of outcome.episode?.records ?? [outcome.record]) {
            steps++
            outputTokens += record.metrics.outputTokens ?? 0
          }
        }
        if (outcome._tag === "Failed") {
          failed++
          yield* output.line(`${outcome.task.taskId} FAILED: ${outcome.error._tag}: ${oneLine(outcome.error.message, 200)}`)
        } else if (outcome.reward !== undefined) {
          rewardSum += outcome.reward.value
          rewarded++
        }
      })
    const counted = counting(layer, (record) => {
      steps++
      outputTokens += record.metrics.outputTokens ?? 0
    })
    yield* output.line(
      `rollout: ${tasks.length} tasks from ${path}` +
        `${runSettings.group !== undefined ? `, ${runSettings.group} rollouts each` : ""}` +
        `${runSettings.maxSteps !== undefined ? `, up to ${runSettings.maxSteps} steps` : ""}, ${runSettings.concurrency} episodes at a time`
    )
    yield* Effect.scoped(Effect.gen(function*() {
      // The progress line, at most once an interval: a schedule rather than a check per outcome, so hundreds of
      // episodes ending at once cost one line.
      yield* Effect.forkScoped(Effect.repeat(show, Schedule.spaced(progressInterval ?? Duration.seconds(1))))
      yield* runOutcomes(path, tasks, runSettings, counted, onOutcome, durable)
    })).pipe(
      Effect.onInterrupt(() =>
        Effect.flatMap(progress, (now) =>
          output.line(`rollout: interrupted after ${now.done}/${now.total} episodes (${now.steps} steps); partial episodes have no episode_end line`)))
    )
    const last = yield* progress
    const summary: Summary = { ...last, tasks: tasks.length, skippedLines: issues.length }
    shown = ""
    yield* show
    yield* output.line(summaryLine(summary))
    return summary
  })

/** `valet rollout`, with the model layer chosen by `modelFor` (the vLLM pool for the real command). */
export const makeCommand = <E>(modelFor: (values: FlagValues) => Layer.Layer<Model.Model, E>, output: () => Output = stderrOutput) =>
  Command.make(
    "rollout",
    commandArguments,
    ({ durable, tasks, ...values }) =>
      Effect.flatMap(rewardOfSpecs(values.reward), (reward) =>
        runRollout(tasks, settingsOf(values), layersFor(values, modelFor(values), reward), output(), Option.getOrUndefined(durable)))
        .pipe(Effect.flatMap((summary) => requireNoFailures(summary.failed, summary.total, "episodes")))
  ).pipe(
    Command.withDescription(
      "Runs RL rollouts for a trainer: --group n episodes of each task of a JSONL file (distinct seeds, one group_id), " +
        "each up to --max-steps steps, --concurrency at a time, scored with --reward; one trajectory line a step in " +
        "<trajectories>/raw/<task_id>.jsonl. Progress (episodes, steps, tokens/s, reward mean, ETA) on stderr."
    )
  )

/** `valet rollout` on the vLLM actor pool. */
export const rolloutCommand = makeCommand(vllmModel)


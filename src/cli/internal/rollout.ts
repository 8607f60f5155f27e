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
 * time it opens the file. An episode without its `episode_end` line is partial: a trainer drops it. With `--durable`
 * on SQLite an unfinished episode's workspace is kept (`<work root>/kept/episode-<id>`): the same command run again
 * resumes the episode in what its recorded steps left, and removes the workspace when the episode ends; the line says so.
 */
import { Clock, Context, Duration, Effect, Layer, Option, Schedule } from "effect"
import { join } from "node:path"
import { Command, Flag } from "effect/cli"
import * as Sandbox from "../../environment/Sandbox.js"
import * as TrajectoryStore from "../../environment/TrajectoryStore.js"
import * as Model from "../../core/Model.js"
import * as Vllm from "../../providers/Vllm.js"
import * as ActorLoop from "../../rollouts/ActorLoop.js"
import {
  commandArguments,
  type FlagValues,
  layersFor,
  prepareTasks,
  runOutcomes,
  type Settings,
  settingsOf,
  shardNote
} from "./actorLoop.js"
import { storeOf } from "./durable.js"
import { requireNoFailures, UsageError } from "./failure.js"
import { oneLine, type Output, stderrOutput, stdoutOutput } from "./output.js"
import { rewardOfSpecs } from "./rewardFlag.js"
import { type Progress, type ProgressFormat, progressShown, reportOf, type Summary } from "./rolloutReport.js"
import { maxProcesses, runProcesses } from "./rolloutProcesses.js"
import type { Shard } from "./shard.js"

/**
 * Settings of a rollout: the actor loop's, how often the progress line may change (default 1 s), the shard of the
 * tasks file to run (`--shard`), and how progress is reported: as lines for people (the default), or as JSON lines
 * (`--progress json`: `{"type":"progress",…}` each interval, `{"type":"line","text":…}` for a failed episode,
 * `{"type":"summary",…}` at the end) for a program — `--processes` reads its processes' this way.
 */
export interface RolloutSettings extends Settings {
  readonly progressInterval?: Duration.Input | undefined
  readonly shard?: Shard | undefined
  readonly progress?: ProgressFormat | undefined
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
    const { progress: format, progressInterval, shard, ...runSettings } = settings
    const report = reportOf(format ?? "line", output)
    const { issues, tasks, total } = yield* prepareTasks(path, runSettings, report.announce, shard)
    const remoteSteps = durable !== undefined && storeOf(durable)._tag === "Postgres"
    // Where this process's sandbox makes workspaces (known once its layer is built): a durable episode stopped here
    // keeps its workspace there for the next run.
    let workRoot: string | undefined
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
    const { last: showLast, show } = progressShown(progress, report)
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
          yield* report.line(`${outcome.task.taskId} FAILED: ${outcome.error._tag}: ${oneLine(outcome.error.message, 200)}`)
        } else if (outcome.reward !== undefined && !ActorLoop.rewardUnknown(outcome.record)) {
          // The mean is of the rewards known: one that counted a failed part (a check that could not run) is not.
          rewardSum += outcome.reward.value
          rewarded++
        }
      })
    const counted = counting(layer, (record) => {
      steps++
      outputTokens += record.metrics.outputTokens ?? 0
    }).pipe(Layer.tap((context) => Effect.sync(() => {
      workRoot = Context.getOption(context, Sandbox.Sandbox).pipe(Option.map((sandbox) => sandbox.info.workRoot), Option.getOrUndefined)
    })))
    yield* report.announce.line(
      `rollout: ${tasks.length} tasks from ${path}${shardNote(shard)}` +
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
          report.line(
            `rollout: interrupted after ${now.done}/${now.total} episodes (${now.steps} steps); partial episodes have no episode_end line` +
              (durable !== undefined && !remoteSteps && workRoot !== undefined && now.done < now.total
                ? `; run the same command again to go on: the unfinished durable episodes' workspaces are kept for it in ${join(workRoot, "kept")}`
                : "")
          )))
    )
    const last = yield* progress
    const summary: Summary = { ...last, tasks: tasks.length, skippedLines: issues.length }
    yield* showLast
    yield* report.summary(summary)
    return summary
  })

/** How `valet rollout --processes` starts this command line again: the Node binary and the arguments before valet's own. */
export interface SelfCommand {
  readonly executable: string
  readonly args: ReadonlyArray<string>
  /** valet's arguments as given (`rollout tasks.jsonl --processes 2 …`). */
  readonly argv: ReadonlyArray<string>
}

/** This process: `node [its flags] <its script>` and its arguments. */
export const thisProcess = (): SelfCommand => ({
  executable: process.execPath,
  args: [...process.execArgv, process.argv[1]!],
  argv: process.argv.slice(2)
})

/** The flags of `valet rollout` only. */
const rolloutFlags = {
  processes: Flag.Int("processes").pipe(
    Flag.filter((n) => n >= 1 && n <= maxProcesses, () => `an integer from 1 to ${maxProcesses}`),
    Flag.withDescription(
      "Processes to spread the run over (default 1): each runs a shard of the tasks (--shard k/n) with its part of " +
        "--concurrency; one progress line and one summary for all. Node runs one event loop per process: use about " +
        "one per core when a step's CPU, not the model server, is the limit."
    ),
    Flag.withDefault(1)
  ),
  progress: Flag.Literals("progress", ["line", "json"]).pipe(
    Flag.withDescription(
      "How progress is reported: line (on stderr, the default) or json (JSON lines on stdout: {type: progress | line | " +
        "summary, …counts}) for a program driving the run."
    ),
    Flag.withDefault("line" as const)
  ),
  tokens: Flag.Boolean("tokens").pipe(
    Flag.withDescription(
      "Ask the vLLM actors for token-level data (return_token_ids, return_tokens_as_token_ids, logprobs) and store " +
        "it packed beside each step (`tokens`): prompt and completion token ids and the completion's logprobs. What a " +
        "server does not send is left absent, with one warning for the run (the legacy /generate server sends none)."
    ),
    Flag.withDefault(false)
  ),
  promptLogprobs: Flag.Boolean("prompt-logprobs").pipe(
    Flag.withDescription("With the token data (implies --tokens), ask for the prompt's logprobs too (prompt_logprobs: 0; a pass over the prompt's logits)."),
    Flag.withDefault(false)
  )
}

/** The token data a rollout asks its model for (`--tokens`, `--prompt-logprobs`): `Vllm.Options["tokens"]`. */
export type TokenRequest = Vllm.Options["tokens"]

const tokenRequestOf = (tokens: boolean, promptLogprobs: boolean): TokenRequest =>
  promptLogprobs ? { promptLogprobs: true } : tokens ? true : undefined

/**
 * The model of the real `valet rollout`: the vLLM pool of `--config` (one actor with `--actor-name`), asked for the
 * token data of `--tokens` / `--prompt-logprobs`.
 */
export const rolloutModel = (values: FlagValues, tokens: TokenRequest = undefined): Layer.Layer<Model.Model, Vllm.VllmError> =>
  Vllm.layerNode({
    configPath: values.config,
    ...(Option.isSome(values.actorName) ? { actorName: values.actorName.value } : {}),
    ...(tokens !== undefined ? { tokens } : {})
  })

/**
 * The judge's model beside an actor asked for token data: a judge's calls are not trained on, so on a vLLM pool
 * (`Vllm.Vllm` among what `model` builds) they go to the same actors — within their `max_in_flight` — without asking
 * for it (no log-probabilities computed for its answers, no prompt pass over its rubric, no warning from its calls).
 * Another model is the judge as it is. `model` is the same layer value, so it is built once for both.
 */
const judgeOf = <E>(model: Layer.Layer<Model.Model, E>): Layer.Layer<Model.Model, E> =>
  Layer.effect(
    Model.Model,
    Effect.flatMap(Effect.serviceOption(Vllm.Vllm), (pool) =>
      Option.match(pool, {
        onNone: () => Effect.service(Model.Model),
        onSome: (pool) => Effect.succeed(pool.modelWith({}))
      }))
  ).pipe(Layer.provide(model))

/**
 * `valet rollout`, with the model layer chosen by `modelFor` (the vLLM pool for the real command), the output of its
 * progress lines (stderr), and how `--processes` starts more of it (this process's command line).
 */
export const makeCommand = <E>(
  modelFor: (values: FlagValues, tokens: TokenRequest) => Layer.Layer<Model.Model, E>,
  output: () => Output = stderrOutput,
  self: () => SelfCommand = thisProcess
) =>
  Command.make(
    "rollout",
    { ...commandArguments, ...rolloutFlags },
    ({ durable, progress, promptLogprobs, tasks, tokens, processes, ...values }) =>
      Effect.gen(function*() {
        const reward = yield* rewardOfSpecs(values.reward)
        // JSON progress is for a program: it goes to stdout, which a rollout leaves empty otherwise.
        const out = progress === "json" ? stdoutOutput() : output()
        const settings: RolloutSettings = { ...settingsOf(values), progress, shard: Option.getOrUndefined(values.shard) }
        if ((tokens || promptLogprobs) && Option.isSome(durable) && storeOf(durable.value)._tag === "Postgres") {
          return yield* new UsageError({
            message: "--tokens (or --prompt-logprobs) does not go with --durable postgres://…: the `valet runner`s call the model " +
              "there and ask it for no token data; use --durable <file.sqlite> (this process calls the model)"
          })
        }
        if (processes > 1) {
          if (Option.isSome(durable)) {
            return yield* new UsageError({
              message: "--processes does not go with --durable (a durable rollout spreads over processes " +
                "as `valet runner`s on PostgreSQL)"
            })
          }
          if (Option.isSome(values.shard)) {
            return yield* new UsageError({ message: "--processes n runs the shards 0/n … n-1/n itself: give --processes or --shard, not both" })
          }
          const command = self()
          return yield* runProcesses(tasks, settings, processes, command, command.argv, out, progress)
        }
        const tokenRequest = tokenRequestOf(tokens, promptLogprobs)
        const model = modelFor(values, tokenRequest)
        const judge = tokenRequest !== undefined && reward !== undefined ? judgeOf(model) : model
        return yield* runRollout(tasks, settings, layersFor(values, model, reward, judge), out, Option.getOrUndefined(durable))
      }).pipe(Effect.flatMap((summary) => requireNoFailures(summary.failed, summary.total, "episodes")))
  ).pipe(
    Command.withDescription(
      "Runs RL rollouts for a trainer: --group n episodes of each task of a JSONL file (distinct seeds, one group_id), " +
        "each up to --max-steps steps, --concurrency at a time, scored with --reward; one trajectory line a step in " +
        "<trajectories>/raw/<task_id>.jsonl. Progress (episodes, steps, tokens/s, reward mean, ETA) on stderr."
    )
  )

/** `valet rollout` on the vLLM actor pool. */
export const rolloutCommand = makeCommand(rolloutModel)


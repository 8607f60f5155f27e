/**
 * `valet actor-loop tasks.jsonl`: one ActorLoop step per task line, `--concurrency` at a time, against the vLLM
 * pool (`--config`, `--actor-name`). Blank lines are skipped; a malformed line is reported with its number and
 * skipped; progress goes to a status line on a terminal and to plain lines otherwise; a summary ends the run. The
 * exit code is non-zero only when no task could run.
 *
 * The work is in `runTasksFile`, which takes the layers as a parameter (tests run it on `ScriptedModel`); the
 * command is built by `makeCommand` from a function choosing the model layer.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Clock, type Config, Effect, FileSystem, Layer, Option, Result, Schema, Stream } from "effect"
import type { SqlError } from "effect/sql"
import { resolve } from "node:path"
import { Argument, Command, Flag } from "effect/cli"
import type { InvalidOptions } from "../../core/AgentError.js"
import * as ActorLoop from "../../rollouts/ActorLoop.js"
import * as Durable from "../../rollouts/Durable.js"
import * as Reward from "../../rollouts/Reward.js"
import type * as Model from "../../core/Model.js"
import * as StateStore from "../../environment/StateStore.js"
import * as TrajectoryStore from "../../environment/TrajectoryStore.js"
import * as Vllm from "../../providers/Vllm.js"
import { durableFlag, storeFailureAsError, storeOf } from "./durable.js"
import { requireNoFailures } from "./failure.js"
import { rewardOfSpecs } from "./rewardFlag.js"
import { commandSandbox } from "./sandbox.js"
import { type Output, stdoutOutput } from "./output.js"
import { inShard, parseShard, type Shard, shardProblem } from "./shard.js"

/** The tasks file could not be read, or no task in it could run (the command's non-zero exit). */
export class ActorLoopFailed extends Schema.TaggedError<ActorLoopFailed>()("ActorLoopFailed", {
  path: Schema.String,
  message: Schema.String
}) {}

/** A line of the tasks file that was skipped. */
export interface Issue {
  readonly line: number
  readonly message: string
}

/**
 * Reads a tasks file: every non-blank line decoded as a task; a malformed one becomes an issue, as does one that
 * `check` refuses (a task that decodes but cannot run with the run's settings).
 */
export const readTasks = (
  path: string,
  check: (task: ActorLoop.Task) => string | undefined = () => undefined
): Effect.Effect<{ readonly tasks: ReadonlyArray<ActorLoop.Task>; readonly issues: ReadonlyArray<Issue> }, ActorLoopFailed, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(path).pipe(
      Effect.mapError((error) => new ActorLoopFailed({ path, message: `cannot read the tasks file: ${error.message}` }))
    )
    const tasks: Array<ActorLoop.Task> = []
    const issues: Array<Issue> = []
    const lines = text.split("\n")
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!
      if (line.trim() === "") continue
      const decoded = ActorLoop.decodeTaskLine(line)
      const problem = Result.isFailure(decoded) ? decoded.failure : check(decoded.success)
      if (problem !== undefined) issues.push({ line: i + 1, message: problem })
      else if (Result.isSuccess(decoded)) tasks.push(decoded.success)
    }
    return { tasks, issues }
  })


/** What a run did. */
export interface Summary {
  readonly total: number
  /** Episodes run: `total` times the group size. */
  readonly episodes: number
  readonly recorded: number
  readonly failed: number
  readonly skippedLines: number
  readonly sandboxFailed: number
  readonly parseErrors: number
  readonly elapsedMs: number
}

/** Settings of a run: one episode per task (one step unless `maxSteps`), or `group` of them. */
export interface Settings extends ActorLoop.RunOptions {
  readonly concurrency: number
}

const seconds = (ms: number): string => (ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`)

const oneLine = (text: string, max = 120): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`
}

/** `12/40 done · 1 failed · 2.30 tasks/s · ETA 12 s` */
export const progressLine = (done: number, total: number, failed: number, elapsedMs: number): string => {
  const rate = elapsedMs > 0 ? (done * 1000) / elapsedMs : 0
  const left = total - done
  const eta = left === 0 ? "0 s" : rate > 0 ? seconds((left / rate) * 1000) : "?"
  return `${done}/${total} done · ${failed} failed · ${rate.toFixed(2)} tasks/s · ETA ${eta}`
}

/** The summary lines. */
export const summaryLines = (summary: Summary): Array<string> => [
  `actor-loop: ${summary.total} tasks${summary.episodes !== summary.total ? ` (${summary.episodes} episodes)` : ""} · ${summary.recorded} recorded · ${summary.failed} failed · ` +
  `${summary.skippedLines} malformed line${summary.skippedLines === 1 ? "" : "s"} skipped · ` +
  `sandbox failed in ${summary.sandboxFailed} · parse errors in ${summary.parseErrors} · ${seconds(summary.elapsedMs)}`
]

/** ` (shard 2/8)` after a count of tasks, or nothing. */
export const shardNote = (shard: Shard | undefined): string => shard === undefined ? "" : ` (shard ${shard.index}/${shard.count})`

/** The tasks of a file that can run, with the skipped lines reported; `total` counts episodes (tasks × group). */
export interface Prepared {
  readonly tasks: ReadonlyArray<ActorLoop.Task>
  readonly issues: ReadonlyArray<Issue>
  readonly total: number
}

/**
 * Reads the tasks file and reports each skipped line (`skipped <path>:<line>: <why>`) to `output`; with `shard`,
 * keeps the shard's tasks only (`--shard i/n`). Fails with `ActorLoopFailed` when no line is a task. A shard with no
 * task is not a failure: the file's tasks went to the other shards.
 */
export const prepareTasks = (
  path: string,
  settings: Settings,
  output: Output,
  shard?: Shard | undefined
): Effect.Effect<Prepared, ActorLoopFailed, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    // A seed too large for the run's rollouts is the line's fault: skipped with its number, as a malformed line.
    const read = yield* readTasks(path, (task) => ActorLoop.taskProblem(task, settings))
    const { issues } = read
    for (const issue of issues) yield* output.line(`skipped ${path}:${issue.line}: ${oneLine(issue.message, 200)}`)
    if (read.tasks.length === 0) {
      return yield* new ActorLoopFailed({
        path,
        message: `no task could run: ${path} has no valid task line (${issues.length} malformed)`
      })
    }
    const tasks = shard === undefined ? read.tasks : read.tasks.filter((task) => inShard(shard, task.taskId))
    // Each rollout of a group is an outcome of its own.
    return { tasks, issues, total: tasks.length * (settings.group ?? 1) }
  })

/**
 * Runs `tasks` with the services of `layer` (or, with `durable`, as durable workflows — a step, or with `maxSteps` /
 * `group` an episode, per workflow: on SQLite run here on `layer`, on PostgreSQL by the runners) and hands every
 * outcome to `onOutcome` as it finishes.
 */
export const runOutcomes = <E>(
  path: string,
  tasks: ReadonlyArray<ActorLoop.Task>,
  settings: Settings,
  layer: Layer.Layer<ActorLoop.Requirements, E>,
  onOutcome: (outcome: ActorLoop.Outcome) => Effect.Effect<void>,
  durable?: string | undefined
): Effect.Effect<void, InvalidOptions | E | Durable.DurableStoreError | Config.ConfigError | SqlError.SqlError> =>
  Effect.gen(function*() {
    if (durable === undefined) {
      return yield* ActorLoop.run(Stream.fromIterable(tasks), settings).pipe(Stream.runForEach(onOutcome), Effect.provide(layer))
    }
    // The loop's key is the tasks file: run it again on the same store and the steps and episodes done answer their
    // outcome, an episode cut short goes on from its stored steps.
    const steps = Durable.actorLoop(Stream.fromIterable(tasks), { ...settings, loop: resolve(path) }).pipe(Stream.runForEach(onOutcome))
    const store = storeOf(durable)
    if (store._tag === "Postgres") return yield* Effect.provide(steps, Durable.layerPostgresClient({ url: store.url }))
    yield* Effect.provide(
      steps,
      Durable.layerActorLoop.pipe(Layer.provideMerge(Durable.layerSqlite(store.file)), Layer.provide(layer))
    ).pipe(storeFailureAsError)
  })

/**
 * Runs every task of the file at `path` with the services of `layer`, reporting to `output`; with `durable` (a SQLite
 * file or a postgres:// URL), every step (or episode) is a durable workflow (on SQLite run here on `layer`; on
 * PostgreSQL by the runners). Fails with `ActorLoopFailed` when the file cannot be read or when no task could run,
 * with `InvalidOptions` when a setting is out of range (`--timeout-ms 0`).
 */
export const runTasksFile = <E>(
  path: string,
  settings: Settings,
  layer: Layer.Layer<ActorLoop.Requirements, E>,
  output: Output,
  durable?: string | undefined,
  shard?: Shard | undefined
): Effect.Effect<
  Summary,
  ActorLoopFailed | InvalidOptions | E | Durable.DurableStoreError | Config.ConfigError | SqlError.SqlError,
  FileSystem.FileSystem
> =>
  Effect.gen(function*() {
    const { issues, tasks, total } = yield* prepareTasks(path, settings, output, shard)
    yield* output.line(
      `actor-loop: ${tasks.length} tasks from ${path}${shardNote(shard)}` +
        `${settings.group !== undefined ? `, ${settings.group} rollouts each` : ""}` +
        `${(settings.maxSteps ?? 1) > 1 ? `, up to ${settings.maxSteps} steps` : ""}, ${settings.concurrency} at a time`
    )
    const startedAt = yield* Clock.currentTimeMillis
    let done = 0
    let recorded = 0
    let failed = 0
    let sandboxFailed = 0
    let parseErrors = 0
    let firstError: string | undefined
    const onOutcome = (outcome: ActorLoop.Outcome) =>
      Effect.gen(function*() {
        done++
        const elapsed = (yield* Clock.currentTimeMillis) - startedAt
        if (outcome._tag === "Failed") {
          failed++
          const message = `${outcome.error._tag}: ${oneLine(outcome.error.message, 200)}`
          firstError ??= message
          yield* output.line(`[${done}/${total}] ${outcome.task.taskId} FAILED: ${message}`)
        } else {
          recorded++
          const record = outcome.record
          if (record.metrics.sandboxFailed) sandboxFailed++
          if (record.modelOutput.parseError !== null) parseErrors++
          if (!output.tty) {
            const sandbox = record.sandboxResult === null
              ? record.metrics.sandboxError !== undefined ? `sandbox error (${oneLine(record.metrics.sandboxError, 80)})` : "no action"
              : `exit ${record.sandboxResult.exitCode}${record.sandboxResult.timedOut ? " (timed out)" : ""}` +
                `${(record.sandboxResult.changedFiles?.length ?? 0) > 0 ? `, ${record.sandboxResult.changedFiles!.length} files changed` : ""}`
            yield* output.line(
              `[${done}/${total}] ${record.taskId} step ${record.step}: ${sandbox} · ` +
                `${record.episodeEnd !== undefined && (settings.maxSteps ?? 1) > 1 ? `${record.episodeStep} steps (${record.episodeEnd}) · ` : ""}` +
                `${record.modelOutput.parseError ?? "parsed"} · model ${record.metrics.actorLatencySec.toFixed(2)} s`
            )
          }
        }
        if (output.tty) yield* output.status(progressLine(done, total, failed, elapsed))
      })
    yield* runOutcomes(path, tasks, settings, layer, onOutcome, durable)
    const summary: Summary = {
      total: tasks.length,
      episodes: total,
      recorded,
      failed,
      skippedLines: issues.length,
      sandboxFailed,
      parseErrors,
      elapsedMs: (yield* Clock.currentTimeMillis) - startedAt
    }
    for (const line of summaryLines(summary)) yield* output.line(line)
    // A shard may hold no task of the file (they hashed to the other shards): nothing failed.
    if (recorded === 0 && tasks.length > 0) {
      return yield* new ActorLoopFailed({ path, message: `no task could run: all ${tasks.length} failed (first: ${firstError})` })
    }
    return summary
  })

// ---------------------------------------------------------------------------------------------------------
// The command
// ---------------------------------------------------------------------------------------------------------

const optionalText = (name: string, description: string) => Flag.String(name).pipe(Flag.withDescription(description), Flag.optional)

/** The command's flags. */
export const flags = {
  actorName: optionalText("actor-name", "Send every step to this actor of the pool (default: route across healthy actors)."),
  config: Flag.String("config").pipe(
    Flag.withDescription(
      `The vLLM actor pool file (default ${Vllm.defaultConfigPath}; a missing file means one actor at http://127.0.0.1:8000).`
    ),
    Flag.withDefault(Vllm.defaultConfigPath)
  ),
  concurrency: Flag.Int("concurrency").pipe(Flag.filter((n) => n >= 1, () => "an integer >= 1"), Flag.withDescription("Tasks in flight at once (default 4)."), Flag.withDefault(4)),
  stateDb: Flag.String("state-db").pipe(
    Flag.withDescription(`The SQLite file of task states (default ${StateStore.defaultFilename}).`),
    Flag.withDefault(StateStore.defaultFilename)
  ),
  trajectories: Flag.String("trajectories").pipe(
    Flag.withDescription(`Where trajectories go: <dir>/raw/<task_id>.jsonl (default ${TrajectoryStore.defaultRoot}).`),
    Flag.withDefault(TrajectoryStore.defaultRoot)
  ),
  workRoot: optionalText("work-root", "Where sandbox workspaces are made (default: VALET_SANDBOX_ROOT, else the OS temp dir)."),
  keepWorkspaces: Flag.Boolean("keep-workspaces").pipe(
    Flag.withDescription("Keep one workspace per task across steps (edits of earlier steps stay)."),
    Flag.withDefault(false)
  ),
  timeoutMs: Flag.Int("timeout-ms").pipe(
    Flag.filter((n) => n >= 1, () => "an integer >= 1"),
    Flag.withDescription("Timeout of a sandboxed command when the task sets none (default 30000)."),
    Flag.optional
  ),
  chat: Flag.Boolean("chat").pipe(
    Flag.withDescription("Send prompts as chat messages instead of raw completions."),
    Flag.withDefault(false)
  ),
  maxSteps: Flag.Int("max-steps").pipe(
    Flag.filter((n) => n >= 1, () => "an integer >= 1"),
    Flag.withDescription("Steps of a task's episode at most; it ends sooner when the model answers <done/> (default: one step, no episode fields)."),
    Flag.optional
  ),
  group: Flag.Int("group").pipe(
    Flag.filter((n) => n >= 1, () => "an integer >= 1"),
    Flag.withDescription("Rollouts of each task, with distinct seeds and one group_id (for GRPO); each its own state and workspace."),
    Flag.optional
  ),
  reward: Flag.String("reward").pipe(
    Flag.atLeast(0),
    Flag.withDescription(
      "Score each step (repeatable: a weighted sum): [<weight>*]<kind>[:<argument>] with kind exit-code:<command>, " +
        "tests-pass:<command>, ast-grep:<language>:<pattern>, ast-grep-none:<language>:<pattern>, exact-answer, " +
        "normalized-answer or judged:<rubric> (e.g. --reward '0.8*tests-pass:pytest -q' --reward 0.2*normalized-answer)."
    )
  ),
  rewardThreshold: Flag.Finite("reward-threshold").pipe(
    Flag.withDescription("End an episode at the first step whose reward is at least this (with --reward)."),
    Flag.optional
  ),
  aggregate: Flag.Literals("aggregate", ["sum", "mean", "last"]).pipe(
    Flag.withDescription("How an episode's reward is made of its steps' rewards (default sum)."),
    Flag.optional
  ),
  shard: Flag.String("shard").pipe(
    Flag.filterMap(parseShard, shardProblem),
    Flag.withDescription(
      "Run only shard i of n of the tasks file (i/n, e.g. 0/4): the tasks whose task_id hashes to i, so that n " +
        "processes or machines given 0/n … (n-1)/n run each task once between them."
    ),
    Flag.optional
  )
}

/** The parsed flags. */
export interface FlagValues {
  readonly actorName: Option.Option<string>
  readonly config: string
  readonly concurrency: number
  readonly stateDb: string
  readonly trajectories: string
  readonly workRoot: Option.Option<string>
  readonly keepWorkspaces: boolean
  readonly timeoutMs: Option.Option<number>
  readonly chat: boolean
  readonly maxSteps: Option.Option<number>
  readonly group: Option.Option<number>
  readonly reward: ReadonlyArray<string>
  readonly rewardThreshold: Option.Option<number>
  readonly aggregate: Option.Option<Reward.Aggregate>
  readonly shard: Option.Option<Shard>
}

/** The model of the real command: the vLLM pool of `--config`, one actor when `--actor-name` is given. */
export const vllmModel = (values: FlagValues): Layer.Layer<Model.Model, Vllm.VllmError> =>
  Vllm.layerNode({ configPath: values.config, ...(Option.isSome(values.actorName) ? { actorName: values.actorName.value } : {}) })

/**
 * The services of a run: the given model, the process sandbox, SQLite state, JSONL trajectories, and the reward of
 * `--reward` when there is one; its judge asks `judge`, by default the same model.
 */
export const layersFor = <E>(
  values: FlagValues,
  model: Layer.Layer<Model.Model, E>,
  reward?: Reward.Reward<Model.Model> | undefined,
  judge: Layer.Layer<Model.Model, E> = model
) => {
  const services = Layer.mergeAll(
    model,
    commandSandbox(Option.isSome(values.workRoot) ? { workRoot: values.workRoot.value } : {}),
    StateStore.layerSqlite({ filename: values.stateDb }),
    TrajectoryStore.layerFile({ root: values.trajectories }).pipe(Layer.provide(NodeFileSystem.layer))
  )
  // By default the same `model` value: the layer is built once, for the actor and the judge.
  const rewardLayer: Layer.Layer<never, E> = reward === undefined ? Layer.empty : Reward.layer(reward).pipe(Layer.provide(judge))
  return Layer.merge(services, rewardLayer)
}

/** The settings of the flags (what `ActorLoop.run` is given). */
export const settingsOf = (values: FlagValues): Settings => ({
  concurrency: values.concurrency,
  keepWorkspaces: values.keepWorkspaces,
  chat: values.chat,
  ...(Option.isSome(values.maxSteps) ? { maxSteps: values.maxSteps.value } : {}),
  ...(Option.isSome(values.group) ? { group: values.group.value } : {}),
  ...(Option.isSome(values.timeoutMs) ? { sandboxTimeoutMs: values.timeoutMs.value } : {}),
  ...(Option.isSome(values.rewardThreshold) ? { rewardThreshold: values.rewardThreshold.value } : {}),
  ...(Option.isSome(values.aggregate) ? { aggregate: values.aggregate.value } : {})
})

/** What `valet actor-loop` and `valet rollout` take: the tasks file, the flags and `--durable`. */
export const commandArguments = {
  tasks: Argument.File("tasks.jsonl", { mustExist: true }).pipe(Argument.withDescription("The tasks, one JSON object a line.")),
  ...flags,
  durable: durableFlag
}

/** `valet actor-loop`, with the model layer chosen by `modelFor` (the vLLM pool for the real command). */
export const makeCommand = <E>(modelFor: (values: FlagValues) => Layer.Layer<Model.Model, E>, output: () => Output = stdoutOutput) =>
  Command.make(
    "actor-loop",
    {
      ...commandArguments
    },
    ({ durable, tasks, ...values }) =>
      Effect.flatMap(rewardOfSpecs(values.reward), (reward) =>
        runTasksFile(
          tasks,
          settingsOf(values),
          layersFor(values, modelFor(values), reward),
          output(),
          Option.getOrUndefined(durable),
          Option.getOrUndefined(values.shard)
        ))
        .pipe(Effect.flatMap((summary) => requireNoFailures(summary.failed, summary.episodes, summary.episodes !== summary.total ? "episodes" : "tasks")))
  ).pipe(
    Command.withDescription(
      "Runs an RL actor-loop episode (one step, or up to --max-steps; --group n rollouts) per task of a JSONL file ({task_id, prompt, workspace_files?, stop?, temperature?, " +
        "seed?, max_tokens?, timeout_ms?}): prompt with the task's state, the model's action run in a sandbox, the " +
        "state update saved, one trajectory line a step appended to <trajectories>/raw/<task_id>.jsonl."
    )
  )

/** `valet actor-loop` on the vLLM actor pool. */
export const actorLoopCommand = makeCommand(vllmModel)

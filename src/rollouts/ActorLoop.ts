/**
 * The RL actor loop (DESIGN §5.3). One `step(task)`:
 * 1. loads the task's state and renders it; the prompt becomes `<prompt>\n\n<state>\n<rendered>\n</state>` (just
 *    the prompt when the state is empty);
 * 2. calls the model in context (a vLLM actor chosen by name, or routed), timing it;
 * 3. reads `<think>`, `<action>` (JSON with `command`) and `<state_update>` (JSON); a block that does not parse
 *    sets `parse_error` (`invalid_action_json` / `invalid_state_update_json`), never a failure; a closing tag
 *    missing at the very end is accepted;
 * 4. runs the action's command through the `Sandbox`, in a workspace seeded with `workspace_files`;
 * 5. merges the state update into the stored state (atomically);
 * 6. scores the step with the `Reward.CurrentReward` in context, if any (its commands run in the step's workspace,
 *    after the action), and appends the trajectory record (`sandbox_failed` when no action ran or its exit code was
 *    not 0; `reward` and `reward_parts` the score, `reward: null` without a reward), with the answer's token ids and
 *    log-probabilities packed in `tokens` when the server sent any (`Vllm` with `tokens: true`; DESIGN §18).
 *
 * A step is an agent run: `step` answers the record, `stream` streams the run's `AgentEvent`s (`RunStarted`,
 * `ModelCalled`, `ModelReplied`, `Progress` events `actor_loop.parsed`, `.sandbox_ran`, `.state_saved`,
 * `.rewarded` (with a reward), `.recorded`, then `RunCompleted` whose metadata holds the record as written).
 * Model calls go through `Architecture.generate`, so budgets apply and `Journal` records and replays them. `run`
 * steps a stream of tasks with a concurrency bound; a failed task is an outcome, not the end of the run.
 *
 * Episodes and groups (DESIGN §18): `episode` steps a task until the model writes an empty `<done/>` (or
 * `<done></done>`) outside its `<think>`, `<action>` and `<state_update>` blocks, a step's reward reaches
 * `rewardThreshold` (a reward with a failed part never does), or `maxSteps`. Its state carries from step to step, and
 * its steps share one workspace, opened when first needed and removed when the episode ends (kept for the task's
 * next episode with `keepWorkspaces`). Each step after the first is shown what the previous step's action did, at
 * the end of its prompt:
 *
 * ```
 * <observation>
 * exit_code: 1
 * stdout:
 * <at most 2,000 characters, then "[truncated: N more characters]">
 * stderr:
 * <the same>
 * </observation>
 * ```
 *
 * (`exit_code: <code>, timed out` when stopped; `error: <reason>: <message>` when the sandbox could not run it;
 * `no command ran`, with `(parse_error: invalid_action_json)` when the `<action>` did not parse). Every record of
 * an episode has `episode_id` and `episode_step` (from 1; `step` still counts the task's records), `seed` when the
 * request had one, and the last one `episode_end` (`done` / `reward` / `max_steps`) and `episode_reward` — on the
 * last line, so a trainer reading the JSONL in order needs no summary line. An episode whose lines have no
 * `episode_end` did not finish (its run failed or was stopped: its `Failed` outcome names its `episodeId`): a
 * trainer drops its lines.
 *
 * Seeds: an episode's step `s` has the task's `seed + s - 1` (none without a task seed); `group` runs `n` episodes
 * (n = 1 too) with one `group_id`, rollout `i`'s step `s` seeded `base + (s - 1) × n + i` (`base` the task's seed or
 * a drawn one), so no two requests of a group are alike. A seed whose last would pass `Number.MAX_SAFE_INTEGER` is
 * refused (`InvalidOptions` naming `seed`) before any step. A group's rollout starts from an empty state held in a
 * store of its own and a workspace of its own, both gone when its episode ends: the task's stored state and any
 * other task's are never touched. When the model in context can answer `n` samples in one request
 * (`Model.Service.choicesPerRequest`: `Vllm`), a group's first steps — alike but for their seeds — are one request
 * with `n` and the group's first seed, rollout `i` taking choice `i` (each first record's `seed` is that request's;
 * its `output_tokens` the choice's own, or an even share when the server sent no token ids); every later step is a
 * request of its own. `run` does either with
 * `maxSteps` / `group`, and without them one step per task as before (byte for byte: no observation, the task's
 * seed).
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { ScriptedModel } from "valet"
 * import * as ActorLoop from "valet/ActorLoop"
 * import * as Sandbox from "valet/Sandbox"
 * import * as StateStore from "valet/StateStore"
 * import * as TrajectoryStore from "valet/TrajectoryStore"
 *
 * // The model's reply: a command for the sandbox, and what to remember for the next step.
 * const reply = `<think>Run the tests first.</think>
 * <action>{"command": ["pytest", "-q"]}</action>
 * <state_update>{"history": ["ran the tests"], "next_focus": "fix the failing test"}</state_update>`
 *
 * // Every service scripted or in memory; a trainer uses `Vllm`, `Sandbox.layerProcess` and the SQLite / file stores.
 * const services = Layer.mergeAll(
 *   ScriptedModel.layer([reply]),
 *   Sandbox.layerTest(() => ({ exitCode: 1, stdout: "1 failed, 3 passed" }), { allow: ["pytest"] }),
 *   StateStore.layerMemory(),
 *   TrajectoryStore.layerMemory
 * )
 *
 * // One step: the record appended (prompt, model output, sandbox result, state before and after, timings).
 * const record = ActorLoop.step({ taskId: "fix-sort", prompt: "Make the tests pass." }).pipe(Effect.provide(services))
 * ```
 *
 * @since 0.1.0
 */
import { Effect, Option, Result, Scheduler, Schema, Stream } from "effect"
import { randomUUID } from "node:crypto"
import * as Agent from "../core/Agent.js"
import type { AgentError, InvalidOptions } from "../core/AgentError.js"
import type * as AgentEvent from "../core/AgentEvent.js"
import * as Budget from "../core/Budget.js"
import * as Opts from "../core/internal/options.js"
import type * as Model from "../core/Model.js"
import * as episodeInternal from "./internal/episode.js"
import * as Pacing from "./internal/pacing.js"
import * as Step from "./internal/step.js"
import * as TaskInternal from "./internal/task.js"
import * as Reward from "./Reward.js"
import * as TrajectoryStore from "../environment/TrajectoryStore.js"

/**
 * The architecture's name, as `RunStarted.architecture` reports it.
 *
 * @since 0.1.0
 * @category constants
 */
export const name = Step.name

/**
 * A task: `task_id` (a safe file name), `prompt`, and optionally `workspace_files` (relative path → content),
 * `stop`, `temperature` (default 0.1), `seed`, `max_tokens`, `timeout_ms` (of the sandboxed command), `reference`
 * (the answer the answer rewards compare with). Snake case
 * when encoded, as in the tasks JSONL.
 *
 * @since 0.1.0
 * @category models
 */
export const Task = TaskInternal.Task
/**
 * A task.
 *
 * @since 0.1.0
 * @category models
 */
export type Task = TaskInternal.Task

/**
 * The default sampling temperature of a step.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultTemperature = Step.defaultTemperature

/**
 * Options of a step.
 *
 * @since 0.1.0
 * @category options
 */
export interface Options extends Step.Options {}

/**
 * Options of `stream`.
 *
 * @since 0.1.0
 * @category options
 */
export interface StreamOptions extends Options {
  /** Stream the model's text as `TextDelta` events (default true). */
  readonly textDeltas?: boolean | undefined
}

/**
 * The services a step needs.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements = Step.Requirements

const stepFields = {
  keepWorkspaces: Schema.optional(Schema.Boolean),
  sandboxTimeoutMs: Schema.optional(Opts.IntAtLeast(1)),
  chat: Schema.optional(Schema.Boolean),
  system: Schema.optional(Schema.String),
  budget: Schema.optional(Budget.Limits),
  sessionId: Schema.optional(Agent.SessionId)
}
const OptionsSchema = Schema.Struct(stepFields)
const StreamOptionsSchema = Schema.Struct({ ...stepFields, textDeltas: Schema.optional(Schema.Boolean) })
const { sessionId: _, ...runFields } = stepFields

/**
 * Runs one step of a task and answers the trajectory record it appended. A model output that does not parse is
 * recorded (`parse_error`), never a failure; the model's own errors, and the stores', fail the step; options it
 * cannot work with (`sandboxTimeoutMs: 0`, an unknown key) fail it with `InvalidOptions` before anything runs.
 *
 * @since 0.1.0
 * @category running
 */
export const step = (task: Task, options: Options = {}): Effect.Effect<TrajectoryStore.TrajectoryRecord, AgentError, Requirements> =>
  Effect.flatMap(Opts.decode("ActorLoop", OptionsSchema, options), (checked) => Step.stepChecked(task, checked))

/**
 * Runs one step of a task and streams its events; `RunCompleted.result.metadata.record` is the record written.
 *
 * @since 0.1.0
 * @category running
 */
export const stream = (task: Task, options: StreamOptions = {}): Stream.Stream<AgentEvent.AgentEvent, AgentError, Requirements> =>
  Stream.unwrap(Effect.map(Opts.decode("ActorLoop", StreamOptionsSchema, options), (checked) =>
    Agent.stream(Step.agentFor(task, checked, () => undefined), task.prompt, {
      ...(checked.budget !== undefined ? { budget: checked.budget } : {}),
      ...(checked.sessionId !== undefined ? { sessionId: checked.sessionId } : {}),
      ...(checked.textDeltas !== undefined ? { textDeltas: checked.textDeltas } : {})
    })))

/**
 * Why an episode ended: the model said `<done/>`, a step's reward reached `rewardThreshold`, or it took `maxSteps`
 * steps.
 *
 * @since 0.2.0
 * @category models
 */
export type EpisodeEnd = episodeInternal.End

/**
 * Options of an episode: a step's, plus when it ends. Each step has a session of its own.
 *
 * @since 0.2.0
 * @category options
 */
export interface EpisodeOptions extends Omit<Options, "sessionId"> {
  /** Steps at most (≥ 1, default 1). */
  readonly maxSteps?: number | undefined
  /**
   * End the episode at the first step whose reward (with a `Reward.CurrentReward`) is at least this; a reward with
   * a failed part never ends it.
   */
  readonly rewardThreshold?: number | undefined
  /** How the episode's reward sums its steps' (`Reward.episode`; default `"sum"`). */
  readonly aggregate?: Reward.Aggregate | undefined
}

/**
 * An episode as run: its steps' records in order (the last one carries `episodeEnd` and `episodeReward`), why it
 * ended, and its reward (`Reward.episode`) when a `Reward.CurrentReward` scored it. `seed` is its first step's.
 *
 * @since 0.2.0
 * @category models
 */
export interface Episode {
  readonly episodeId: string
  readonly groupId?: string | undefined
  readonly seed?: number | undefined
  readonly records: ReadonlyArray<TrajectoryStore.TrajectoryRecord>
  readonly end: EpisodeEnd
  readonly reward?: Reward.Scored | undefined
}

const stepOptionsOf = ({ aggregate: _a, maxSteps: _m, rewardThreshold: _r, ...step }: EpisodeOptions): Options => step

/** An episode of a rollout, with options already checked and its id chosen (a failed one's outcome names it). */
const episodeChecked = (
  task: Task,
  options: EpisodeOptions,
  member: episodeInternal.Member,
  episodeId: string
): Effect.Effect<Episode, AgentError, Requirements> =>
  Effect.gen(function*() {
    const stepOptions = stepOptionsOf(options)
    const ran = yield* episodeInternal.run(
      (context) => Step.stepChecked(task, stepOptions, context),
      task.workspaceFiles ?? {},
      member,
      episodeId,
      {
        maxSteps: options.maxSteps ?? 1,
        rewardThreshold: options.rewardThreshold,
        aggregate: options.aggregate ?? "sum",
        keepWorkspace: options.keepWorkspaces === true
      }
    )
    return {
      episodeId,
      ...(member.groupId !== undefined ? { groupId: member.groupId } : {}),
      ...(member.seed !== undefined ? { seed: member.seed } : {}),
      records: ran.records,
      end: ran.end,
      ...(ran.reward !== undefined ? { reward: ran.reward } : {})
    }
  }).pipe(Effect.withSpan("valet/ActorLoop.episode", { attributes: { taskId: task.taskId } }, { captureStackTrace: false }))

const episodeFields = {
  ...runFields,
  maxSteps: Schema.optional(Opts.IntAtLeast(1)),
  rewardThreshold: Schema.optional(Schema.Finite),
  aggregate: Schema.optional(Schema.Literals(["sum", "mean", "last"]))
}
const EpisodeOptionsSchema = Schema.Struct(episodeFields)

/**
 * Runs a task step after step, in one state and one workspace (opened when a step first needs it, removed at the
 * end unless `keepWorkspaces`), until the model says it is done (an empty `<done/>` outside its blocks), a step's
 * reward reaches `rewardThreshold`, or `maxSteps` steps were taken. Each step after the first is shown what the
 * previous one's action did (`<observation>`, see the module doc) and, when the task has a `seed`, has a seed of its
 * own (`seed + step - 1`). Each step appends its record as `step` does, with the episode's id and the step's place
 * in it; the last also says why the episode ended and its reward. The episode continues from the task's stored
 * state. A seed whose steps would pass `Number.MAX_SAFE_INTEGER` fails with `InvalidOptions` before any step.
 *
 * @since 0.2.0
 * @category running
 */
export const episode = (task: Task, options: EpisodeOptions = {}): Effect.Effect<Episode, AgentError, Requirements> =>
  Effect.gen(function*() {
    const checked = yield* Opts.decode("ActorLoop", EpisodeOptionsSchema, options)
    // A rollout given from outside (a durable episode's member, its seeds checked for its group) runs as given.
    const given = yield* episodeInternal.Given
    if (Option.isSome(given)) return yield* episodeChecked(task, checked, given.value.member, given.value.episodeId)
    yield* episodeInternal.checkSeed(task.seed, 1, checked.maxSteps ?? 1)
    return yield* episodeChecked(task, checked, episodeInternal.loneMember(task.taskId, task.seed), randomUUID())
  })

/**
 * Options of a group.
 *
 * @since 0.2.0
 * @category options
 */
export interface GroupOptions extends EpisodeOptions {
  /** Rollouts of the task (≥ 1). */
  readonly n: number
  /** Rollouts in flight at once (≥ 1, default 1). */
  readonly concurrency?: number | undefined
}

const GroupOptionsSchema = Schema.Struct({
  ...episodeFields,
  n: Opts.IntAtLeast(1),
  concurrency: Schema.optional(Opts.IntAtLeast(1))
})

/**
 * Runs `n` episodes of a task (n = 1 included), all with one `groupId`: what a group-relative advantage (GRPO)
 * compares. Each rollout starts from an empty state kept in a store of its own and a fresh workspace, both dropped
 * when its episode ends (`keepWorkspaces` does not apply): the task's stored state and workspace are not touched.
 * Seeds: rollout `i`'s step `s` has `base + (s - 1) × n + i`, `base` the task's `seed` or a drawn one, so no two
 * requests of a group are alike; a `seed` whose last would pass `Number.MAX_SAFE_INTEGER` fails with
 * `InvalidOptions` before any step. With a model that serves `n` choices in one request (vLLM), the first steps
 * are one request with `n` and seed `base` instead (see the module doc).
 *
 * @since 0.2.0
 * @category running
 */
export const group = (task: Task, options: GroupOptions): Effect.Effect<ReadonlyArray<Episode>, AgentError, Requirements> =>
  Effect.gen(function*() {
    const { concurrency, n, ...checked } = yield* Opts.decode("ActorLoop", GroupOptionsSchema, options)
    const members = yield* episodeInternal.membersOf(task.seed, n, checked.maxSteps ?? 1)
    return yield* Effect.forEach(members, (member) => episodeChecked(task, checked, member, randomUUID()), {
      concurrency: concurrency ?? 1
    })
  })

/**
 * How one episode of `run` ended. A `Failed` episode of `run` with `maxSteps` or `group` names its `episodeId` (and
 * `groupId`): the lines its steps already wrote have no `episode_end`, and a trainer drops such an episode's lines.
 *
 * @since 0.1.0
 * @category models
 */
export type Outcome =
  | {
    readonly _tag: "Recorded"
    readonly task: Task
    /** The episode's last record. */
    readonly record: TrajectoryStore.TrajectoryRecord
    /**
     * The episode's reward (`Reward.episode` of its steps' records), when a `Reward.CurrentReward` scored it. Like the
     * records, it counts a step reward's failed part 0: `rewardUnknown(record)` says when that makes it unknown.
     */
    readonly reward?: Reward.Scored | undefined
    /**
     * The episode (from `run` and `Durable.actorLoop` with `maxSteps` or `group`; a lone step's outcome has none).
     *
     * @since 0.2.0
     */
    readonly episode?: Episode | undefined
  }
  | {
    readonly _tag: "Failed"
    readonly task: Task
    readonly error: AgentError
    /**
     * The failed episode's id, as its lines carry it (with `maxSteps` or `group`).
     *
     * @since 0.2.0
     */
    readonly episodeId?: string | undefined
    /**
     * The group of the failed episode (with `group`).
     *
     * @since 0.2.0
     */
    readonly groupId?: string | undefined
  }

/**
 * Options of `run` (each step has a session of its own).
 *
 * @since 0.1.0
 * @category options
 */
export interface RunOptions extends EpisodeOptions {
  /** Episodes in flight at once (≥ 1, default 1). */
  readonly concurrency?: number | undefined
  /**
   * Rollouts of each task (`group`; 1 is a group of one): each its own episode and outcome, all with one `groupId`
   * (default: one episode, no group).
   *
   * @since 0.2.0
   */
  readonly group?: number | undefined
  /**
   * With `concurrency` above 1, the episodes' work runs on one paced scheduler (`pacedScheduler`): this long at
   * most (milliseconds, > 0, default 1) before the event loop reads answers and writes requests again. Only in
   * place of Effect's default scheduler: one the caller provided (TestClock's in `it.effect`) is kept.
   *
   * @since 0.2.0
   */
  readonly sliceMs?: number | undefined
}

const SliceMs = Schema.Finite.check(Schema.makeFilter((n: number) => n > 0, { expected: "a number above 0" }))

const RunOptionsSchema = Schema.Struct({
  ...episodeFields,
  concurrency: Schema.optional(Opts.IntAtLeast(1)),
  group: Schema.optional(Opts.IntAtLeast(1)),
  sliceMs: Schema.optional(SliceMs)
})

/**
 * Options of `pacedScheduler`.
 *
 * @since 0.2.0
 * @category options
 */
export interface PacingOptions {
  /** How long queued work runs before the event loop gets its turn, in milliseconds (> 0, default 1). */
  readonly sliceMs?: number | undefined
}

const PacingOptionsSchema = Schema.Struct({ sliceMs: Schema.optional(SliceMs) })

/**
 * A scheduler for many episodes on one event loop. Effect's default scheduler runs all the fibers' queued work in
 * the loop's next check phase, however long that takes: when hundreds of model answers arrive together, their steps
 * run back to back while no socket is read, no timer fires and no request is written (undici writes on a reused
 * connection only at a check phase). This one queues the fibers' work, first in first out, and runs it `sliceMs` at
 * a time (default 1 ms), letting the loop read answers, fire timers and write requests between slices. `run` uses
 * one per run when its `concurrency` is above 1 (in place of Effect's default scheduler only: one you provided is
 * kept); provide it yourself around episodes you run concurrently another way.
 *
 * Measured with bench/rollout.ts (256 episodes of 30 steps, a server admitting 256 sequences at once, 200 ms each,
 * 2 cores): the event loop's p99 delay 12–15 ms with the default scheduler, 6–7.5 ms with this one; a request's wait
 * between its creation and its write 2.4–2.8 ms, 1.5–1.8 ms; the server's saturation about the same (0.87–0.93).
 *
 * @example
 * ```ts
 * import { Effect, Scheduler } from "effect"
 * import * as ActorLoop from "valet/ActorLoop"
 *
 * const tasks: ReadonlyArray<ActorLoop.Task> = [{ taskId: "t1", prompt: "Make the tests pass." }]
 *
 * // 64 episodes at a time, their work paced on one queue.
 * const episodes = Effect.forEach(tasks, (task) => ActorLoop.episode(task, { maxSteps: 6 }), { concurrency: 64 }).pipe(
 *   Effect.provideServiceEffect(Scheduler.Scheduler, ActorLoop.pacedScheduler({ sliceMs: 1 }))
 * )
 * ```
 *
 * @since 0.2.0
 * @category scheduling
 */
export const pacedScheduler = (
  options: PacingOptions = {}
): Effect.Effect<Scheduler.Scheduler, InvalidOptions> =>
  Effect.map(Opts.decode("ActorLoop.pacedScheduler", PacingOptionsSchema, options), ({ sliceMs }) => Pacing.make({ sliceMs }))

/**
 * `pacedScheduler`, the scheduler or the `InvalidOptions` thrown.
 *
 * @since 0.2.0
 * @category scheduling
 */
export const pacedSchedulerUnsafe = (options: PacingOptions = {}): Scheduler.Scheduler => Opts.runUnsafe(pacedScheduler(options))

// Effect's default scheduler is an asynchronous `MixedScheduler` whose turns are Effect's own `setImmediate`, a
// function every such scheduler shares: a `MixedScheduler` given turns of its own (a paced one) is the caller's.
const effectDefaultTurns = new Scheduler.MixedScheduler("async").setImmediate
const isEffectDefault = (scheduler: Scheduler.Scheduler): boolean =>
  scheduler instanceof Scheduler.MixedScheduler && scheduler.executionMode === "async" &&
  scheduler.setImmediate === effectDefaultTurns

/** One episode's outcome; a failure names the episode and group its lines carry. */
const outcomeOf = (task: Task, options: EpisodeOptions, member: episodeInternal.Member): Effect.Effect<Outcome, never, Requirements> =>
  Effect.suspend(() => {
    const episodeId = randomUUID()
    return Effect.match(episodeChecked(task, options, member, episodeId), {
      onFailure: (error): Outcome => ({
        _tag: "Failed",
        task,
        error,
        episodeId,
        ...(member.groupId !== undefined ? { groupId: member.groupId } : {})
      }),
      onSuccess: (episode): Outcome => ({
        _tag: "Recorded",
        task,
        record: episode.records[episode.records.length - 1]!,
        episode,
        ...(episode.reward !== undefined ? { reward: episode.reward } : {})
      })
    })
  })

/**
 * Runs an episode (`episode`) of every task of a stream — or, with `group`, that many rollouts of it (`group`) —
 * `concurrency` episodes at a time, and streams the outcomes as they finish. Without `maxSteps` and `group`, each
 * task is one `step`, its record without episode fields (as `Durable.actorLoop` writes it) and its outcome without
 * `episode`. With a `Reward.CurrentReward` in context, each recorded outcome carries its episode's reward. Invalid
 * options fail the stream with `InvalidOptions` before any task runs; a failed episode is an outcome, not the end
 * of the run (a task whose `seed` is too large for its steps too: `Failed` with `InvalidOptions`).
 *
 * @since 0.1.0
 * @category running
 */
export const run = <E, R>(
  tasks: Stream.Stream<Task, E, R>,
  options: RunOptions = {}
): Stream.Stream<Outcome, E | InvalidOptions, R | Requirements> =>
  Stream.unwrap(Effect.flatMap(Opts.decode("ActorLoop", RunOptionsSchema, options), ({ concurrency, group, sliceMs, ...checked }) =>
    Effect.map(Effect.service(Scheduler.Scheduler), (current) => {
    const maxSteps = checked.maxSteps ?? 1
    const work = (task: Task): Effect.Effect<ReadonlyArray<Effect.Effect<Outcome, never, Requirements>>, never, Model.Model> =>
      // Neither `maxSteps` nor `group`: one step as `step` writes it (and `Durable.actorLoop`), no episode fields.
      checked.maxSteps === undefined && group === undefined
        ? Effect.succeed([
          Effect.match(Step.stepChecked(task, stepOptionsOf(checked)), {
            onFailure: (error): Outcome => ({ _tag: "Failed", task, error }),
            onSuccess: (record): Outcome => ({
              _tag: "Recorded",
              task,
              record,
              ...(record.rewardParts !== undefined ? { reward: Reward.episode([record], checked.aggregate ?? "sum") } : {})
            })
          })
        ])
        : group === undefined
        ? Effect.match(episodeInternal.checkSeed(task.seed, 1, maxSteps), {
          onFailure: (error) => [Effect.succeed<Outcome>({ _tag: "Failed", task, error })],
          onSuccess: () => [outcomeOf(task, checked, episodeInternal.loneMember(task.taskId, task.seed))]
        })
        : Effect.match(episodeInternal.membersOf(task.seed, group, maxSteps), {
          // One outcome per episode the group would have run, so that outcomes count episodes (a progress line's total).
          onFailure: (error) => Array.from({ length: group }, () => Effect.succeed<Outcome>({ _tag: "Failed", task, error })),
          onSuccess: (members) => members.map((member) => outcomeOf(task, checked, member))
        })
    // One paced scheduler for all the run's episodes (see `pacedScheduler`); one at a time has nothing to interleave.
    // Only in place of Effect's own asynchronous scheduler: a scheduler the caller provided is kept (TestClock's,
    // whose `adjust` waits for the work it wakes only when that work runs on it; a synchronous one; a MixedScheduler
    // with turns of its own, such as a paced one the caller made or an outer `run`'s).
    const paced = (concurrency ?? 1) > 1 && isEffectDefault(current)
      ? Pacing.make({ sliceMs })
      : undefined
    return tasks.pipe(
      Stream.mapEffect(work),
      Stream.flatMap((episodes) => Stream.fromIterable(episodes)),
      Stream.mapEffect((episode) => paced === undefined ? episode : Effect.provideService(episode, Scheduler.Scheduler, paced), {
        concurrency: concurrency ?? 1,
        unordered: true
      })
    )
  })))

/**
 * Decodes a task from JSON text (a tasks-file line); a failure says what was wrong, on one line
 * (`task_id is not a safe name: use 1 to 128 letters, digits, ..., got "../x"`, `colour is not a known task field`,
 * `seed must be an integer, got 1.5`), without the line number, which the caller knows.
 *
 * @since 0.1.0
 * @category parsing
 */
export const decodeTaskLine: (line: string) => Result.Result<Task, string> = TaskInternal.decodeLine

/**
 * Whether the reward a record stands for is unknown because a part it counts failed (a check that could not run, a
 * judge that did not answer): an episode's last record (`episodeRewardFailed`), or a lone step whose own parts had one.
 * Such a reward counts the failed part 0, which is not what the episode was worth: leave it out of means and rankings.
 *
 * @since 0.2.0
 * @category rewards
 * @example
 * ```ts
 * import { Effect, Stream } from "effect"
 * import { ActorLoop } from "valet"
 *
 * // The mean of the rewards known, over a run's outcomes.
 * const meanKnown = (outcomes: Stream.Stream<ActorLoop.Outcome>) =>
 *   Stream.runFold(outcomes, () => ({ sum: 0, n: 0 }), (acc, outcome) =>
 *     outcome._tag === "Recorded" && outcome.reward !== undefined && !ActorLoop.rewardUnknown(outcome.record)
 *       ? { sum: acc.sum + outcome.reward.value, n: acc.n + 1 }
 *       : acc).pipe(Effect.map(({ n, sum }) => (n === 0 ? undefined : sum / n)))
 * ```
 */
export const rewardUnknown: (record: TrajectoryStore.TrajectoryRecord) => boolean = episodeInternal.rewardUnknown

/**
 * Why `task` cannot run as `group` rollouts (default 1) of up to `maxSteps` steps (default 1), or `undefined` when it
 * can: its seed is too large, its rollouts would need seeds past `Number.MAX_SAFE_INTEGER`, which JSON and vLLM round
 * (`run` fails those episodes with `InvalidOptions`). For a reader of a tasks file, which skips such a line with its
 * number as it skips a line that does not decode.
 *
 * @since 0.2.0
 * @category parsing
 * @example
 * ```ts
 * import { ActorLoop } from "valet"
 *
 * const task = { taskId: "t1", prompt: "Fix the test.", seed: Number.MAX_SAFE_INTEGER }
 * ActorLoop.taskProblem(task, { group: 8, maxSteps: 6 })
 * // "seed must be at most 9007199254740944 for 8 rollout(s) of 6 step(s) (it uses seed … seed + 47), got 9007199254740991"
 * ```
 */
export const taskProblem = (
  task: Task,
  settings: { readonly group?: number | undefined; readonly maxSteps?: number | undefined }
): string | undefined => episodeInternal.seedProblem(task.seed, settings.group ?? 1, settings.maxSteps ?? 1)

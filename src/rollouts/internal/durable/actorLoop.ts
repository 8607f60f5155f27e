/**
 * The actor loop's durable workflows (`Durable.ActorLoopStep`, `Durable.ActorLoopEpisode`): their payloads and keys,
 * their handlers (`layerActorLoop`), and the client that runs a stream of tasks through them (`actorLoop`). `Durable`
 * re-exports the public names with their documentation; this module imports `ActorLoop`, never `Durable`.
 */
import { Effect, Exit, Layer, Option, Schema, Stream } from "effect"
import { Workflow, type WorkflowEngine } from "effect/workflow"
import { randomUUID } from "node:crypto"
import { AgentError, ArchitectureFailed, type InvalidOptions } from "../../../core/AgentError.js"
import * as Budget from "../../../core/Budget.js"
import * as Opts from "../../../core/internal/options.js"
import * as Model from "../../../core/Model.js"
import * as Sandbox from "../../../environment/Sandbox.js"
import * as StateStore from "../../../environment/StateStore.js"
import * as TrajectoryStore from "../../../environment/TrajectoryStore.js"
import * as ActorLoop from "../../ActorLoop.js"
import * as Reward from "../../Reward.js"
import * as EpisodeInternal from "../episode.js"
import * as Activities from "./activities.js"

/** How an actor-loop step ended (`Durable.StepOutcome`). */
export const StepOutcome = Schema.Union([
  Schema.TaggedStruct("Recorded", { record: TrajectoryStore.TrajectoryRecord }),
  Schema.TaggedStruct("Failed", { error: AgentError })
])
export type StepOutcome = typeof StepOutcome.Type

const StepOptions = Schema.Struct({
  keepWorkspaces: Schema.optional(Schema.Boolean),
  sandboxTimeoutMs: Schema.optional(Opts.IntAtLeast(1)),
  chat: Schema.optional(Schema.Boolean),
  system: Schema.optional(Schema.String),
  budget: Schema.optional(Budget.Limits)
})

/** The workflow of one actor-loop step (`Durable.ActorLoopStep`, documented there). */
export const ActorLoopStep = Workflow.make("valet/ActorLoopStep", {
  payload: { loop: Schema.String, index: Schema.Int, task: ActorLoop.Task, options: StepOptions },
  idempotencyKey: (payload) => `${payload.loop}/${payload.index}/${payload.task.taskId}`,
  success: StepOutcome
})

/** How an actor-loop episode ended (`Durable.EpisodeOutcome`). */
export const EpisodeOutcome = Schema.Union([
  Schema.TaggedStruct("Recorded", {
    episode: Schema.Struct({
      episodeId: Schema.String,
      groupId: Schema.optional(Schema.String),
      seed: Schema.optional(Schema.Int),
      records: Schema.Array(TrajectoryStore.TrajectoryRecord),
      end: Schema.Literals(["done", "reward", "max_steps"]),
      reward: Schema.optional(Reward.Scored)
    })
  }),
  Schema.TaggedStruct("Failed", {
    error: AgentError,
    episodeId: Schema.String,
    groupId: Schema.optional(Schema.String),
    /** The `run` of the payload whose execution failed: a later run of the loop takes the failure as stale. */
    run: Schema.optional(Schema.String)
  })
])
export type EpisodeOutcome = typeof EpisodeOutcome.Type

const EpisodeOptions = Schema.Struct({
  ...StepOptions.fields,
  maxSteps: Schema.optional(Opts.IntAtLeast(1)),
  rewardThreshold: Schema.optional(Schema.Finite),
  aggregate: Schema.optional(Schema.Literals(["sum", "mean", "last"]))
})

/** The key of the task at `index` of loop `loop`: its step's workflow, and its episode's or group's. */
const taskKey = (loop: string, index: number, taskId: string): string => `${loop}/${index}/${taskId}`

/** A value's JSON with its objects' keys sorted: the same text for the same settings, whatever order they came in. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v)

/**
 * The key of a task's episode or group: the task's key and its settings (`<group>x<maxSteps>` and a digest of the
 * other options). Run again with other settings (`--group 4` after `--group 2`, another `--max-steps`), the episodes
 * are new ones — new ids, new seeds — never the stored ones of other settings mixed into one group.
 */
const episodeKeyOf = (payload: {
  readonly loop: string
  readonly index: number
  readonly task: ActorLoop.Task
  readonly group?: number | undefined
  readonly options: typeof EpisodeOptions.Type
}): string =>
  `${taskKey(payload.loop, payload.index, payload.task.taskId)}/${payload.group ?? 1}x${payload.options.maxSteps ?? 1}-${
    EpisodeInternal.uuidOf(canonical({ group: payload.group ?? null, options: payload.options })).slice(0, 8)
  }`

/** The workflow of one actor-loop episode (`Durable.ActorLoopEpisode`, documented there: its key, ids and workspace). */
export const ActorLoopEpisode = Workflow.make("valet/ActorLoopEpisode", {
  payload: {
    loop: Schema.String,
    index: Schema.Int,
    task: ActorLoop.Task,
    group: Schema.optional(Opts.IntAtLeast(1)),
    member: Schema.Int,
    options: EpisodeOptions,
    /**
     * The attempt (from 0): an episode recorded as failed by an earlier run of the loop runs again as the next
     * attempt, a workflow of its own (`#<attempt>` ends its key; its episode id is new, its group and seeds the same).
     */
    attempt: Schema.optional(Schema.Int),
    /** Which run of the loop sent it (not in the key): a failure names it, so a later run knows it as stale. */
    run: Schema.optional(Schema.String)
  },
  idempotencyKey: (payload) =>
    `${episodeKeyOf(payload)}${payload.group === undefined ? "" : `/${payload.member}`}${
      payload.attempt === undefined || payload.attempt === 0 ? "" : `#${payload.attempt}`
    }`,
  success: EpisodeOutcome
})

/** The ids an episode's lines carry, derived from its workflow's payload: the same in every execution. */
const episodeIdsOf = (payload: typeof ActorLoopEpisode.payloadSchema.Type) => {
  const key = episodeKeyOf(payload)
  const attempt = payload.attempt === undefined || payload.attempt === 0 ? "" : `#${payload.attempt}`
  return payload.group === undefined
    ? { groupKey: undefined, episodeId: EpisodeInternal.uuidOf(`episode:${key}${attempt}`) }
    : { groupKey: `group:${key}`, episodeId: EpisodeInternal.uuidOf(`episode:${key}/${payload.member}${attempt}`) }
}

const noSandbox = () => new ArchitectureFailed({ architecture: ActorLoop.name, message: "no sandbox on this runner" })

/** The reward in context, made durable (`Activities.durableReward`), when there is one. */
const withDurableReward = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const reward = yield* Effect.serviceOption(Reward.CurrentReward)
    if (Option.isNone(reward)) return yield* effect
    return yield* Effect.provideService(effect, Reward.CurrentReward, yield* Activities.durableReward(reward.value))
  })

const stepLayer = ActorLoopStep.toLayer(
  (payload) =>
    Effect.gen(function*() {
      const found = yield* Effect.serviceOption(Sandbox.Sandbox)
      if (Option.isNone(found)) {
        // A runner started without a usable sandbox: the step fails with the reason, the runner goes on.
        return { _tag: "Failed", error: noSandbox() } as const
      }
      const model = yield* Activities.durableModel(yield* Model.Model)
      const sandbox = yield* Activities.durableSandbox(found.value)
      const states = yield* Activities.durableStateStore(yield* StateStore.StateStore)
      const trajectories = yield* Activities.durableTrajectoryStore(yield* TrajectoryStore.TrajectoryStore)
      // The session names the step's activities and its record: the same in every execution of the step.
      const sessionId = `actor-${payload.index}-${payload.task.taskId}`
      return yield* ActorLoop.step(payload.task, { ...payload.options, sessionId }).pipe(
        Effect.map((record): StepOutcome => ({ _tag: "Recorded", record })),
        Effect.catch((error) => Effect.succeed<StepOutcome>({ _tag: "Failed", error })),
        withDurableReward,
        Effect.provideService(Model.Model, model),
        Effect.provideService(Sandbox.Sandbox, sandbox),
        Effect.provideService(StateStore.StateStore, states),
        Effect.provideService(TrajectoryStore.TrajectoryStore, trajectories)
      )
    })
)

const episodeLayer = ActorLoopEpisode.toLayer(
  (payload) =>
    Effect.gen(function*() {
      const { episodeId, groupKey } = episodeIdsOf(payload)
      const maxSteps = payload.options.maxSteps ?? 1
      const members = groupKey === undefined
        ? Exit.succeed([EpisodeInternal.loneMember(payload.task.taskId, payload.task.seed)])
        : yield* Effect.exit(EpisodeInternal.derivedMembers(groupKey, payload.task.seed, payload.group ?? 1, maxSteps))
      const groupId = groupKey === undefined ? undefined : EpisodeInternal.uuidOf(groupKey)
      const failed = (error: AgentError): EpisodeOutcome => ({
        _tag: "Failed",
        error,
        episodeId,
        ...(groupId !== undefined ? { groupId } : {}),
        ...(payload.run !== undefined ? { run: payload.run } : {})
      })
      const found = yield* Effect.serviceOption(Sandbox.Sandbox)
      if (Option.isNone(found)) return failed(noSandbox())
      if (Exit.isFailure(members)) {
        // A seed too large for the group (the client checks it first; a runner of an older client may not have).
        const error = Option.getOrUndefined(Exit.findErrorOption(members))
        return failed(error ?? new ArchitectureFailed({ architecture: ActorLoop.name, message: "the group's members could not be made" }))
      }
      const base = members.value[groupKey === undefined ? 0 : payload.member]
      if (base === undefined) {
        return failed(new ArchitectureFailed({ architecture: ActorLoop.name, message: `member ${payload.member} of a group of ${payload.group}` }))
      }
      const { aggregate, maxSteps: _m, rewardThreshold, ...stepOptions } = payload.options
      const lone = groupKey === undefined
      // The task's kept workspace (lone, `keepWorkspaces`) as in process; else one kept under the episode's key until
      // it ends, so that a resumed execution works in what its replayed commands left.
      const workspace = lone && stepOptions.keepWorkspaces === true
        ? { key: payload.task.taskId, keep: true }
        : { key: `episode-${episodeId}`, keep: true, seedOnce: true }
      const member: EpisodeInternal.Member = {
        ...base,
        sessionOf: (step) => `actor-${episodeId}-${step}`,
        workspace,
        ...(base.fresh
          ? { store: yield* Activities.durableMemberStore(yield* StateStore.makeMemory((yield* StateStore.StateStore).caps)) }
          : {})
      }
      const model = yield* Activities.durableModel(yield* Model.Model)
      const sandbox = yield* Activities.durableSandbox(found.value)
      const states = yield* Activities.durableStateStore(yield* StateStore.StateStore)
      const trajectories = yield* Activities.durableTrajectoryStore(yield* TrajectoryStore.TrajectoryStore)
      const removeWorkspace = workspace.key === payload.task.taskId ? Effect.void : Effect.ignore(found.value.discard(workspace.key))
      return yield* ActorLoop.episode(payload.task, {
        ...stepOptions,
        maxSteps,
        ...(rewardThreshold !== undefined ? { rewardThreshold } : {}),
        ...(aggregate !== undefined ? { aggregate } : {})
      }).pipe(
        Effect.map((episode): EpisodeOutcome => ({ _tag: "Recorded", episode })),
        Effect.catch((error) => Effect.succeed(failed(error))),
        // Removed once the episode ended, not when its fiber was stopped: a resumed execution needs it.
        Effect.onExit((exit) => Exit.hasInterrupts(exit) ? Effect.void : removeWorkspace),
        Effect.provideService(EpisodeInternal.Given, Option.some({ member, episodeId })),
        withDurableReward,
        Effect.provideService(Model.Model, model),
        Effect.provideService(Sandbox.Sandbox, sandbox),
        Effect.provideService(StateStore.StateStore, states),
        Effect.provideService(TrajectoryStore.TrajectoryStore, trajectories)
      )
    })
)

/** The handlers of `ActorLoopStep` and `ActorLoopEpisode` (`Durable.layerActorLoop`). */
export const layerActorLoop: Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | ActorLoop.Requirements> = Layer.merge(
  stepLayer,
  episodeLayer
) as unknown as Layer.Layer<never, never, WorkflowEngine.WorkflowEngine | ActorLoop.Requirements>


const ActorLoopOptionsSchema = Schema.Struct({
  ...EpisodeOptions.fields,
  concurrency: Schema.optional(Opts.IntAtLeast(1)),
  group: Schema.optional(Opts.IntAtLeast(1)),
  loop: Schema.String.check(Schema.isMinLength(1, { expected: "a non-empty key" }))
})

/** `Durable.actorLoop`: `ActorLoop.run` with every step or episode a workflow (documented there). */
export const actorLoop = <E, R>(
  tasks: Stream.Stream<ActorLoop.Task, E, R>,
  options: Omit<ActorLoop.RunOptions, "sliceMs"> & { readonly loop: string }
): Stream.Stream<ActorLoop.Outcome, E | InvalidOptions, R | WorkflowEngine.WorkflowEngine> =>
  Stream.unwrap(Effect.map(Opts.decode("Durable.actorLoop", ActorLoopOptionsSchema, options), ({ concurrency, group, loop, ...episodeOptions }) => {
    const { aggregate: _a, maxSteps, rewardThreshold: _r, ...stepOptions } = episodeOptions
    // Neither `maxSteps` nor `group`: one step per task, as `ActorLoop.run` (and this function before episodes) does.
    if (maxSteps === undefined && group === undefined) {
      return Stream.mapEffect(
        Stream.zipWithIndex(tasks),
        ([task, index]) =>
          Effect.map(ActorLoopStep.execute({ loop, index, task, options: stepOptions }), (outcome): ActorLoop.Outcome =>
            outcome._tag === "Recorded" ? { _tag: "Recorded", task, record: outcome.record } : { _tag: "Failed", task, error: outcome.error }),
        { concurrency: concurrency ?? 1, unordered: true }
      )
    }
    // This run of the loop: an episode whose stored failure names another run failed then, and runs again as the next
    // attempt (as `evaluate` runs a problem recorded as failed again); one that fails now is this run's outcome.
    const run = randomUUID()
    const executeFrom = (
      task: ActorLoop.Task,
      index: number,
      member: number,
      attempt: number
    ): Effect.Effect<EpisodeOutcome, never, WorkflowEngine.WorkflowEngine> =>
      Effect.flatMap(
        ActorLoopEpisode.execute({
          loop,
          index,
          task,
          ...(group !== undefined ? { group } : {}),
          member,
          options: episodeOptions,
          ...(attempt > 0 ? { attempt } : {}),
          run
        }),
        (outcome) =>
          outcome._tag === "Failed" && outcome.run !== run ? executeFrom(task, index, member, attempt + 1) : Effect.succeed(outcome)
      )
    const episodeOf = (task: ActorLoop.Task, index: number, member: number): Effect.Effect<ActorLoop.Outcome, never, WorkflowEngine.WorkflowEngine> =>
      Effect.map(
        executeFrom(task, index, member, 0),
        (outcome): ActorLoop.Outcome =>
          outcome._tag === "Recorded"
            ? {
              _tag: "Recorded",
              task,
              record: outcome.episode.records[outcome.episode.records.length - 1]!,
              episode: outcome.episode,
              ...(outcome.episode.reward !== undefined ? { reward: outcome.episode.reward } : {})
            }
            : { _tag: "Failed", task, error: outcome.error, episodeId: outcome.episodeId, ...(outcome.groupId !== undefined ? { groupId: outcome.groupId } : {}) }
      )
    // The seeds of a task's rollouts are checked before any of its workflows starts: a failed outcome per episode the
    // group would have run (outcomes count episodes), as in `ActorLoop.run`.
    const work = ([task, index]: readonly [ActorLoop.Task, number]) =>
      Effect.match(EpisodeInternal.checkSeed(task.seed, group ?? 1, maxSteps ?? 1), {
        onFailure: (error): ReadonlyArray<Effect.Effect<ActorLoop.Outcome, never, WorkflowEngine.WorkflowEngine>> =>
          Array.from({ length: group ?? 1 }, () => Effect.succeed({ _tag: "Failed", task, error })),
        onSuccess: () => Array.from({ length: group ?? 1 }, (_, member) => episodeOf(task, index, member))
      })
    return Stream.zipWithIndex(tasks).pipe(
      Stream.mapEffect(work),
      Stream.flatMap((episodes) => Stream.fromIterable(episodes)),
      Stream.mapEffect((episode) => episode, { concurrency: concurrency ?? 1, unordered: true })
    )
  }))


/**
 * The machinery of `ActorLoop.episode` and `ActorLoop.group`: where a rollout keeps its state and workspace, the
 * seed of each of its steps, the `<observation>` a step shows the next, and when an episode ends. `ActorLoop` owns
 * the step (an agent run) and the public names; this module gets the step as a function, so nothing imports in a
 * circle.
 */
import { Context, Effect, Option, Random, Scope, Semaphore, Stream } from "effect"
import { createHash, randomUUID } from "node:crypto"
import { InvalidOptions } from "../../core/AgentError.js"
import * as Model from "../../core/Model.js"
import type { ModelError } from "../../core/ModelError.js"
import * as Tool from "../../core/Tool.js"
import * as Sandbox from "../../environment/Sandbox.js"
import * as StateStore from "../../environment/StateStore.js"
import type * as TrajectoryStore from "../../environment/TrajectoryStore.js"
import * as Reward from "../Reward.js"

/** Why an episode ended (`ActorLoop.EpisodeEnd`). */
export type End = "done" | "reward" | "max_steps"

/** Where a step stands in its episode: what its request, prompt and record carry, and when the episode ends. */
export interface Context {
  readonly episodeId: string
  readonly episodeStep: number
  readonly groupId: string | undefined
  /** The step's session id (`Member.sessionOf`), or `undefined` for a new one. */
  readonly sessionId: string | undefined
  /** The step's own seed (`stepSeed`), when the rollout has one. */
  readonly seed: number | undefined
  /**
   * The seed the step's request went out with, once it is answered, when the model in context may change it: a group
   * member's first step sent on its own (`shareFirstSteps`) goes with the member's seed, not the shared one.
   */
  readonly sentSeed?: (() => number | undefined) | undefined
  /** The key of the rollout's state in the store in context (the task's id, or the group rollout's own key). */
  readonly stateKey: string
  /** The episode's workspace, opened when a step first needs it and closed when the episode ends. */
  readonly workspace: Effect.Effect<Sandbox.Workspace, Sandbox.SandboxError>
  /** What the previous step's action did, as the `<observation>` block of this step's prompt. */
  readonly observation: string | undefined
  readonly maxSteps: number
  readonly rewardThreshold: number | undefined
  readonly aggregate: Reward.Aggregate
  /** The episode's earlier steps: their rewards, and whether a part of one failed (`rewardFailed`). */
  readonly earlier: ReadonlyArray<{ readonly step: number; readonly reward: number | null; readonly failed: boolean }>
}

/** One rollout of a task: a lone episode (the task's state and workspace) or a group's member (its own, fresh). */
export interface Member {
  readonly groupId: string | undefined
  /** The seed of the rollout's first step, when it has one. */
  readonly seed: number | undefined
  /** How far apart the seeds of the rollout's consecutive steps are: the group's size (1 for a lone episode). */
  readonly seedStride: number
  /**
   * A group's member: its state lives in a store of its own, empty at the start and gone at the end, and its
   * workspace is never kept — a task whose id happens to look like a member's key is never touched.
   */
  readonly fresh: boolean
  /** The key of the rollout's state and workspace: the task's id, or `<group id>-<index>` (at most 47 characters). */
  readonly key: string
  /**
   * A group member whose first step takes its choice of one request with `n` (`shareFirstSteps`): that request's
   * seed, and the model that answers the member's first call with its choice.
   */
  readonly firstStep?: {
    readonly seed: number
    readonly model: Model.Service
    /** The seed the member's first request went out with: the shared one, or the member's own when sent alone. */
    readonly sentSeed: () => number
  } | undefined
  /**
   * The session id of each step (a durable episode's: the same in every execution, so its calls' activities and its
   * records' `session_id` are too); default a new one per step.
   */
  readonly sessionOf?: ((episodeStep: number) => string) | undefined
  /**
   * A member's state store (a durable episode's: its operations activities that rebuild the state on replay);
   * default a new in-memory one. Used only when `fresh`.
   */
  readonly store?: StateStore.Service | undefined
  /**
   * The episode's workspace, when not the default (`key`, kept when lone and `keepWorkspace`): a durable episode's
   * is kept under a key of its own while it runs, so a resumed execution finds what its replayed commands left.
   */
  readonly workspace?: { readonly key: string; readonly keep: boolean; readonly seedOnce?: boolean | undefined } | undefined
}

/**
 * A rollout given from outside instead of drawn: `ActorLoop.episode` runs this member under this episode id (a
 * durable episode's, derived from its workflow's key) rather than a lone episode with a new id.
 */
export const Given = Context.Reference<Option.Option<{ readonly member: Member; readonly episodeId: string }>>(
  "valet/ActorLoop/GivenRollout",
  { defaultValue: () => Option.none() }
)

/**
 * A UUID derived from `key` (SHA-256, formatted as an RFC 9562 version-8 UUID): the same key always gives the same
 * id, so a durable episode's and group's ids are the same in every execution and look like the drawn ones.
 */
export const uuidOf = (key: string): string => {
  const hex = createHash("sha256").update(key).digest("hex")
  const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`
}

/**
 * The seed of step `episodeStep` (from 1) of a rollout: `seed + (episodeStep - 1) × seedStride`. In a group of `n`
 * whose first seeds are `base … base + n - 1`, that is `base + (step - 1) × n + index`: every step of every member
 * has a seed of its own, so no two requests of a group are the same bytes.
 */
export const stepSeed = (member: Member, episodeStep: number): number | undefined =>
  episodeStep === 1 && member.firstStep !== undefined
    ? member.firstStep.seed
    : member.seed === undefined
    ? undefined
    : member.seed + (episodeStep - 1) * member.seedStride

/**
 * Refuses a task seed whose rollouts would need seeds past `Number.MAX_SAFE_INTEGER` (which JSON and vLLM would
 * round), before any step runs: `n` members of `maxSteps` steps use `seed … seed + n × maxSteps - 1`.
 */
export const checkSeed = (seed: number | undefined, n: number, maxSteps: number): Effect.Effect<void, InvalidOptions> => {
  const problem = seedProblem(seed, n, maxSteps)
  return problem === undefined ? Effect.void : Effect.fail(new InvalidOptions({ module: "ActorLoop", message: `ActorLoop: ${problem}` }))
}

/** What `checkSeed` refuses, as a sentence (`seed must be at most …, got …`), or `undefined` for a seed it takes. */
export const seedProblem = (seed: number | undefined, n: number, maxSteps: number): string | undefined => {
  if (seed === undefined) return undefined
  const span = n * maxSteps - 1
  return Number.isSafeInteger(seed + span)
    ? undefined
    : `seed must be at most ${Number.MAX_SAFE_INTEGER - span} for ${n} rollout(s) of ${maxSteps} step(s) (it uses ` +
      `seed … seed + ${span}), got ${seed}`
}

/** The highest seed a group draws when its task gives none (vLLM takes any 64-bit integer; this stays exact in JSON). */
const maxDrawnSeed = 2 ** 31 - 1

/**
 * The members of a group of `n`: first seeds from the task's (or a drawn one) up, one group id, a key each, and
 * their first steps one request when the model in context can serve it (`shareFirstSteps`).
 */
export const membersOf = (
  taskSeed: number | undefined,
  n: number,
  maxSteps: number
): Effect.Effect<ReadonlyArray<Member>, InvalidOptions, Model.Model> =>
  Effect.gen(function*() {
    yield* checkSeed(taskSeed, n, maxSteps)
    // Drawn so that every step's seed stays below 2^31 (some servers take only 32-bit seeds).
    const base = taskSeed ?? (yield* Random.nextIntBetween(0, seedRange(n, maxSteps)))
    return yield* shareFirstSteps(membersFrom(randomUUID(), base, n), yield* Model.Model)
  })

/** How many first seeds a group can draw: `0 … range - 1`, so that its every step's seed stays below 2^31. */
const seedRange = (n: number, maxSteps: number): number => Math.max(1, maxDrawnSeed - n * maxSteps)

/** The `n` members of group `groupId` whose first seeds are `base … base + n - 1`. */
const membersFrom = (groupId: string, base: number, n: number): Array<Member> =>
  Array.from({ length: n }, (_, i): Member => ({ groupId, seed: base + i, seedStride: n, fresh: true, key: `${groupId}-${i}` }))

/**
 * The members of a group of `n` derived from the group's key (a durable group: the same in every execution and on
 * every runner): its id `uuidOf(key)`, first seeds from the task's or, without one, from a seed derived from the key
 * (in the range a drawn one has). Their first steps are not shared (`shareFirstSteps`): each member is a workflow of
 * its own, and its calls separate requests.
 */
export const derivedMembers = (
  key: string,
  taskSeed: number | undefined,
  n: number,
  maxSteps: number
): Effect.Effect<ReadonlyArray<Member>, InvalidOptions> =>
  Effect.as(
    checkSeed(taskSeed, n, maxSteps),
    membersFrom(uuidOf(key), taskSeed ?? createHash("sha256").update(`seed:${key}`).digest().readUInt32BE(0) % seedRange(n, maxSteps), n)
  )

/** A request without its seed, as a key: the members' first requests differ in their seed only. */
const sameButSeed = ({ seed: _, ...rest }: Model.Request): string => JSON.stringify(rest)

/**
 * The members of a group with their first steps served by one request (`n` choices, the group's first seed) when
 * the model says one request can (`Model.Service.choicesPerRequest`: vLLM); as they were otherwise. Member `i`'s
 * first call answers with choice `i` (`index` 0, so it reads as a one-choice answer), usage counting the whole
 * prompt and the choice's own tokens when the server sent its ids (else an even share of the request's). A first
 * call that does not ask what the shared request asked (another prompt: it should not happen, the members start
 * alike) is sent on its own; a shared request that fails is sent again by the next member, so one failure costs
 * one member its episode, as with separate requests.
 */
export const shareFirstSteps = (
  members: ReadonlyArray<Member>,
  model: Model.Service
): Effect.Effect<ReadonlyArray<Member>> =>
  Effect.gen(function*() {
    const first = members[0]
    if (model.choicesPerRequest !== true || members.length < 2 || first?.seed === undefined) return members
    const n = members.length
    const seed = first.seed
    const lock = yield* Semaphore.make(1)
    let shared: { readonly key: string; readonly response: Model.Response } | undefined
    const sample = (request: Model.Request): Effect.Effect<Model.Response | undefined, ModelError> =>
      lock.withPermits(1)(Effect.suspend(() => {
        const key = sameButSeed(request)
        if (shared !== undefined) return Effect.succeed(shared.key === key ? shared.response : undefined)
        return Effect.map(model.generate({ ...request, n, seed }), (response) => {
          shared = { key, response }
          return response
        })
      }))
    // A server that answered fewer choices than asked leaves the rest to requests of their own (`undefined`).
    const pick = (response: Model.Response, i: number): Model.Response | undefined => {
      const choice = response.choices.find((c) => c.index === i)
      if (choice === undefined) return undefined
      // Shared among the choices the server sent (it may send fewer than asked).
      const outputTokens = choice.tokenIds?.length ?? Math.round(response.usage.outputTokens / response.choices.length)
      return {
        ...response,
        choices: [{ ...choice, index: 0 }],
        usage: { ...response.usage, outputTokens, totalTokens: response.usage.inputTokens + outputTokens }
      }
    }
    return members.map((member, i): Member => {
      let used = false
      let sent = seed
      // The member's first call only; its later calls (and a first call unlike the shared one) go to the model.
      const generate = (request: Model.Request): Effect.Effect<Model.Response, ModelError> =>
        Effect.suspend(() => {
          if (used) return model.generate(request)
          used = true
          return Effect.flatMap(sample(request), (response) => {
            const picked = response === undefined ? undefined : pick(response, i)
            // Sent alone, with the member's own seed: the shared seed again would repeat choice 0's sample.
            if (picked !== undefined) return Effect.succeed(picked)
            sent = member.seed ?? seed
            return model.generate({ ...request, seed: sent })
          })
        })
      return {
        ...member,
        firstStep: {
          seed,
          sentSeed: () => sent,
          model: Model.make({
            ...model,
            generate,
            stream: (request) => Stream.unwrap(Effect.map(generate(request), (r) => Stream.fromIterable(Model.toChunks(r)))),
            streamInto: (request, onChunk) => Effect.flatMap(generate(request), (r) => Model.replayInto(r, onChunk))
          })
        }
      }
    })
  })

/** A lone episode: the task's state and workspace, its seed (if any) for the first step. */
export const loneMember = (taskId: string, seed: number | undefined): Member => ({
  groupId: undefined,
  seed,
  seedStride: 1,
  fresh: false,
  key: taskId
})

/** How much of a command's stdout and of its stderr an `<observation>` shows. */
export const observationChars = 2000

/**
 * The `<observation>` block the next step's prompt ends with: what the step's action did.
 *
 * ```
 * <observation>
 * exit_code: 1            (`, timed out` when it was stopped)
 * stdout:
 * <the first 2,000 characters, then "[truncated: N more characters]">
 * stderr:
 * <the same>
 * </observation>
 * ```
 *
 * A command the sandbox could not run reads `error: <reason>: <message>`; a step without an action reads
 * `no command ran` (with its parse error, when its `<action>` did not parse).
 */
export const observation = (record: TrajectoryStore.TrajectoryRecord): string => {
  const result = record.sandboxResult
  const body = result !== null
    ? [
      `exit_code: ${result.exitCode}${result.timedOut ? ", timed out" : ""}`,
      `stdout:\n${Tool.truncate(result.stdout, observationChars)}`,
      `stderr:\n${Tool.truncate(result.stderr, observationChars)}`
    ].join("\n")
    : record.metrics.sandboxError !== undefined
    ? `error: ${record.metrics.sandboxError}`
    : record.modelOutput.parseError === "invalid_action_json"
    ? "no command ran (parse_error: invalid_action_json)"
    : "no command ran"
  return `<observation>\n${body}\n</observation>`
}

/** Whether a part of a step's reward failed. */
export const rewardFailed = (parts: ReadonlyArray<{ readonly error?: unknown }> | undefined): boolean =>
  parts?.some((part) => part.error !== undefined) ?? false

/**
 * Whether the reward a record stands for is unknown because a part it counts failed (`ActorLoop.rewardUnknown`): an
 * episode's last record says so (`episodeRewardFailed`); a lone step's own parts do.
 */
export const rewardUnknown = (record: TrajectoryStore.TrajectoryRecord): boolean =>
  record.episodeRewardFailed === true || (record.episodeId === undefined && rewardFailed(record.rewardParts))

/**
 * Whether a step ends its episode, and why: the model's `<done/>`, a reward at the threshold (a reward with a failed
 * part never ends it: a broken check is not a success), or `maxSteps`. `rewardFailed`: a step reward the episode's
 * counts (every step's, or the last one's with the `last` aggregate) had a part fail.
 */
export const ending = (
  context: Context,
  done: boolean,
  scored: Reward.Scored | undefined
): { readonly end: End; readonly reward: Reward.Scored | undefined; readonly rewardFailed: boolean } | undefined => {
  const failed = scored !== undefined && rewardFailed(scored.parts)
  const end: End | undefined = done
    ? "done"
    : scored !== undefined && !failed && context.rewardThreshold !== undefined && scored.value >= context.rewardThreshold
    ? "reward"
    : context.episodeStep >= context.maxSteps
    ? "max_steps"
    : undefined
  if (end === undefined) return undefined
  const reward = scored === undefined
    ? undefined
    : Reward.episode([...context.earlier, { step: context.episodeStep, reward: scored.value }], context.aggregate)
  const counted = context.aggregate === "last" ? [] : context.earlier
  return { end, reward, rewardFailed: reward !== undefined && (failed || counted.some((step) => step.failed)) }
}

/** When an episode ends and how its reward adds up. */
export interface Limits {
  readonly maxSteps: number
  readonly rewardThreshold: number | undefined
  readonly aggregate: Reward.Aggregate
  /** Keep a lone episode's workspace after it (for the task's next episode); a group member's is never kept. */
  readonly keepWorkspace: boolean
}

/** An episode as run (`ActorLoop.Episode`). */
export interface Ran {
  readonly records: ReadonlyArray<TrajectoryStore.TrajectoryRecord>
  readonly end: End
  readonly reward: Reward.Scored | undefined
}

/**
 * Runs an episode: `step` after `step` in one workspace (opened when first needed, closed at the end) and one state
 * (a member's in a store of its own), each step seeded and shown the previous one's observation, until a record
 * says the episode ended.
 */
export const run = <E, R>(
  step: (context: Context) => Effect.Effect<TrajectoryStore.TrajectoryRecord, E, R>,
  taskFiles: Sandbox.Files,
  member: Member,
  episodeId: string,
  limits: Limits
): Effect.Effect<Ran, E, R | Sandbox.Sandbox | StateStore.StateStore> =>
  Effect.scoped(Effect.gen(function*() {
    const sandbox = yield* Sandbox.Sandbox
    const scope = yield* Scope.Scope
    const workspace = yield* Effect.cached(
      sandbox.workspace(member.workspace?.key ?? member.key, taskFiles, {
        keep: member.workspace?.keep ?? (!member.fresh && limits.keepWorkspace),
        ...(member.workspace?.seedOnce === true ? { seedOnce: true } : {})
      }).pipe(Scope.provide(scope))
    )
    // A member's state: a store of its own with the configured store's caps, dropped with the episode.
    const ownStore = member.fresh
      ? member.store ?? (yield* StateStore.makeMemory((yield* StateStore.StateStore).caps))
      : undefined
    const records: Array<TrajectoryStore.TrajectoryRecord> = []
    for (let episodeStep = 1; episodeStep <= limits.maxSteps; episodeStep++) {
      const previous = records[records.length - 1]
      const context: Context = {
        episodeId,
        episodeStep,
        groupId: member.groupId,
        sessionId: member.sessionOf?.(episodeStep),
        seed: stepSeed(member, episodeStep),
        sentSeed: episodeStep === 1 ? member.firstStep?.sentSeed : undefined,
        stateKey: member.key,
        workspace,
        observation: previous === undefined ? undefined : observation(previous),
        maxSteps: limits.maxSteps,
        rewardThreshold: limits.rewardThreshold,
        aggregate: limits.aggregate,
        earlier: records.map((r) => ({ step: r.episodeStep ?? 0, reward: r.reward, failed: rewardFailed(r.rewardParts) }))
      }
      const stepped = ownStore === undefined ? step(context) : Effect.provideService(step(context), StateStore.StateStore, ownStore)
      const record = yield* (episodeStep === 1 && member.firstStep !== undefined
        ? Effect.provideService(stepped, Model.Model, member.firstStep.model)
        : stepped)
      records.push(record)
      if (record.episodeEnd !== undefined) break
    }
    const last = records[records.length - 1]!
    const reward = records.every((r) => r.rewardParts !== undefined)
      ? Reward.episode(records.map((r) => ({ step: r.episodeStep ?? r.step, reward: r.reward })), limits.aggregate)
      : undefined
    return { records, end: last.episodeEnd ?? "max_steps", reward }
  }))

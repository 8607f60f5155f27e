/**
 * The program of an actor-loop step (`ActorLoop.step`, `ActorLoop.stream`, and each step of an episode): the prompt
 * with the task's state, the model call, the sandboxed action, the state update, the reward and the trajectory
 * record it appends. `ActorLoop` owns the public names (re-exported there with their documentation) and checks the
 * options; the episode's machinery (`episode.ts`) gets the step as a function.
 */
import { Clock, Effect, Option, Result, Scope } from "effect"
import * as Agent from "../../core/Agent.js"
import { type AgentError, ArchitectureFailed } from "../../core/AgentError.js"
import * as Architecture from "../../core/Architecture.js"
import type * as Budget from "../../core/Budget.js"
import * as Model from "../../core/Model.js"
import * as Sandbox from "../../environment/Sandbox.js"
import * as StateStore from "../../environment/StateStore.js"
import * as TrajectoryStore from "../../environment/TrajectoryStore.js"
import * as Reward from "../Reward.js"
import * as internal from "./actorLoop.js"
import * as episodeInternal from "./episode.js"
import type { Task } from "./task.js"

/** The architecture's name (`ActorLoop.name`). */
export const name = "actor_loop"

/** The default sampling temperature of a step (`ActorLoop.defaultTemperature`). */
export const defaultTemperature = 0.1

/** Options of a step (`ActorLoop.Options`). */
export interface Options {
  /** One workspace per task across its steps, keeping the edits of earlier steps (default: fresh each step). */
  readonly keepWorkspaces?: boolean | undefined
  /** Timeout of the sandboxed command when the task gives none (default: the sandbox's). */
  readonly sandboxTimeoutMs?: number | undefined
  /** Send the prompt as a chat user message (after `system`, if any) instead of a raw completion prompt. */
  readonly chat?: boolean | undefined
  /** The system message in chat mode. */
  readonly system?: string | undefined
  /** Limits of each step's run. */
  readonly budget?: Budget.Limits | undefined
  /**
   * The step's session id (default: a new one). A durable step gives its own, so that a replayed step's calls have
   * the same keys and its record the same `session_id`.
   */
  readonly sessionId?: string | undefined
}

/** The services a step needs (`ActorLoop.Requirements`). */
export type Requirements = Model.Model | Sandbox.Sandbox | StateStore.StateStore | TrajectoryStore.TrajectoryStore

const infrastructure = (error: { readonly _tag: string; readonly message: string }) =>
  new ArchitectureFailed({ architecture: name, message: `${error._tag}: ${error.message}` })

// Log-probabilities that do not pair with their token ids are a server's habit, not one answer's: said once a process.
let warnedMismatch = false

/** The step's program; `onRecord` receives the record as appended. */
const program = (
  task: Task,
  options: Options,
  onRecord: (record: TrajectoryStore.TrajectoryRecord) => void,
  episodeContext?: episodeInternal.Context
) =>
(_input: Architecture.Input): Effect.Effect<Architecture.Outcome, AgentError, Requirements | Architecture.CurrentRun> =>
  Effect.gen(function*() {
    const run = yield* Architecture.CurrentRun
    const states = yield* StateStore.StateStore
    const sandbox = yield* Sandbox.Sandbox
    const trajectories = yield* TrajectoryStore.TrajectoryStore

    // An episode's step: the state under the rollout's key (a group member's in a store of its own), its own seed,
    // and what the previous step's action did.
    const key = episodeContext?.stateKey ?? task.taskId
    const seed = episodeContext === undefined ? task.seed : episodeContext.seed
    const stateBefore = yield* Effect.mapError(states.load(key), infrastructure)
    const built = internal.buildPrompt(task.prompt, stateBefore)
    const prompt = episodeContext?.observation === undefined ? built : `${built}\n\n${episodeContext.observation}`
    const sampling = {
      temperature: task.temperature ?? defaultTemperature,
      ...(task.stop !== undefined ? { stop: task.stop } : {}),
      ...(seed !== undefined ? { seed } : {}),
      ...(task.maxTokens !== undefined ? { maxTokens: task.maxTokens } : {})
    }
    const request: Model.Request = options.chat === true
      ? { ...sampling, messages: [...(options.system !== undefined ? [Model.system(options.system)] : []), Model.user(prompt)] }
      : { ...sampling, prompt }

    const startedAt = yield* Clock.currentTimeNanos
    const response = yield* Architecture.generate(request, { step: "actor_loop.act" })
    const latencySec = Number((yield* Clock.currentTimeNanos) - startedAt) / 1e9
    // The rest of the step runs as a turn of the scheduler, not inside the socket's read callback: on the paced
    // scheduler (`ActorLoop.run` with episodes in flight together) a wave of answers is worked through a slice at a
    // time, each next request written between slices (see pacing.ts). Elsewhere it is one `setImmediate` a step.
    yield* Effect.yieldNow
    const choice = response.choices[0]
    const raw = choice?.text ?? ""
    yield* Architecture.setOutput(raw)

    yield* internal.yieldBeforeReading(raw)
    const parsed = internal.parseOutput(raw, choice?.reasoning)
    yield* Architecture.progress("actor_loop.parsed", {
      taskId: task.taskId,
      think: parsed.think !== null,
      action: parsed.command.present,
      stateUpdate: parsed.stateUpdate !== undefined,
      parseError: parsed.parseError
    })

    const reward = Option.getOrUndefined(yield* Effect.serviceOption(Reward.CurrentReward))
    // The step's workspace, made once when the action or the reward first needs it, and open until the step is
    // scored: a reward's command sees what the action left. An episode's steps share the episode's.
    return yield* Effect.scoped(Effect.gen(function*() {
      const scope = yield* Scope.Scope
      const workspace = episodeContext?.workspace ?? (yield* Effect.cached(
        sandbox.workspace(key, task.workspaceFiles ?? {}, { keep: options.keepWorkspaces === true }).pipe(Scope.provide(scope))
      ))
      let sandboxResult: Sandbox.SandboxResult | null = null
      let sandboxError: string | undefined
      if (parsed.command.present) {
        const timeoutMs = task.timeoutMs ?? options.sandboxTimeoutMs
        const ran = yield* Effect.flatMap(
          workspace,
          (workspace) => sandbox.run(workspace, { command: parsed.command.value, ...(timeoutMs !== undefined ? { timeoutMs } : {}) })
        ).pipe(Effect.result)
        // A workspace that cannot be used (an earlier action left a symlink where a seed file goes…) is part of
        // the trajectory, like any other consequence of the model's actions.
        if (Result.isSuccess(ran)) sandboxResult = ran.success
        else sandboxError = `${ran.failure.reason}: ${ran.failure.message}`
        yield* Architecture.progress("actor_loop.sandbox_ran", sandboxResult !== null
          ? {
            taskId: task.taskId,
            command: sandboxResult.command,
            exitCode: sandboxResult.exitCode,
            timedOut: sandboxResult.timedOut,
            durationMs: sandboxResult.durationMs,
            isolation: sandboxResult.isolation,
            changedFiles: sandboxResult.changedFiles ?? [],
            ...(sandboxResult.error !== undefined ? { error: sandboxResult.error } : {})
          }
          : { taskId: task.taskId, sandboxError })
      }

      const stateAfter = parsed.stateUpdate !== undefined
        ? yield* Effect.mapError(states.update(key, parsed.stateUpdate), infrastructure)
        : stateBefore
      yield* Architecture.progress("actor_loop.state_saved", { taskId: task.taskId, updated: parsed.stateUpdate !== undefined })

      const scored = reward === undefined ? undefined : yield* reward.evaluate({
        taskId: task.taskId,
        prompt: task.prompt,
        reference: task.reference,
        output: raw,
        action: parsed.action,
        sandboxResult,
        run: Reward.runnerIn(sandbox, workspace)
      })
      if (scored !== undefined) {
        yield* Architecture.progress("actor_loop.rewarded", {
          taskId: task.taskId,
          reward: scored.value,
          failed: scored.parts.filter((part) => part.error !== undefined).map((part) => part.name)
        })
      }

      const ending = episodeContext === undefined ? undefined : episodeInternal.ending(episodeContext, parsed.done, scored)
      const tokens = internal.tokensOf(response, choice)
      const mismatch = internal.tokenMismatch(choice)
      if (mismatch !== undefined && !warnedMismatch) {
        warnedMismatch = true
        yield* Effect.logWarning(
          `actor loop: the model's answer to ${task.taskId} has ${mismatch}; its log-probabilities are not stored ` +
            "(the token ids are). Said once."
        )
      }
      const record = yield* Effect.mapError(
        trajectories.append({
          taskId: task.taskId,
          prompt,
          stateBefore,
          stateAfter,
          modelOutput: {
            raw,
            think: parsed.think,
            action: parsed.action,
            stateUpdate: parsed.stateUpdateJson,
            parseError: parsed.parseError,
            ...(parsed.parseErrorDetail !== null ? { parseErrorDetail: parsed.parseErrorDetail } : {})
          },
          sandboxResult,
          reward: scored?.value ?? null,
          ...(scored !== undefined ? { rewardParts: scored.parts } : {}),
          metrics: {
            actorLatencySec: Math.round(latencySec * 1e6) / 1e6,
            sandboxFailed: sandboxResult === null || sandboxResult.exitCode !== 0,
            inputTokens: response.usage.inputTokens,
            outputTokens: response.usage.outputTokens,
            finishReason: choice?.finishReason ?? "other",
            model: response.model,
            ...(sandboxResult !== null ? { sandboxDurationSec: sandboxResult.durationMs / 1000 } : {}),
            ...(sandboxError !== undefined ? { sandboxError } : {})
          },
          sessionId: run.sessionId,
          createdAt: yield* Clock.currentTimeMillis,
          ...(tokens !== undefined ? { tokens } : {}),
          ...(episodeContext !== undefined
            ? {
              episodeId: episodeContext.episodeId,
              episodeStep: episodeContext.episodeStep,
              ...(episodeContext.groupId !== undefined ? { groupId: episodeContext.groupId } : {}),
              ...(seed !== undefined ? { seed: episodeContext.sentSeed?.() ?? seed } : {})
            }
            : {}),
          ...(ending !== undefined
            ? { episodeEnd: ending.end, episodeReward: ending.reward?.value ?? null, ...(ending.rewardFailed ? { episodeRewardFailed: true } : {}) }
            : {})
        }),
        infrastructure
      )
      onRecord(record)
      yield* Architecture.progress("actor_loop.recorded", { taskId: task.taskId, step: record.step })
      return { output: raw, metadata: { taskId: task.taskId, step: record.step, record: TrajectoryStore.encode(record) } }
    }))
  })

export const agentFor = (
  task: Task,
  options: Options,
  onRecord: (record: TrajectoryStore.TrajectoryRecord) => void,
  episodeContext?: episodeInternal.Context
) =>
  Agent.make({
    name: "actor",
    instructions: options.system ?? "",
    architecture: Architecture.make({ name, program: program(task, options, onRecord, episodeContext) })
  })

/** A step with options already checked. */
export const stepChecked = (
  task: Task,
  options: Options,
  episodeContext?: episodeInternal.Context
): Effect.Effect<TrajectoryStore.TrajectoryRecord, AgentError, Requirements> =>
  Effect.suspend(() => {
    let record: TrajectoryStore.TrajectoryRecord | undefined
    return Agent.run(agentFor(task, options, (r) => (record = r), episodeContext), task.prompt, {
      ...(options.budget !== undefined ? { budget: options.budget } : {}),
      // An episode's step may have its session given (a durable episode's: the same in every execution).
      ...((options.sessionId ?? episodeContext?.sessionId) !== undefined ? { sessionId: options.sessionId ?? episodeContext?.sessionId } : {})
    }).pipe(
      Effect.flatMap((result) =>
        record !== undefined
          ? Effect.succeed(record)
          : Effect.fail(
            new ArchitectureFailed({
              architecture: name,
              message: `task ${task.taskId}: the step stopped before it was recorded (${result.interruptionReason ?? "no record"})`
            })
          )
      ),
      // No stack trace: capturing one for every step cost ~1.5 % of a rollout's CPU, for a location that is always here.
      Effect.withSpan("valet/ActorLoop.step", { attributes: { taskId: task.taskId } }, { captureStackTrace: false })
    )
  })


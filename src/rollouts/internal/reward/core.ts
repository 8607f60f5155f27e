/**
 * The models of `Reward` and `make`, shared by `Reward.ts` and the built-ins beside this file (which cannot import
 * `Reward.ts` without a cycle). Public names and their documentation are in `Reward.ts`.
 */
import { Effect, Result, Schema } from "effect"
import type * as Sandbox from "../../../environment/Sandbox.js"
import * as TrajectoryStore from "../../../environment/TrajectoryStore.js"

/** `Reward.FailureReason`: documented there. */
export const FailureReason = Schema.Literals([
  "sandbox_error",
  "no_reference",
  "unparsed_score",
  "model_error",
  "invalid_output",
  "truncated_output",
  "invalid_value",
  "defect"
])

/** `Reward.FailureReason`: documented there. */
export type FailureReason = typeof FailureReason.Type

/** `Reward.RewardFailed`: documented there. */
export class RewardFailed extends Schema.TaggedError<RewardFailed>()("RewardFailed", {
  reward: Schema.String,
  reason: FailureReason,
  message: Schema.String
}) {}

/** `Reward.Part`: documented there. */
export const Part = TrajectoryStore.RewardPart

/** `Reward.Part`: documented there. */
export type Part = TrajectoryStore.RewardPart

/** `Reward.Scored`: documented there. */
export const Scored = Schema.Struct({ value: Schema.Finite, parts: Schema.Array(Part) })

/** `Reward.Scored`: documented there. */
export type Scored = typeof Scored.Type

/** `Reward.Runner`: documented there. */
export type Runner = (
  command: ReadonlyArray<string>,
  options?: { readonly timeoutMs?: number | undefined }
) => Effect.Effect<Sandbox.SandboxResult, Sandbox.SandboxError>

/** `Reward.Step`: documented there. */
export interface Step {
  readonly taskId: string
  /** The task's prompt (without the state block). */
  readonly prompt: string
  /** The task's reference answer, if it has one. */
  readonly reference?: string | undefined
  /** The model's output, as written. */
  readonly output: string
  /** The `<action>` JSON as parsed (null when there was none). */
  readonly action: unknown
  /** What the action's command did; null when no action ran. */
  readonly sandboxResult: Sandbox.SandboxResult | null
  /** Runs a command in the step's workspace; the workspace lives until the step is scored. */
  readonly run: Runner
}

/** `Reward.Reward`: documented there. */
export interface Reward<R = never> {
  readonly name: string
  readonly evaluate: (step: Step) => Effect.Effect<Scored, never, R>
}

/** A part that could not be scored: no value, the error's reason and message. */
export const failedPart = (name: string, weight: number, error: RewardFailed): Part => ({
  name,
  value: null,
  weight,
  error: { reason: error.reason, message: error.message }
})

/** `Reward.make`: documented there. */
export const make = <R = never>(
  name: string,
  score: (step: Step) => Effect.Effect<number, RewardFailed, R>
): Reward<R> => ({
  name,
  evaluate: (step) =>
    Effect.suspend(() => score(step)).pipe(
      // A throw or `die` in the score function is its bug: the part fails (`defect`), the step does not.
      Effect.catchDefect((defect) =>
        Effect.fail(new RewardFailed({ reward: name, reason: "defect", message: `${name} died: ${String(defect).slice(0, 200)}` }))
      ),
      Effect.flatMap((value) =>
        Number.isFinite(value)
          ? Effect.succeed(value)
          : Effect.fail(new RewardFailed({ reward: name, reason: "invalid_value", message: `${name} scored ${value}, not a finite number` }))
      ),
      Effect.result,
      Effect.map((result): Scored =>
        Result.isSuccess(result)
          ? { value: result.success, parts: [{ name, value: result.success, weight: 1 }] }
          : { value: 0, parts: [failedPart(name, 1, result.failure)] }
      )
    )
})

/** `Reward.CommandOptions`: documented there. */
export interface CommandOptions {
  /** The part's name (default: the command, joined). */
  readonly name?: string | undefined
  /** Timeout of the command (default: the sandbox's). A command that times out scores 0. */
  readonly timeoutMs?: number | undefined
}

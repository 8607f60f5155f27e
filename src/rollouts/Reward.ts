/**
 * Rewards for RL rollouts (DESIGN §18). A `Reward` is a value: a name and a way to score one step of a task
 * (`Step`: the task, the model's output, its action's sandbox result, and a way to run commands in the step's
 * workspace). Built-ins:
 * - `exitCode(command)`: 1 when a command exits as expected (0 by default) in the step's workspace, else 0;
 * - `testsPass(command)`: the share of tests passing by the command's summary (`3 passed, 1 failed` → 0.75), 1 on
 *   exit 0 without a summary, 0 on another exit without one (a failed part when the sandbox cut the output);
 * - `astGrep({ language, pattern | rule })`: 1 when an `ast-grep` rule matches in the workspace (or, with
 *   `matches: "none"`, when it does not), hidden and ignored files included, the workspace's `sgconfig.yml` not
 *   read (a `pattern` also sees past `ast-grep-ignore` comments; a `rule` cannot);
 * - `exactAnswer()` / `normalizedAnswer()`: 1 when the answer (`FINAL:` as `Evaluate` reads it) equals the task's
 *   `reference` (or one given), as is or normalized as `Evaluate` and voting normalize (`42.0` = `42`);
 * - `judged({ rubric })`: a model's score in [0, 1], read with the score parser the judges use
 *   (`{"score": 0.8}`, `score: 7/10`).
 *
 * `weighted([...])` sums rewards with weights (their sandbox commands one at a time); `make(name, score)` makes one
 * of your own. Scoring never fails: a reward that cannot score (its command is refused, no reference, a judge's
 * reply without a score, a score function that throws) is a part whose `value` is null and whose `error` says why
 * (`RewardFailed`), counting 0 in the sum — the step and its episode are kept. A result is `{ value, parts }`;
 * the actor loop stores `value` in the trajectory record's `reward` and the parts in `reward_parts`.
 *
 * The actor loop scores each step with the reward of the `CurrentReward` service (`Reward.layer(reward)`), and its
 * `run` answers each task's episode reward (`episode`: the steps' rewards summed, averaged or the last); without
 * the service, `reward` stays null as before.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { ScriptedModel } from "valet"
 * import * as ActorLoop from "valet/ActorLoop"
 * import * as Reward from "valet/Reward"
 * import * as Sandbox from "valet/Sandbox"
 * import * as StateStore from "valet/StateStore"
 * import * as TrajectoryStore from "valet/TrajectoryStore"
 *
 * // Mostly the tests, a little the answer: the parts are stored with the sum.
 * const reward = Reward.weighted([
 *   { reward: Reward.testsPass(["pytest", "-q"]), weight: 0.8 },
 *   { reward: Reward.normalizedAnswer(), weight: 0.2 }
 * ])
 *
 * const services = Layer.mergeAll(
 *   ScriptedModel.layer([`<action>{"command": ["pytest", "-q"]}</action>\nFINAL: 42`]),
 *   Sandbox.layerTest(() => ({ exitCode: 1, stdout: "1 failed, 3 passed" }), { allow: ["pytest"] }),
 *   StateStore.layerMemory(),
 *   TrajectoryStore.layerMemory,
 *   Reward.layer(reward)
 * )
 *
 * // The record's `reward` is 0.8 × 0.75 + 0.2 × 1 = 0.8; `rewardParts` holds both parts.
 * const record = ActorLoop.step({ taskId: "fix-sort", prompt: "Make the tests pass.", reference: "42" }).pipe(
 *   Effect.provide(services)
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Context, Effect, Layer, type Result, type Schema, Semaphore } from "effect"
import { normalizeAnswer } from "../core/internal/parse.js"
import type * as Model from "../core/Model.js"
import type * as Sandbox from "../environment/Sandbox.js"
import * as TrajectoryStore from "../environment/TrajectoryStore.js"
import { defaultExtractAnswer } from "./Evaluate.js"
import * as core from "./internal/reward/core.js"
import * as judge from "./internal/reward/judged.js"
import * as sandboxRewards from "./internal/reward/sandbox.js"

// ---------------------------------------------------------------------------------------------------------
// Models
// ---------------------------------------------------------------------------------------------------------

/**
 * Why a reward could not score a step:
 * - `sandbox_error`: its command could not run (refused, not found, no workspace);
 * - `no_reference`: an answer reward without a reference;
 * - `unparsed_score`: a judge's reply without a score in [0, 1];
 * - `model_error`: the judge's model call failed;
 * - `invalid_output`: a command's output could not be read (ast-grep's JSON);
 * - `truncated_output`: the sandbox cut a command's output before what the reward reads (a test summary);
 * - `invalid_value`: a score or weight that is not a finite number, or a sum that overflows;
 * - `defect`: the score function threw or died (a bug in it, not the model's answer).
 *
 * @since 0.2.0
 * @category models
 */
export const FailureReason: Schema.Literals<readonly ["sandbox_error", "no_reference", "unparsed_score", "model_error", "invalid_output", "truncated_output", "invalid_value", "defect"]> = core.FailureReason

/**
 * Why a reward could not score a step.
 *
 * @since 0.2.0
 * @category models
 */
export type FailureReason = core.FailureReason

/**
 * A reward could not score a step: `reward` names it, `reason` says what kind of failure, `message` what exactly.
 * Recorded in its part (`error`), never the step's failure.
 *
 * @since 0.2.0
 * @category errors
 */
export const RewardFailed: typeof core.RewardFailed = core.RewardFailed
/**
 * A reward could not score a step.
 *
 * @since 0.2.0
 * @category errors
 */
export type RewardFailed = core.RewardFailed

/**
 * One part of a reward, as stored in a trajectory record's `reward_parts`: `value` null when it failed.
 *
 * @since 0.2.0
 * @category models
 */
export const Part = TrajectoryStore.RewardPart

/**
 * One part of a reward.
 *
 * @since 0.2.0
 * @category models
 */
export type Part = TrajectoryStore.RewardPart

/**
 * A scored step: `value` = Σ weight × value over `parts` (a failed part counts 0).
 *
 * @since 0.2.0
 * @category models
 */
export const Scored = core.Scored

/**
 * A scored step.
 *
 * @since 0.2.0
 * @category models
 */
export type Scored = core.Scored

/**
 * Runs a command in the step's workspace (the one its action ran in, or a fresh one seeded with the task's files).
 *
 * @since 0.2.0
 * @category models
 */
export type Runner = core.Runner

/**
 * What a reward scores: one step of a task.
 *
 * @since 0.2.0
 * @category models
 */
export type Step = core.Step

/**
 * A reward: a name and how it scores a step. `evaluate` never fails: what could not be scored is a part with an
 * `error`. Make one with `make`, a built-in or `weighted`.
 *
 * @since 0.2.0
 * @category models
 */
export type Reward<R = never> = core.Reward<R>

// ---------------------------------------------------------------------------------------------------------
// Constructors and combinators
// ---------------------------------------------------------------------------------------------------------

/**
 * A reward of your own: `score` answers a number (any finite one; the built-ins answer [0, 1]) or fails with
 * `RewardFailed`, which is recorded in the part. A `score` that throws or dies is a failed part too (`defect`):
 * the bug is recorded, the step kept.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import * as Reward from "valet/Reward"
 *
 * // Shorter outputs score higher; an empty one could not be scored.
 * const brevity = Reward.make("brevity", (step) =>
 *   step.output === ""
 *     ? Effect.fail(new Reward.RewardFailed({ reward: "brevity", reason: "invalid_output", message: "empty output" }))
 *     : Effect.succeed(1 / (1 + step.output.length / 1000)))
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const make: <R = never>(
  name: string,
  score: (step: Step) => Effect.Effect<number, RewardFailed, R>
) => Reward<R> = core.make

/**
 * A reward and its weight in `weighted`.
 *
 * @since 0.2.0
 * @category models
 */
export interface WeightedReward<R = never> {
  readonly reward: Reward<R>
  readonly weight: number
}

/**
 * The weighted sum of rewards, scored concurrently: its parts are theirs, with weights multiplied (a `weighted`
 * inside a `weighted` flattens), so `value` is always Σ weight × value. A weight that is not a finite number makes
 * its reward's parts failed (`invalid_value`) rather than the sum NaN, and so does a part whose weight × value (or
 * the sum) overflows. The rewards' sandbox commands run one at a time: they share the step's workspace, and one
 * command's writes (`pytest` caches, build outputs) must not race another's reads; judges still run concurrently.
 *
 * @since 0.2.0
 * @category combinators
 */
export const weighted = <R>(rewards: ReadonlyArray<WeightedReward<R>>, name: string = "weighted"): Reward<R> => ({
  name,
  evaluate: (step) =>
    Effect.gen(function*() {
      // One permit: the commands of this step, whichever reward runs them, take turns in its workspace.
      const permit = yield* Semaphore.make(1)
      const serial: Step = { ...step, run: (command, options) => Semaphore.withPermit(permit, step.run(command, options)) }
      const partsOf = yield* Effect.forEach(rewards, ({ reward, weight }) =>
        Number.isFinite(weight)
          ? Effect.map(reward.evaluate(serial), (scored) => scored.parts.map((part): Part => ({ ...part, weight: part.weight * weight })))
          : Effect.succeed([
            core.failedPart(reward.name, 0, new RewardFailed({
              reward: reward.name,
              reason: "invalid_value",
              message: `the weight of ${reward.name} is ${weight}, not a finite number`
            }))
          ]), { concurrency: "unbounded" })
      return sum(partsOf.flat())
    })
})

/** A part that cannot be summed (its weight, or weight × value, is not finite) made a failed part of weight 0. */
const overflowed = (part: Part, message: string): Part =>
  core.failedPart(part.name, 0, new RewardFailed({ reward: part.name, reason: "invalid_value", message }))

/**
 * The scored result of parts: Σ weight × value, a failed part counting 0. What would make the sum not finite
 * (a weight or a weight × value that overflows, or the sum itself) is a failed part: the record stays storable.
 */
const sum = (parts: ReadonlyArray<Part>): Scored => {
  const checked = parts.map((part) =>
    !Number.isFinite(part.weight)
      ? overflowed(part, `the weight of ${part.name} overflows (${part.weight})`)
      : part.value !== null && !Number.isFinite(part.weight * part.value)
      ? overflowed(part, `${part.name}: weight ${part.weight} × value ${part.value} overflows`)
      : part
  )
  const total = checked.reduce((sofar, part) => sofar + (part.value === null ? 0 : part.weight * part.value), 0)
  if (Number.isFinite(total)) return { value: total, parts: checked }
  return {
    value: 0,
    parts: checked.map((part) => part.value === null ? part : overflowed(part, `the sum of the parts overflows (${total})`))
  }
}

/**
 * Scores a step.
 *
 * @since 0.2.0
 * @category running
 */
export const score = <R>(reward: Reward<R>, step: Step): Effect.Effect<Scored, never, R> => reward.evaluate(step)

// ---------------------------------------------------------------------------------------------------------
// Sandbox built-ins
// ---------------------------------------------------------------------------------------------------------

/**
 * Options of the command rewards.
 *
 * @since 0.2.0
 * @category options
 */
export type CommandOptions = core.CommandOptions

/**
 * 1 when `command` exits with `expect` (default 0) in the step's workspace, else 0 (a timeout too). A command the
 * sandbox refuses or cannot start is a failed part (`sandbox_error`).
 *
 * @since 0.2.0
 * @category built-ins
 */
export const exitCode: (
  command: ReadonlyArray<string>,
  options?: CommandOptions & { readonly expect?: number | undefined }
) => Reward = sandboxRewards.exitCode

/**
 * The tests passed and run by a test runner's output (its last summary: pytest, jest / vitest, unittest), as
 * `testsPass` reads them; undefined without a summary. Colours are ignored; unittest's `expected failures=` are
 * not failures, and of several `Ran N tests` the last counts, with the `FAILED (…)` line that follows it.
 *
 * @since 0.2.0
 * @category parsing
 */
export const testCounts: (output: string) => { readonly passed: number; readonly total: number } | undefined = sandboxRewards.testCounts

/**
 * The share of tests passing when `command` (a test runner) runs in the step's workspace, read from its summary
 * (pytest's `1 failed, 3 passed in 0.1s`, jest / vitest's `Tests: 1 failed, 3 passed`, unittest's `Ran 4 tests` /
 * `FAILED (failures=1)`), looked for on stdout, then on stderr; without a summary, 1 on exit 0 and 0 otherwise —
 * unless the sandbox cut the output (`stdoutTruncated` / `stderrTruncated`): then the summary may have been cut
 * off, and the part fails (`truncated_output`) rather than guess. A timeout scores 0; a command the sandbox
 * refuses is a failed part.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const testsPass: (command: ReadonlyArray<string>, options?: CommandOptions) => Reward = sandboxRewards.testsPass

/**
 * Options of `astGrep`: a `pattern` or a whole ast-grep `rule` object (`{ pattern, inside, has, not, … }`) in a
 * `language`, looked for under `paths` (default the whole workspace).
 *
 * @since 0.2.0
 * @category options
 */
export type AstGrepOptions = sandboxRewards.AstGrepOptions

/**
 * 1 when an `ast-grep` rule matches in the step's workspace, else 0; with `matches: "none"`, the other way round.
 * A `pattern` runs `ast-grep run -p … -l …`, which `ast-grep-ignore` comments do not silence; a `rule` runs
 * `ast-grep scan --inline-rules …`, where they do (ast-grep has no switch to turn them off), so a model can hide a
 * match from a `rule` with `matches: "none"` by writing `// ast-grep-ignore` above it — use a `pattern` where
 * that matters. Either way no project config (`-c /dev/null`, so no `sgconfig.yml` of the workspace's) and no
 * ignore file applies, and hidden files are searched. Matches are read one per line (`--json=stream`); when the
 * sandbox cut the output, the complete lines still count, and none at all is a failed part (`truncated_output`).
 * The sandbox must allow `ast-grep` (its default list does). A rule ast-grep rejects, or output that is not its
 * JSON, is a failed part.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const astGrep: (options: AstGrepOptions) => Reward = sandboxRewards.astGrep

// ---------------------------------------------------------------------------------------------------------
// Answers
// ---------------------------------------------------------------------------------------------------------

/**
 * Options of the answer rewards.
 *
 * @since 0.2.0
 * @category options
 */
export interface AnswerOptions {
  /** The reference (default: the task's `reference`). */
  readonly reference?: string | undefined
  /** How the answer is read from the output (default: `Evaluate.defaultExtractAnswer`, the last `FINAL:`). */
  readonly extract?: ((output: string) => string) | undefined
  /** The part's name (default `exact_answer` / `normalized_answer`). */
  readonly name?: string | undefined
}

const answerReward = (name: string, options: AnswerOptions, compare: (answer: string) => string): Reward =>
  make(name, (step) => {
    const reference = options.reference ?? step.reference
    if (reference === undefined) {
      return Effect.fail(new RewardFailed({
        reward: name,
        reason: "no_reference",
        message: `task ${step.taskId} has no reference, and ${name} was given none`
      }))
    }
    const answer = (options.extract ?? defaultExtractAnswer)(step.output)
    return Effect.succeed(answer !== "" && compare(answer) === compare(reference) ? 1 : 0)
  })

/**
 * 1 when the step's answer (trimmed) is the reference (trimmed), else 0. No reference is a failed part.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const exactAnswer = (options: AnswerOptions = {}): Reward =>
  answerReward(options.name ?? "exact_answer", options, (text) => text.trim())

/**
 * 1 when the step's answer equals the reference once both are normalized as `Evaluate` compares them
 * (whitespace, `$…$`, `\boxed{…}`, a trailing period, `42.0` = `42`, `1,000` = `1000`), else 0.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const normalizedAnswer = (options: AnswerOptions = {}): Reward =>
  answerReward(options.name ?? "normalized_answer", options, normalizeAnswer)

// ---------------------------------------------------------------------------------------------------------
// A model's judgement
// ---------------------------------------------------------------------------------------------------------

/**
 * Options of `judged`.
 *
 * @since 0.2.0
 * @category options
 */
export type JudgedOptions = judge.JudgedOptions

/**
 * A judge's score from its reply: the LAST JSON object with a `score` key (`{"score": …}`; fences, prose and
 * objects quoted from the response before it tolerated), else a `score: 0.8` pattern (`7/10`, `70%`) — the score
 * parser the judges of `Ensemble` and `ActorCritic` use. Never clamped: a score outside [0, 1] without a scale is
 * no score.
 *
 * @since 0.2.0
 * @category parsing
 */
export const parseJudgeScore: (text: string) => Result.Result<number, string> = judge.parseJudgeScore

/**
 * A model's score in [0, 1] of the step's output against `rubric`, asked of the `Model` in the reward's context
 * (give the judge its own with `Layer.provide(judgeModel)` on `layer(…)`), at temperature 0, read with
 * `parseJudgeScore`. The task and the response are marked as data with a random nonce. A failed call
 * (`model_error`) or a reply without a score (`unparsed_score`) is a failed part.
 * The call is the reward's, not the step's: it is not in the step's budget or journal.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const judged: (options: JudgedOptions) => Reward<Model.Model> = judge.judged

// ---------------------------------------------------------------------------------------------------------
// Episodes
// ---------------------------------------------------------------------------------------------------------

/**
 * How an episode's reward is made of its steps' rewards: their `sum` (the default), `mean`, or the `last` step's
 * (an outcome reward).
 *
 * @since 0.2.0
 * @category models
 */
export type Aggregate = "sum" | "mean" | "last"

/**
 * The reward of an episode from its steps' records as stored: one part per step (`step_<n>`, the step's `reward`,
 * weight 1, 1/n or, for `last`, only the last). A step stored without a reward is a failed part (`invalid_value`).
 * The actor loop's `run` answers this for each task it runs (today one step per task); an episode runner calls it
 * on the records of its steps.
 *
 * @since 0.2.0
 * @category running
 */
export const episode = (
  records: ReadonlyArray<Pick<TrajectoryStore.TrajectoryRecord, "step" | "reward">>,
  aggregate: Aggregate = "sum"
): Scored => {
  const counted = aggregate === "last" ? records.slice(-1) : records
  const weight = aggregate === "mean" ? 1 / Math.max(1, counted.length) : 1
  return sum(counted.map((record): Part => {
    const name = `step_${record.step}`
    return record.reward === null
      ? core.failedPart(name, weight, new RewardFailed({ reward: name, reason: "invalid_value", message: `step ${record.step} has no reward` }))
      : { name, value: record.reward, weight }
  }))
}

// ---------------------------------------------------------------------------------------------------------
// The service
// ---------------------------------------------------------------------------------------------------------

/**
 * The reward the actor loop scores its steps with. Optional: without it, records keep `reward: null`.
 *
 * @since 0.2.0
 * @category services
 */
export class CurrentReward extends Context.Service<CurrentReward, Reward>()("valet/Reward") {}

/**
 * The `CurrentReward` service: `reward`, its requirements (a judge's `Model`) taken from the layer's context when
 * it is built, so a judge's model is not the actor's unless you give it that one.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = <R>(reward: Reward<R>): Layer.Layer<CurrentReward, never, R> =>
  Layer.effect(
    CurrentReward,
    Effect.map(Effect.context<R>(), (context): Reward => ({
      name: reward.name,
      evaluate: (step) => Effect.provideContext(reward.evaluate(step), context)
    }))
  )

/**
 * A `Runner` for a workspace of a sandbox: what the actor loop gives rewards (diffs are not taken: a reward's
 * command reads the workspace, it does not report on it).
 *
 * @since 0.2.0
 * @category constructors
 */
export const runnerIn = (sandbox: Sandbox.Service, workspace: Effect.Effect<Sandbox.Workspace, Sandbox.SandboxError>): Runner =>
(command, options) =>
  Effect.flatMap(workspace, (ws) =>
    sandbox.run(ws, { command, diff: false, ...(options?.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}) }))

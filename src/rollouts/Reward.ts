/**
 * Rewards for RL rollouts (DESIGN §18). A `Reward` is a value: a name and a way to score one step of a task
 * (`Step`: the task, the model's output, its action's sandbox result, and a way to run commands in the step's
 * workspace). Built-ins:
 * - `exitCode(command)`: 1 when a command exits as expected (0 by default) in the step's workspace, else 0;
 * - `testsPass(command)`: the share of tests passing by the command's summary (`3 passed, 1 failed` → 0.75), 1 on
 *   exit 0 without a summary, 0 on another exit without one;
 * - `astGrep({ language, pattern | rule })`: 1 when an `ast-grep` rule matches in the workspace (or, with
 *   `matches: "none"`, when it does not);
 * - `exactAnswer()` / `normalizedAnswer()`: 1 when the answer (`FINAL:` as `Evaluate` reads it) equals the task's
 *   `reference` (or one given), as is or normalized as `Evaluate` and voting normalize (`42.0` = `42`);
 * - `judged({ rubric })`: a model's score in [0, 1], read with the score parser the judges use
 *   (`{"score": 0.8}`, `score: 7/10`).
 *
 * `weighted([...])` sums rewards with weights; `make(name, score)` makes one of your own. Scoring never fails: a
 * reward that cannot score (its command is refused, no reference, a judge's reply without a score) is a part whose
 * `value` is null and whose `error` says why (`RewardFailed`), counting 0 in the sum — the step and its episode are
 * kept. A result is `{ value, parts }`; the actor loop stores `value` in the trajectory record's `reward` and the
 * parts in `reward_parts`.
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
import { Context, Effect, Layer, Result, Schema } from "effect"
import { decodeJson, normalizeAnswer, parseScore, preview, unitScore } from "../core/internal/parse.js"
import * as Model from "../core/Model.js"
import * as Sandbox from "../environment/Sandbox.js"
import * as TrajectoryStore from "../environment/TrajectoryStore.js"
import { defaultExtractAnswer } from "./Evaluate.js"

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
 * - `invalid_value`: a score or weight that is not a finite number.
 *
 * @since 0.2.0
 * @category models
 */
export const FailureReason = Schema.Literals([
  "sandbox_error",
  "no_reference",
  "unparsed_score",
  "model_error",
  "invalid_output",
  "invalid_value"
])
/**
 * Why a reward could not score a step.
 *
 * @since 0.2.0
 * @category models
 */
export type FailureReason = typeof FailureReason.Type

/**
 * A reward could not score a step: `reward` names it, `reason` says what kind of failure, `message` what exactly.
 * Recorded in its part (`error`), never the step's failure.
 *
 * @since 0.2.0
 * @category errors
 */
export class RewardFailed extends Schema.TaggedError<RewardFailed>()("RewardFailed", {
  reward: Schema.String,
  reason: FailureReason,
  message: Schema.String
}) {}

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
export const Scored = Schema.Struct({ value: Schema.Finite, parts: Schema.Array(Part) })
/**
 * A scored step.
 *
 * @since 0.2.0
 * @category models
 */
export type Scored = typeof Scored.Type

/**
 * Runs a command in the step's workspace (the one its action ran in, or a fresh one seeded with the task's files).
 *
 * @since 0.2.0
 * @category models
 */
export type Runner = (
  command: ReadonlyArray<string>,
  options?: { readonly timeoutMs?: number | undefined }
) => Effect.Effect<Sandbox.SandboxResult, Sandbox.SandboxError>

/**
 * What a reward scores: one step of a task.
 *
 * @since 0.2.0
 * @category models
 */
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

/**
 * A reward: a name and how it scores a step. `evaluate` never fails: what could not be scored is a part with an
 * `error`. Make one with `make`, a built-in or `weighted`.
 *
 * @since 0.2.0
 * @category models
 */
export interface Reward<R = never> {
  readonly name: string
  readonly evaluate: (step: Step) => Effect.Effect<Scored, never, R>
}

// ---------------------------------------------------------------------------------------------------------
// Constructors and combinators
// ---------------------------------------------------------------------------------------------------------

const failedPart = (name: string, weight: number, error: RewardFailed): Part => ({
  name,
  value: null,
  weight,
  error: { reason: error.reason, message: error.message }
})

/**
 * A reward of your own: `score` answers a number (any finite one; the built-ins answer [0, 1]) or fails with
 * `RewardFailed`, which is recorded in the part.
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
export const make = <R = never>(
  name: string,
  score: (step: Step) => Effect.Effect<number, RewardFailed, R>
): Reward<R> => ({
  name,
  evaluate: (step) =>
    Effect.suspend(() => score(step)).pipe(
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
 * its reward's parts failed (`invalid_value`) rather than the sum NaN.
 *
 * @since 0.2.0
 * @category combinators
 */
export const weighted = <R>(rewards: ReadonlyArray<WeightedReward<R>>, name: string = "weighted"): Reward<R> => ({
  name,
  evaluate: (step) =>
    Effect.map(
      Effect.forEach(rewards, ({ reward, weight }) =>
        Number.isFinite(weight)
          ? Effect.map(reward.evaluate(step), (scored) => scored.parts.map((part): Part => ({ ...part, weight: part.weight * weight })))
          : Effect.succeed([
            failedPart(reward.name, 0, new RewardFailed({
              reward: reward.name,
              reason: "invalid_value",
              message: `the weight of ${reward.name} is ${weight}, not a finite number`
            }))
          ]), { concurrency: "unbounded" }),
      (partsOf) => sum(partsOf.flat())
    )
})

/** The scored result of parts: Σ weight × value, a failed part counting 0. */
const sum = (parts: ReadonlyArray<Part>): Scored => ({
  value: parts.reduce((total, part) => total + (part.value === null ? 0 : part.weight * part.value), 0),
  parts
})

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
export interface CommandOptions {
  /** The part's name (default: the command, joined). */
  readonly name?: string | undefined
  /** Timeout of the command (default: the sandbox's). A command that times out scores 0. */
  readonly timeoutMs?: number | undefined
}

/** Runs the reward's command; a command the sandbox could not run at all is the reward's failure. */
const runCommand = (name: string, step: Step, command: ReadonlyArray<string>, options: CommandOptions) =>
  step.run(command, options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}).pipe(
    Effect.mapError((error) => new RewardFailed({ reward: name, reason: "sandbox_error", message: `${error.reason}: ${error.message}` })),
    Effect.flatMap((result) =>
      // Refused, not a command, could not start: the reward is misconfigured, not the model wrong.
      result.error !== undefined && result.error !== "timeout"
        ? Effect.fail(new RewardFailed({
          reward: name,
          reason: "sandbox_error",
          // The sandbox's stderr already names the kind (`not_allowed: bash resolves to …`).
          message: result.stderr.startsWith(`${result.error}:`)
            ? result.stderr.trim()
            : `${result.error}: ${result.stderr.trim() || `exit ${result.exitCode}`}`
        }))
        : Effect.succeed(result)
    )
  )

/**
 * 1 when `command` exits with `expect` (default 0) in the step's workspace, else 0 (a timeout too). A command the
 * sandbox refuses or cannot start is a failed part (`sandbox_error`).
 *
 * @since 0.2.0
 * @category built-ins
 */
export const exitCode = (
  command: ReadonlyArray<string>,
  options: CommandOptions & { readonly expect?: number | undefined } = {}
): Reward => {
  const name = options.name ?? `exit_code(${command.join(" ")})`
  return make(name, (step) =>
    Effect.map(runCommand(name, step, command, options), (result) =>
      !result.timedOut && result.exitCode === (options.expect ?? 0) ? 1 : 0))
}

// `3 passed`, `1 failed`, `2 errors` (pytest), `Tests: 1 failed, 3 passed` (jest / vitest), `FAILED (failures=1, errors=2)` + `Ran 4 tests` (unittest).
const countOf = (text: string, word: RegExp): number => {
  let total = 0
  for (const match of text.matchAll(word)) total += Number(match[1])
  return total
}

/**
 * The tests passed and run by a test runner's output (its last summary: pytest, jest / vitest, unittest), as
 * `testsPass` reads them; undefined without a summary.
 *
 * @since 0.2.0
 * @category parsing
 */
export const testCounts = (output: string): { readonly passed: number; readonly total: number } | undefined => {
  // The summary is at the end: a bounded tail keeps this linear in a huge log.
  const tail = output.slice(-16 * 1024)
  const ran = /\bRan (\d+) tests?\b/.exec(tail)
  if (ran !== null) {
    const total = Number(ran[1])
    const failed = countOf(tail, /\b(?:failures|errors)=(\d+)/g)
    return { passed: Math.max(0, total - failed), total }
  }
  const lines = tail.split("\n").filter((line) => /\b\d+ passed\b|\b\d+ failed\b/.test(line))
  const summary = lines.at(-1)
  if (summary === undefined) return undefined
  const passed = countOf(summary, /\b(\d+) passed\b/g)
  const failed = countOf(summary, /\b(\d+) (?:failed|errors?)\b/g)
  return passed + failed === 0 ? undefined : { passed, total: passed + failed }
}

/**
 * The share of tests passing when `command` (a test runner) runs in the step's workspace, read from its summary
 * (pytest's `1 failed, 3 passed in 0.1s`, jest / vitest's `Tests: 1 failed, 3 passed`, unittest's `Ran 4 tests` /
 * `FAILED (failures=1)`); without a summary, 1 on exit 0 and 0 otherwise. A timeout scores 0; a command the
 * sandbox refuses is a failed part.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const testsPass = (command: ReadonlyArray<string>, options: CommandOptions = {}): Reward => {
  const name = options.name ?? `tests_pass(${command.join(" ")})`
  return make(name, (step) =>
    Effect.map(runCommand(name, step, command, options), (result) => {
      if (result.timedOut) return 0
      const counts = testCounts(`${result.stdout}\n${result.stderr}`)
      if (counts === undefined) return result.exitCode === 0 ? 1 : 0
      // Exit 0 with failures counted would be a runner that ignores them: trust the counts.
      return counts.total === 0 ? 0 : counts.passed / counts.total
    }))
}

/**
 * Options of `astGrep`: a `pattern` or a whole ast-grep `rule` object (`{ pattern, inside, has, not, … }`) in a
 * `language`, looked for under `paths` (default the whole workspace).
 *
 * @since 0.2.0
 * @category options
 */
export type AstGrepOptions = CommandOptions & {
  readonly language: string
  readonly paths?: ReadonlyArray<string> | undefined
  /** `any` (default): 1 when the rule matches somewhere; `none`: 1 when it matches nowhere. */
  readonly matches?: "any" | "none" | undefined
} & (
  | { readonly pattern: string; readonly rule?: undefined }
  | { readonly rule: Readonly<Record<string, unknown>>; readonly pattern?: undefined }
)

const AstGrepMatches = Schema.fromJsonString(Schema.Array(Schema.Unknown))

/**
 * 1 when an `ast-grep` rule matches in the step's workspace (`ast-grep scan --inline-rules … --json=compact`),
 * else 0; with `matches: "none"`, the other way round. The sandbox must allow `ast-grep` (its default list does).
 * A rule ast-grep rejects, or output that is not its JSON, is a failed part.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const astGrep = (options: AstGrepOptions): Reward => {
  const rule = { id: "reward", language: options.language, rule: options.rule ?? { pattern: options.pattern } }
  const name = options.name ?? `ast_grep(${options.pattern ?? JSON.stringify(options.rule)})`
  // JSON is YAML: the rule goes inline, as one argument, with no file in the workspace.
  const command = ["ast-grep", "scan", "--inline-rules", JSON.stringify(rule), "--json=compact", ...(options.paths ?? ["."])]
  return make(name, (step) =>
    Effect.flatMap(runCommand(name, step, command, options), (result) => {
      if (result.timedOut) return Effect.succeed(0)
      const invalid = (message: string) => Effect.fail(new RewardFailed({ reward: name, reason: "invalid_output", message }))
      if (result.exitCode !== 0) return invalid(`ast-grep exited ${result.exitCode}: ${preview(result.stderr)}`)
      const decoded = Schema.decodeUnknownResult(AstGrepMatches)(result.stdout)
      if (Result.isFailure(decoded)) return invalid(`ast-grep's output is not a JSON array: ${preview(result.stdout)}`)
      const matched = decoded.success.length > 0
      return Effect.succeed(matched === ((options.matches ?? "any") === "any") ? 1 : 0)
    }))
}

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
export interface JudgedOptions {
  /** What a good response is: the judge is asked to score the response against it. */
  readonly rubric: string
  /** The part's name (default `judged`). */
  readonly name?: string | undefined
  /** Output tokens of the judge's reply at most (default 512). */
  readonly maxTokens?: number | undefined
}

// Checked by `unitScore`: a number in [0, 1], or a string such as "0.7", "7/10" or "70%".
const JudgeReply = Schema.Struct({ score: Schema.optional(Schema.NullOr(Schema.Union([Schema.Number, Schema.String]))) })

/**
 * A judge's score from its reply: JSON `{"score": …}` (fences and prose tolerated), else a `score: 0.8` pattern
 * (`7/10`, `70%`) — the parsers the judges of `Ensemble` and `ActorCritic` use. Never clamped: a score outside
 * [0, 1] without a scale is no score.
 *
 * @since 0.2.0
 * @category parsing
 */
export const parseJudgeScore = (text: string): Result.Result<number, string> => {
  const json = decodeJson(JudgeReply, text, { expect: "object" })
  if (Result.isSuccess(json)) return unitScore(json.success.score, "score")
  return parseScore(text)
}

/** The judge's prompt. */
const judgePrompt = (rubric: string, step: Step): string =>
  [
    `Score a response to a task against this rubric, from 0 (fails it) to 1 (meets it fully).`,
    ``,
    `Rubric:`,
    rubric,
    ``,
    `Task:`,
    step.prompt,
    ...(step.reference !== undefined ? [``, `Reference answer:`, step.reference] : []),
    ``,
    `Response:`,
    step.output,
    ``,
    `Reply with JSON only: {"score": <a number from 0 to 1>}`
  ].join("\n")

/**
 * A model's score in [0, 1] of the step's output against `rubric`, asked of the `Model` in the reward's context
 * (give the judge its own with `Layer.provide(judgeModel)` on `layer(…)`), at temperature 0, read with
 * `parseJudgeScore`. A failed call (`model_error`) or a reply without a score (`unparsed_score`) is a failed part.
 * The call is the reward's, not the step's: it is not in the step's budget or journal.
 *
 * @since 0.2.0
 * @category built-ins
 */
export const judged = (options: JudgedOptions): Reward<Model.Model> => {
  const name = options.name ?? "judged"
  return make(name, (step) =>
    Model.generate({
      messages: [Model.user(judgePrompt(options.rubric, step))],
      temperature: 0,
      maxTokens: options.maxTokens ?? 512
    }).pipe(
      Effect.mapError((error) => new RewardFailed({ reward: name, reason: "model_error", message: `${error._tag}: ${error.message}` })),
      Effect.flatMap((response) => {
        const text = response.choices[0]?.text ?? ""
        return Result.match(parseJudgeScore(text), {
          onSuccess: Effect.succeed,
          onFailure: (why) => Effect.fail(new RewardFailed({ reward: name, reason: "unparsed_score", message: why }))
        })
      })
    ))
}

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
      ? failedPart(name, weight, new RewardFailed({ reward: name, reason: "invalid_value", message: `step ${record.step} has no reward` }))
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

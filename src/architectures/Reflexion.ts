/**
 * Reflexion: attempt the task, have an evaluator score the attempt (`score: <n>` on its first line), stop when
 * the score reaches `threshold`; otherwise a reflector writes a one-sentence lesson, which is stored in the
 * `LessonStore` and shown to the next attempt. Each attempt starts from a fresh context: it sees the task and
 * the lessons, not the earlier attempts. A round is one attempt, its evaluation and its lesson: `maxRounds` of them
 * at most.
 *
 * Lessons are kept under a key — `lessonKey`, by default the agent's name and a hash of the task — so a
 * `LessonStore.layerSql` / `layerSqlite` in context carries them to later runs of the same task (the first
 * attempt then starts with them). Without a `LessonStore` in context the lessons live for the run only.
 *
 * Every role is a sub-agent: `<parent>__attempt_<n>` (the running agent itself — instructions, tools, model —
 * with the `base` architecture, ReAct by default), `<parent>__evaluator_<n>`, `<parent>__reflector_<n>`. An
 * attempt that stops early at its own limit (e.g. `max_turns_exceeded`) is evaluated like any other (the one
 * recovery Reflexion documents); an evaluator or reflector that stops early ends the run interrupted with
 * `evaluator:attempt_<n>:<reason>` or `reflector:attempt_<n>:<reason>`, and a spent budget with `budget:<limit>`,
 * keeping the best attempt so far (before any is scored, the first attempt); a role that fails: the run fails with
 * that role's `SubAgentFailed` (the rule of every architecture: a failure fails the run, a limit interrupts it).
 * When no attempt reaches the threshold the output is the best-scored attempt (the later one on a tie).
 *
 * An evaluation whose score cannot be read — none, or one that is not in [0, 1] (`score: 7` with no scale, `5/0`)
 * — scores 0 and the run emits `reflexion.parse_error` saying why: never clamped to 1, so it cannot meet the
 * threshold by accident.
 *
 * Events: `reflexion.attempt_started`, `.evaluated`, `.parse_error` (`{attempt, what: "evaluation", error, text}`),
 * `.lesson_produced`, `.threshold_met`, `.max_attempts_reached`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Agent, LessonStore, Reflexion, ScriptedModel } from "valet"
 *
 * const riddler = Agent.make({
 *   name: "riddler",
 *   instructions: "Answer riddles in one sentence.",
 *   architecture: Reflexion.makeUnsafe({ maxRounds: 3, threshold: 0.8 })
 * })
 * const model = ScriptedModel.layer([
 *   "A door.", // attempt 1
 *   "score: 0.1\nDoors have locks.", // the evaluator
 *   "Read 'keys' in its other meanings.", // the reflector: the lesson shown to attempt 2
 *   "A piano.", // attempt 2
 *   "score: 0.95" // the evaluator: the threshold is met
 * ])
 * Effect.runPromise(
 *   Agent.run(riddler, "What has keys but opens no locks?").pipe(
 *     Effect.provide(model),
 *     // Lessons outlive the run with LessonStore.layerSqlite({ filename: "data/lessons.sqlite3" }).
 *     Effect.provide(LessonStore.layerMemory)
 *   )
 * ).then((result) => console.log(result.output, result.metadata.lessons)) // "A piano." [ "Read 'keys' in its other meanings." ]
 * ```
 *
 * @since 0.1.0
 */
import { Effect, Option, Result, Schema } from "effect"
import { createHash } from "node:crypto"
import { ArchitectureFailed } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
// Not in the toolkit: the bound `parseLesson` shares with the other line scanners.
import { maxLineScanChars } from "../core/internal/parse.js"
import type * as Model from "../core/Model.js"
import * as LessonStore from "../environment/LessonStore.js"
import * as ReAct from "./ReAct.js"

/**
 * The evaluator's default prompt; placeholders `{task}`, `{output}`.
 *
 * @since 0.1.0
 * @category prompts
 */
export const defaultEvaluatorPrompt = `Evaluate how well the answer accomplishes the task. On the first line write "score: <a number \
from 0 to 1>", where 1 means correct and complete. Then explain briefly what is wrong or missing.

Task:
{task}

Answer:
{output}`

/**
 * The reflector's default prompt; placeholders `{task}`, `{output}`, `{evaluation}`, `{score}`, `{lessons}`.
 *
 * @since 0.1.0
 * @category prompts
 */
export const defaultReflectorPrompt = `An attempt at the task below fell short. Write one sentence: a lesson that will make the \
next attempt better — what to do differently, not the answer itself.

Task:
{task}

Attempt:
{output}

Evaluation (score {score}):
{evaluation}`

/**
 * How an attempt sees the lessons; placeholders `{task}`, `{lessons}`. Used only when there are lessons.
 *
 * @since 0.1.0
 * @category prompts
 */
export const defaultAttemptPrompt = `{task}

Lessons from earlier attempts at this task:
{lessons}`

/**
 * The default lesson key of a task run by an agent: `<agent name>:<first 16 hex digits of the task's SHA-256>`.
 *
 * @since 0.1.0
 * @category lessons
 */
export const lessonKeyFor = (agentName: string, task: string): string =>
  `${agentName}:${createHash("sha256").update(task).digest("hex").slice(0, 16)}`

/**
 * An evaluator's score, and why there is none when it could not be read (the score is then 0).
 *
 * @since 0.1.0
 * @category parsing
 */
export interface Evaluation {
  readonly score: number
  readonly error?: string | undefined
}

/**
 * An evaluator's score: `score: <n>` (or `score=…`, `8/10`, `7 out of 10`, `85%`), else the first number in
 * the text with a decimal point or a scale. None, or one outside [0, 1] (`score: 7`, `5/0`): score 0 and `error`
 * saying why — never clamped. Reads the first 64 KiB in linear time.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseEvaluation = (text: string): Evaluation => {
  const score = Architecture.parse.score(text, { fallbackToAnyNumber: true })
  return Result.isSuccess(score) ? { score: score.success } : { score: 0, error: score.failure }
}

const maxLessonChars = 500

// `Lesson:`, `**Lesson 2:**`, … at the start of the line. Linear: anchored, and each optional group starts with
// something the quantifier before it cannot match, so a long run of blanks is crossed once, not once per split.
const lessonLabel = /^(?:\*\*)?lesson(?:\s*\d+)?\s*:(?:\s*\*\*)?\s*/i
const quoted = /^["'“](.*)["'”]$/

/**
 * A reflector's lesson: its first non-empty line without a `Lesson:` label or surrounding quotes, cut to 500
 * characters; `undefined` when it wrote nothing. Reads the first 64 KiB (`maxLineScanChars`).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseLesson = (text: string): string | undefined => {
  const scanned = text.length > maxLineScanChars ? text.slice(0, maxLineScanChars) : text
  let line: string | undefined
  for (let start = 0; start <= scanned.length;) {
    const end = scanned.indexOf("\n", start)
    const candidate = scanned.slice(start, end === -1 ? scanned.length : end).trim()
    if (candidate !== "") {
      line = candidate
      break
    }
    if (end === -1) break
    start = end + 1
  }
  if (line === undefined) return undefined
  const lesson = line.replace(lessonLabel, "").replace(quoted, "$1").trim()
  if (lesson === "") return undefined
  return lesson.length <= maxLessonChars ? lesson : `${lesson.slice(0, maxLessonChars - 1)}…`
}

/**
 * One attempt of a run, as `RunResult.metadata.attempts` lists it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Attempt {
  readonly attempt: number
  readonly output: string
  readonly score: number
  readonly evaluation: string
  /** Set when the attempt stopped early (its output is what it had). */
  readonly interrupted?: string | undefined
  readonly lesson?: string | undefined
}

const { agent, architecture: architectureOption, int, optional, template, unit, withDefault } = Architecture.option

/**
 * Reflexion, declared once: its name, options and program; `make`, `makeUnsafe`, `valet.yaml`'s and the CLI's
 * registries read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "reflexion",
  title: "Reflexion",
  description: "attempts scored by an evaluator, with a reflector's lessons shown to the next attempt",
  options: {
    /** How each attempt runs: the running agent with this architecture. Default ReAct. */
    base: optional(architectureOption),
    /** Scores attempts. Default: a plain agent on the run's model. */
    evaluator: optional(agent),
    /** Writes lessons. Default: a plain agent on the run's model. */
    reflector: optional(agent),
    /** Rounds (attempts, each scored and reflected on) at most (≥ 1, default 3). */
    maxRounds: int(1).pipe(withDefault(3)),
    /** A score at or above this ends the run (in [0, 1], default 0.8). */
    threshold: unit.pipe(withDefault(0.8)),
    /** The most recent lessons shown to an attempt (≥ 1, default 5). */
    maxLessons: int(1).pipe(withDefault(5)),
    /** The key lessons are stored under. Default: `<agent name>:<first 16 hex digits of the task's SHA-256>`. */
    lessonKey: optional(Schema.Trimmed.check(Schema.isNonEmpty())),
    /** The evaluator's prompt template (`{task}`, `{output}`). */
    evaluatorPrompt: template(["task", "output"]).pipe(withDefault(defaultEvaluatorPrompt)),
    /** The reflector's prompt template (`{task}`, `{output}`, `{evaluation}`, `{score}`, `{lessons}`). */
    reflectorPrompt: template(["task", "output", "evaluation", "score", "lessons"]).pipe(withDefault(defaultReflectorPrompt)),
    /** How an attempt sees the lessons (`{task}`, `{lessons}`). */
    attemptPrompt: template(["task", "lessons"]).pipe(withDefault(defaultAttemptPrompt))
  },
  agentOptions: ["evaluator", "reflector"],
  deprecated: { maxAttempts: "maxRounds" },
  program: (input, options) =>
    Effect.gen(function*() {
      const run = yield* Architecture.CurrentRun
      const base = Architecture.withArchitecture(input.agent, options.base ?? ReAct.architecture)
      const evaluator = options.evaluator ?? Architecture.plainAgent("evaluator")
      const reflector = options.reflector ?? Architecture.plainAgent("reflector")
      const provided = yield* Effect.serviceOption(LessonStore.LessonStore)
      const store = Option.isSome(provided) ? provided.value : yield* LessonStore.makeMemory
      const key = options.lessonKey ?? lessonKeyFor(input.agent.name, input.prompt)
      const storeFailed = (error: LessonStore.LessonStoreError) =>
        new ArchitectureFailed({ architecture: run.architecture, message: `the lesson store failed to ${error.operation}: ${error.message}` })

      const attempts: Array<Attempt> = []
      const learned: Array<string> = []
      let best: Attempt | undefined
      const metadata = (thresholdMet: boolean) => ({
        attempts,
        bestAttempt: best?.attempt,
        bestScore: best?.score,
        thresholdMet,
        lessonKey: key,
        lessons: learned
      })
      yield* Architecture.setMetadata(() => metadata(false))

      for (let n = 1; n <= options.maxRounds; n++) {
        const lessons = (yield* store.list(key, { limit: options.maxLessons }).pipe(Effect.mapError(storeFailed)))
          .map((lesson) => lesson.lesson)
        yield* Architecture.progress("reflexion.attempt_started", { attempt: n, lessons: lessons.length })
        const prompt = lessons.length === 0
          ? input.prompt
          : Architecture.fill(options.attemptPrompt, { task: input.prompt, lessons: Architecture.bulleted(lessons) })
        // `roleResult`, not `role`: an attempt that stops at its own limit is evaluated like any other.
        const ran = yield* Architecture.roleResult(base, prompt, { role: "attempt", index: n })
        if (ran._tag === "Failed") return yield* ran.error
        if (ran._tag === "Interrupted" && Architecture.isBudgetStop(ran.reason)) {
          return yield* new Architecture.RoleStopped({ reason: ran.reason })
        }
        const output = ran.result.output
        // Before any attempt is scored, the first one is the best there is (not an evaluator's partial text).
        if (best === undefined) yield* Architecture.setOutput(output)

        const judged = yield* Architecture.role(
          evaluator,
          Architecture.fill(options.evaluatorPrompt, { task: input.prompt, output }),
          { role: "evaluator", index: n, label: `evaluator:attempt_${n}` }
        )
        const evaluation = judged.output
        const evaluated = parseEvaluation(evaluation)
        const score = evaluated.score
        let attempt: Attempt = {
          attempt: n,
          output,
          score,
          evaluation,
          ...(ran._tag === "Interrupted" ? { interrupted: ran.reason } : {})
        }
        attempts.push(attempt)
        if (best === undefined || score >= best.score) {
          best = attempt
          yield* Architecture.setOutput(output)
        }
        yield* Architecture.progress("reflexion.evaluated", { attempt: n, score, evaluation })
        if (evaluated.error !== undefined) {
          yield* Architecture.progress("reflexion.parse_error", {
            attempt: n,
            what: "evaluation",
            error: evaluated.error,
            text: Architecture.parse.preview(evaluation)
          })
        }
        if (score >= options.threshold) {
          yield* Architecture.progress("reflexion.threshold_met", { attempt: n, score })
          return { output, metadata: metadata(true) }
        }
        if (n === options.maxRounds) break

        const reflected = yield* Architecture.role(
          reflector,
          Architecture.fill(options.reflectorPrompt, {
            task: input.prompt,
            output,
            evaluation,
            score: String(score),
            lessons: Architecture.bulleted(lessons)
          }),
          { role: "reflector", index: n, label: `reflector:attempt_${n}` }
        )
        const lesson = parseLesson(reflected.output)
        if (lesson !== undefined) {
          yield* store.add(key, lesson).pipe(Effect.mapError(storeFailed))
          learned.push(lesson)
          attempt = { ...attempt, lesson }
          attempts[attempts.length - 1] = attempt
          if (best.attempt === n) best = attempt
          yield* Architecture.progress("reflexion.lesson_produced", { attempt: n, lesson })
        }
      }
      yield* Architecture.progress("reflexion.max_attempts_reached", {
        attempts: options.maxRounds,
        best_attempt: best?.attempt,
        best_score: best?.score
      })
      return { output: best?.output ?? "", metadata: metadata(false) }
    })
})

/**
 * The architecture's name, as `RunStarted.architecture` reports it.
 *
 * @since 0.1.0
 * @category definition
 */
export const name = definition.name

/**
 * The options of Reflexion (`maxAttempts` is still read, as `maxRounds`).
 *
 * @since 0.1.0
 * @category constructors
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * Reflexion with options, checked here: `maxRounds: 0`, a threshold outside [0, 1] or a template with an unknown
 * placeholder fail with `InvalidOptions`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = definition.make

/**
 * `make` for a module-level value: the architecture, or the `InvalidOptions` thrown.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeUnsafe = definition.makeUnsafe

/**
 * Reflexion with its defaults: a ReAct base, three rounds, threshold 0.8.
 *
 * @since 0.1.0
 * @category constructors
 */
export const architecture: Architecture.Architecture<Model.Model> = definition.makeUnsafe()

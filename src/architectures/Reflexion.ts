/**
 * Reflexion: attempt the task, have an evaluator score the attempt (`score: <n>` on its first line), stop when
 * the score reaches `threshold`; otherwise a reflector writes a one-sentence lesson, which is stored in the
 * `LessonStore` and shown to the next attempt. Each attempt starts from a fresh context: it sees the task and
 * the lessons, not the earlier attempts.
 *
 * Lessons are kept under a key — `lessonKey`, by default the agent's name and a hash of the task — so a
 * `LessonStore.layerSql` / `layerSqlite` in context carries them to later runs of the same task (the first
 * attempt then starts with them). Without a `LessonStore` in context the lessons live for the run only.
 *
 * Every role is a sub-agent: `<parent>__attempt_<n>` (the running agent itself — instructions, tools, model —
 * with the `base` architecture, ReAct by default), `<parent>__evaluator_<n>`, `<parent>__reflector_<n>`. An
 * attempt that stops early (e.g. `max_turns_exceeded`) is evaluated like any other; an evaluator or reflector that
 * stops early ends the run interrupted with `evaluator:attempt_<n>:<reason>` or `reflector:attempt_<n>:<reason>`,
 * and a spent budget with `budget:<limit>`, keeping the best attempt so far; a role that fails: the run fails with that role's `SubAgentFailed` (the rule of every architecture: a failure fails the run, a limit interrupts it).
 * When no attempt reaches the threshold the output is the best-scored attempt (the later one on a tie).
 *
 * An evaluation whose score cannot be read — none, or one that is not in [0, 1] (`score: 7` with no scale, `5/0`)
 * — scores 0 and the run emits `reflexion.parse_error` saying why: never clamped to 1, so it cannot meet the
 * threshold by accident.
 *
 * Events: `reflexion.attempt_started`, `.evaluated`, `.parse_error` (`{attempt, what: "evaluation", error, text}`),
 * `.lesson_produced`, `.threshold_met`, `.max_attempts_reached`.
 *
 * @since 0.1.0
 */
import { Effect, Option, Result, Schema } from "effect"
import { createHash } from "node:crypto"
import type * as Agent from "../core/Agent.js"
import { ArchitectureFailed, type InvalidOptions } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Opts from "../core/internal/options.js"
import { maxLineScanChars, parseScore, preview, yieldBeforeReading } from "../core/internal/parse.js"
import * as Roles from "../core/internal/roles.js"
import * as Template from "../core/internal/template.js"
import * as LessonStore from "../environment/LessonStore.js"
import type * as Model from "../core/Model.js"
import * as ReAct from "./ReAct.js"

/** The architecture's name, as `RunStarted.architecture` reports it. */
export const name = "reflexion"

/** The evaluator's default prompt; placeholders `{prompt}`, `{output}`. */
export const defaultEvaluatorPrompt = `Evaluate how well the answer accomplishes the task. On the first line write "score: <a number \
from 0 to 1>", where 1 means correct and complete. Then explain briefly what is wrong or missing.

Task:
{prompt}

Answer:
{output}`

/** The reflector's default prompt; placeholders `{prompt}`, `{output}`, `{evaluation}`, `{score}`, `{lessons}`. */
export const defaultReflectorPrompt = `An attempt at the task below fell short. Write one sentence: a lesson that will make the \
next attempt better — what to do differently, not the answer itself.

Task:
{prompt}

Attempt:
{output}

Evaluation (score {score}):
{evaluation}`

/** How an attempt sees the lessons; placeholders `{prompt}`, `{lessons}`. Used only when there are lessons. */
export const defaultAttemptPrompt = `{prompt}

Lessons from earlier attempts at this task:
{lessons}`

/** The options of Reflexion. */
export interface Options<RB = Model.Model, RE = never, RR = never> {
  /** How each attempt runs: the running agent with this architecture. Default ReAct. */
  readonly base?: Architecture.Architecture<RB> | undefined
  /** Scores attempts. Default: a plain agent on the run's model. */
  readonly evaluator?: Agent.Agent<RE> | undefined
  /** Writes lessons. Default: a plain agent on the run's model. */
  readonly reflector?: Agent.Agent<RR> | undefined
  /** Attempts at most (≥ 1, default 3). */
  readonly maxAttempts?: number | undefined
  /** A score at or above this ends the run (in [0, 1], default 0.8). */
  readonly threshold?: number | undefined
  /** The most recent lessons shown to an attempt (≥ 1, default 5). */
  readonly maxLessons?: number | undefined
  /** The key lessons are stored under. Default: `<agent name>:<first 16 hex digits of the task's SHA-256>`. */
  readonly lessonKey?: string | undefined
  /** `{prompt}`, `{output}`. */
  readonly evaluatorPrompt?: string | undefined
  /** `{prompt}`, `{output}`, `{evaluation}`, `{score}`, `{lessons}`. */
  readonly reflectorPrompt?: string | undefined
  /** `{prompt}`, `{lessons}`. */
  readonly attemptPrompt?: string | undefined
}

const OptionsSchema = Schema.Struct({
  base: Schema.optional(Opts.ArchitectureSchema),
  evaluator: Schema.optional(Opts.AgentSchema),
  reflector: Schema.optional(Opts.AgentSchema),
  maxAttempts: Opts.IntAtLeast(1).pipe(Opts.withDefault(3)),
  threshold: Opts.UnitInterval.pipe(Opts.withDefault(0.8)),
  maxLessons: Opts.IntAtLeast(1).pipe(Opts.withDefault(5)),
  lessonKey: Schema.optional(Schema.Trimmed.check(Schema.isNonEmpty())),
  evaluatorPrompt: Template.Template(["prompt", "output"]).pipe(Opts.withDefault(defaultEvaluatorPrompt)),
  reflectorPrompt: Template.Template(["prompt", "output", "evaluation", "score", "lessons"]).pipe(Opts.withDefault(defaultReflectorPrompt)),
  attemptPrompt: Template.Template(["prompt", "lessons"]).pipe(Opts.withDefault(defaultAttemptPrompt))
})
type Config = typeof OptionsSchema.Type
const defaults: Config = Schema.decodeSync(OptionsSchema)({})

/**
 * Reflexion with options, checked here: `maxAttempts: 0`, a threshold outside [0, 1] or a template with an
 * unknown placeholder fail with `InvalidOptions`.
 */
export const make = <RB = Model.Model, RE = never, RR = never>(
  options: Options<RB, RE, RR> = {}
): Effect.Effect<Architecture.Architecture<RB | RE | RR | Model.Model>, InvalidOptions> =>
  Effect.map(
    Opts.decode("Reflexion", OptionsSchema, options),
    (config) => Architecture.make({ name, program: program(config) }) as Architecture.Architecture<RB | RE | RR | Model.Model>
  )

/** `make` for a module-level value: the architecture, or the `InvalidOptions` thrown. */
export const makeUnsafe = <RB = Model.Model, RE = never, RR = never>(options: Options<RB, RE, RR> = {}): Architecture.Architecture<RB | RE | RR | Model.Model> => Opts.runUnsafe(make(options))

/** Reflexion with its defaults: a ReAct base, three attempts, threshold 0.8. */
export const architecture: Architecture.Architecture<Model.Model> = Architecture.make({
  name,
  // A closure: `program` is defined below.
  program: (input) => program(defaults)(input)
}) as Architecture.Architecture<Model.Model>

/** The default lesson key of a task run by an agent. */
export const lessonKeyFor = (agentName: string, prompt: string): string =>
  `${agentName}:${createHash("sha256").update(prompt).digest("hex").slice(0, 16)}`

/** An evaluator's score, and why there is none when it could not be read (the score is then 0). */
export interface Evaluation {
  readonly score: number
  readonly error?: string | undefined
}

/**
 * An evaluator's score: `score: <n>` (or `score=…`, `8/10`, `7 out of 10`, `85%`), else the first number in
 * the text with a decimal point or a scale. None, or one outside [0, 1] (`score: 7`, `5/0`): score 0 and `error`
 * saying why — never clamped. Reads the first `maxLineScanChars` characters in linear time.
 */
export const parseEvaluation = (text: string): Evaluation => {
  const score = parseScore(text, { fallbackToAnyNumber: true })
  return Result.isSuccess(score) ? { score: score.success } : { score: 0, error: score.failure }
}

const maxLessonChars = 500

// `Lesson:`, `**Lesson 2:**`, … at the start of the line. Linear: anchored, and each optional group starts with
// something the quantifier before it cannot match, so a long run of blanks is crossed once, not once per split.
const lessonLabel = /^(?:\*\*)?lesson(?:\s*\d+)?\s*:(?:\s*\*\*)?\s*/i
const quoted = /^["'“](.*)["'”]$/

/**
 * A reflector's lesson: its first non-empty line without a `Lesson:` label or surrounding quotes, cut to 500
 * characters; `undefined` when it wrote nothing. Reads the first `maxLineScanChars` characters.
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

/** One attempt of a run, as `RunResult.metadata.attempts` lists it. */
export interface Attempt {
  readonly attempt: number
  readonly output: string
  readonly score: number
  readonly evaluation: string
  /** Set when the attempt stopped early (its output is what it had). */
  readonly interrupted?: string | undefined
  readonly lesson?: string | undefined
}

const program = (config: Config) => (input: Architecture.Input) =>
  Effect.gen(function*() {
    const base = Roles.withArchitecture(input.agent, config.base ?? ReAct.architecture)
    const evaluator = config.evaluator ?? Roles.plain("evaluator")
    const reflector = config.reflector ?? Roles.plain("reflector")
    const provided = yield* Effect.serviceOption(LessonStore.LessonStore)
    const store = Option.isSome(provided) ? provided.value : yield* LessonStore.makeMemory
    const key = config.lessonKey ?? lessonKeyFor(input.agent.name, input.prompt)
    const storeFailed = (error: LessonStore.LessonStoreError) =>
      new ArchitectureFailed({ architecture: name, message: `the lesson store failed to ${error.operation}: ${error.message}` })

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
    const stop = (reason: string) => ({ output: best?.output ?? "", interrupted: reason, metadata: metadata(false) })

    for (let n = 1; n <= config.maxAttempts; n++) {
      const lessons = (yield* store.list(key, { limit: config.maxLessons }).pipe(Effect.mapError(storeFailed)))
        .map((lesson) => lesson.lesson)
      yield* Architecture.progress("reflexion.attempt_started", { attempt: n, lessons: lessons.length })
      const prompt = lessons.length === 0
        ? input.prompt
        : Template.fill(config.attemptPrompt, { prompt: input.prompt, lessons: Template.bulleted(lessons) })
      const ran = yield* Roles.runOrFail(base, prompt, { role: "attempt", index: n })
      if (ran._tag === "Interrupted" && Roles.isBudget(ran.reason)) return stop(ran.reason)
      const output = ran.result.output

      const judged = yield* Roles.runOrFail(
        evaluator,
        Template.fill(config.evaluatorPrompt, { prompt: input.prompt, output }),
        { role: "evaluator", index: n }
      )
      if (judged._tag !== "Completed") return stop(Roles.stopReason(`evaluator:attempt_${n}`, judged.reason))
      const evaluation = judged.result.output
      yield* yieldBeforeReading(evaluation)
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
          text: preview(evaluation)
        })
      }
      if (score >= config.threshold) {
        yield* Architecture.progress("reflexion.threshold_met", { attempt: n, score })
        return { output, metadata: metadata(true) }
      }
      if (n === config.maxAttempts) break

      const reflected = yield* Roles.runOrFail(
        reflector,
        Template.fill(config.reflectorPrompt, {
          prompt: input.prompt,
          output,
          evaluation,
          score: String(score),
          lessons: Template.bulleted(lessons)
        }),
        { role: "reflector", index: n }
      )
      if (reflected._tag !== "Completed") return stop(Roles.stopReason(`reflector:attempt_${n}`, reflected.reason))
      yield* yieldBeforeReading(reflected.result.output)
      const lesson = parseLesson(reflected.result.output)
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
      attempts: config.maxAttempts,
      best_attempt: best?.attempt,
      best_score: best?.score
    })
    return { output: best?.output ?? "", metadata: metadata(false) }
  })

/**
 * Evaluation over a dataset: any agent (an Ensemble, ToolVote, Self-Refine…) runs on every problem of a JSONL file
 * of `{id, problem, reference}` lines, several problems at once; each problem's result is appended to a JSONL
 * results file as soon as it is known; a summary gives accuracy, calls per problem and accuracy per 100 calls.
 *
 * - `is_correct` compares the normalized answer with the normalized reference (the normalizer voting uses), for
 *   every architecture, traced or not. An architecture's judge's own verdict (`metadata.judgeIsCorrect`, as the
 *   Ensemble reports it) is kept beside it as `judge_is_correct`, never in its place.
 * - A malformed dataset line is reported with its line number and skipped; the rest run.
 * - Resumable: run again with the same results file and the problems already recorded are skipped (a problem whose
 *   record is a failure runs again; the latest record of a problem counts). A last line cut off mid-write is
 *   reported and removed before anything is appended; nothing else in the file is ever rewritten.
 * - References stay out of the runs unless `shareReference` is set: a judge told the reference grades the
 *   answers it is supposed to choose between, which makes the accuracy of a blind run unmeasurable.
 *
 * @since 0.1.0
 */
import { Clock, Effect, FileSystem, Schema, Semaphore } from "effect"
import * as Agent from "../core/Agent.js"
import type { AgentError, InvalidOptions } from "../core/AgentError.js"
import type { RunResult } from "../core/AgentEvent.js"
import * as Budget from "../core/Budget.js"
import * as Jsonl from "./internal/evaluate/jsonl.js"
import * as Opts from "../core/internal/options.js"
import { finalAnswer, normalizeAnswer } from "../core/internal/parse.js"
import * as SummaryInternal from "./internal/evaluate/summary.js"
import * as Reference from "./internal/reference.js"
import { FunctionSchema, withDefault } from "../core/internal/decode.js"

/** One problem of a dataset: `id` (text or number), `problem`, and optionally `reference`. */
export const Problem = Jsonl.Problem
/** One problem of a dataset. */
export type Problem = Jsonl.Problem

/** One problem's result, as a line of the results file (snake case on disk). */
export const ProblemResult = Jsonl.ProblemResult
/** One problem's result. */
export type ProblemResult = Jsonl.ProblemResult

/** A skipped line of the dataset or the results file, with its line number and why. */
export type Issue = Jsonl.Issue

/** Reads a dataset's text: its problems, and the malformed or duplicate lines skipped. */
export const parseDataset: (text: string, path: string) => { problems: Array<Problem>; issues: Array<Issue> } =
  Jsonl.parseDataset

/** The dataset or the results file could not be read or written. */
export class EvaluateError extends Schema.TaggedError<EvaluateError>()("EvaluateError", {
  path: Schema.String,
  message: Schema.String
}) {}

/** How far an evaluation has got, reported after each problem. */
export interface Progress {
  /** Problems with a result, resumed ones included. */
  readonly done: number
  readonly total: number
  /** Problems skipped because the results file already had them. */
  readonly resumed: number
  /** Model calls made by this run (resumed problems not included). */
  readonly calls: number
  readonly correct: number
  readonly failures: number
  readonly elapsedMs: number
}

/** The options of an evaluation. */
export interface Options<R> {
  /** Solves each problem; its architecture decides how. */
  readonly agent: Agent.Agent<R>
  /** Problems running at once (≥ 1, default 4). */
  readonly concurrency?: number | undefined
  /** The results file (JSONL), appended to and resumed from. Without it results are only returned. */
  readonly out?: string | undefined
  /** How answers and references are compared (default: the shared normalizer, `42.0` = `42`). */
  readonly normalize?: ((answer: string) => string) | undefined
  /** The answer in a run's output (default: the last `FINAL:` answer if there is one, else the whole output). */
  readonly extractAnswer?: ((output: string) => string) | undefined
  /** Let the architecture see each problem's reference (the Ensemble's judge is then told it). Default false. */
  readonly shareReference?: boolean | undefined
  /** Limits for each problem's run. */
  readonly budget?: Budget.Limits | undefined
  /** Called once the work is known, before the first problem runs. */
  readonly onStart?: ((start: { readonly total: number; readonly resumed: number; readonly issues: ReadonlyArray<Issue> }) => Effect.Effect<void>) | undefined
  /** Called after each problem's result is written. */
  readonly onResult?: ((result: ProblemResult, progress: Progress) => Effect.Effect<void>) | undefined
}

/** The summary of an evaluation, over every problem of the dataset that has a result. */
export type Summary = SummaryInternal.Summary

/** The summary of results (the latest per problem), for a dataset of `problems` problems. */
export const summarize: (
  results: ReadonlyArray<ProblemResult>,
  counts: { readonly problems: number; readonly resumed: number; readonly skippedLines: number }
) => Summary = SummaryInternal.summarize

/** The summary as an aligned two-column table, for terminals and logs. */
export const formatSummary: (summary: Summary) => string = SummaryInternal.formatSummary

/** What an evaluation answers: the summary, every problem's latest result in dataset order, the skipped lines. */
export interface Report {
  readonly summary: Summary
  readonly results: ReadonlyArray<ProblemResult>
  readonly issues: ReadonlyArray<Issue>
}

const OptionsSchema = Schema.Struct({
  agent: Opts.AgentSchema,
  concurrency: Opts.IntAtLeast(1).pipe(withDefault(4)),
  out: Schema.optional(Schema.String.check(Schema.isMinLength(1, { expected: "a non-empty path" }))),
  normalize: FunctionSchema<(answer: string) => string>("normalize").pipe(withDefault(normalizeAnswer)),
  extractAnswer: Schema.optional(FunctionSchema<(output: string) => string>("extractAnswer")),
  shareReference: Schema.Boolean.pipe(withDefault(false)),
  budget: Schema.optional(Budget.Limits),
  onStart: Schema.optional(FunctionSchema<NonNullable<Options<never>["onStart"]>>("onStart")),
  onResult: Schema.optional(FunctionSchema<NonNullable<Options<never>["onResult"]>>("onResult"))
})

/**
 * The default answer extraction: the last `FINAL:` answer of the output (looked for in its last 64 KiB), else the
 * whole output, trimmed. Linear in the output, like the default normalizer it feeds (see `core/internal/parse.ts`).
 */
export const defaultExtractAnswer = (output: string): string => finalAnswer(output, "last") ?? output.trim()

/**
 * Evaluates `options.agent` on the problems of the JSONL file at `dataset` (see the module comment). Fails only
 * when a file cannot be read or written, or on invalid options; a problem whose run fails is a result with an
 * `error`.
 */
export const run = <R>(
  dataset: string,
  options: Options<R>
): Effect.Effect<Report, EvaluateError | InvalidOptions, R | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const text = yield* fs.readFileString(dataset).pipe(
      Effect.mapError((error) => new EvaluateError({ path: dataset, message: `cannot read the dataset: ${error.message}` }))
    )
    const parsed = Jsonl.parseDataset(text, dataset)
    return yield* evaluate(parsed.problems, parsed.issues, options)
  }).pipe(Effect.withSpan("valet/Evaluate.run", { attributes: { dataset } }, { captureStackTrace: false }))

/** Evaluates `options.agent` on problems at hand (ids must be distinct: the later of two is skipped). */
export const runProblems = <R>(
  problems: ReadonlyArray<Problem>,
  options: Options<R>
): Effect.Effect<Report, EvaluateError | InvalidOptions, R | FileSystem.FileSystem> =>
  Effect.suspend(() => {
    const parsed = Jsonl.distinct(problems, "<problems>")
    return evaluate(parsed.problems, parsed.issues, options)
  })

const sessionPattern = /[^A-Za-z0-9.:-]+/g

const evaluate = <R>(
  problems: ReadonlyArray<Problem>,
  datasetIssues: ReadonlyArray<Issue>,
  options: Options<R>
): Effect.Effect<Report, EvaluateError | InvalidOptions, R | FileSystem.FileSystem> =>
  Effect.scoped(Effect.gen(function*() {
    const config = yield* Opts.decode("Evaluate", OptionsSchema, options)
    const agent = options.agent
    const normalize = config.normalize
    const extract = config.extractAnswer ?? defaultExtractAnswer
    const fs = yield* FileSystem.FileSystem
    const issues: Array<Issue> = [...datasetIssues]
    const latest = new Map<string, ProblemResult>()

    // Resume from the results file; make it safe to append to.
    let write: (result: ProblemResult) => Effect.Effect<void, EvaluateError> = () => Effect.void
    if (config.out !== undefined) {
      const out = config.out
      const failed = (what: string) => (error: { readonly message: string }) =>
        new EvaluateError({ path: out, message: `${what}: ${error.message}` })
      const exists = yield* fs.exists(out).pipe(Effect.mapError(failed("cannot check the results file")))
      if (exists) {
        const file = Jsonl.parseResults(yield* fs.readFileString(out).pipe(Effect.mapError(failed("cannot read the results file"))), out)
        issues.push(...file.issues)
        for (const record of file.records) latest.set(record.id, record)
        if (file.truncateTo !== undefined) {
          yield* fs.truncate(out, file.truncateTo).pipe(Effect.mapError(failed("cannot remove the cut-off last line")))
        }
        if (file.needsNewline) {
          yield* fs.writeFileString(out, "\n", { flag: "a" }).pipe(Effect.mapError(failed("cannot write the results file")))
        }
      }
      const handle = yield* fs.open(out, { flag: "a" }).pipe(Effect.mapError(failed("cannot open the results file")))
      const lock = yield* Semaphore.make(1)
      const encoder = new TextEncoder()
      // One write per record, one record at a time: a crash can cut only the line being written.
      write = (result) =>
        lock.withPermits(1)(
          handle.writeAll(encoder.encode(`${Jsonl.encodeResult(result)}\n`)).pipe(Effect.mapError(failed("cannot write the results file")))
        )
    }

    const todo = problems.filter((problem) => {
      const recorded = latest.get(problem.id)
      return recorded === undefined || recorded.error !== undefined
    })
    const resumed = problems.length - todo.length
    if (config.onStart !== undefined) yield* config.onStart({ total: problems.length, resumed, issues })

    const startedAt = yield* Clock.currentTimeMillis
    let done = resumed
    let calls = 0
    let correct = 0
    let failures = 0
    for (const problem of problems) {
      const recorded = latest.get(problem.id)
      if (recorded !== undefined && recorded.error === undefined && recorded.isCorrect === true) correct++
    }

    const solve = (problem: Problem) =>
      Effect.gen(function*() {
        const reference = problem.reference ?? null
        const sessionId = `eval-${problem.id.replace(sessionPattern, "-").slice(0, 100)}`
        const tracker = yield* Budget.make(config.budget ?? {})
        const begin = yield* Clock.currentTimeMillis
        let runEffect = Agent.run(agent, problem.problem, { sessionId }).pipe(Effect.provideService(Budget.Budget, tracker))
        if (config.shareReference) runEffect = runEffect.pipe(Reference.withReference(reference ?? undefined))
        // A defect in one problem's run (a bug in a custom policy, say) is that problem's failure, not the evaluation's.
        const outcome = yield* (runEffect as Effect.Effect<RunResult, AgentError, R>).pipe(
          Effect.map((result) => ({ _tag: "Right" as const, right: result })),
          Effect.catch((error) => Effect.succeed({ _tag: "Left" as const, left: `${error._tag}: ${error.message}` })),
          Effect.catchDefect((defect) =>
            Effect.succeed({ _tag: "Left" as const, left: `Defect: ${defect instanceof Error ? defect.message : String(defect)}` })
          )
        )
        const end = yield* Clock.currentTimeMillis
        const spent = yield* tracker.spent
        let result: ProblemResult
        if (outcome._tag === "Right") {
          const run = outcome.right
          const answer = extract(run.output)
          const metadata = run.metadata
          result = {
            id: problem.id,
            answer,
            reference,
            accepted: typeof metadata.accepted === "boolean" ? metadata.accepted : null,
            isCorrect: reference === null ? null : answer !== "" && normalize(answer) === normalize(reference),
            judgeIsCorrect: typeof metadata.judgeIsCorrect === "boolean" ? metadata.judgeIsCorrect : null,
            calls: run.modelCalls,
            rounds: typeof metadata.rounds === "number" && Number.isInteger(metadata.rounds) ? metadata.rounds : null,
            latencyMs: end - begin,
            tokens: run.usage.totalTokens,
            interrupted: run.interrupted,
            ...(run.interruptionReason !== undefined ? { interruptionReason: run.interruptionReason } : {}),
            sessionId
          }
        } else {
          result = {
            id: problem.id,
            answer: "",
            reference,
            accepted: null,
            isCorrect: reference === null ? null : false,
            judgeIsCorrect: null,
            calls: spent.calls,
            rounds: null,
            latencyMs: end - begin,
            tokens: spent.totalTokens,
            interrupted: false,
            error: outcome.left,
            sessionId
          }
        }
        yield* write(result)
        latest.set(problem.id, result)
        done++
        calls += result.calls
        if (result.isCorrect === true) correct++
        if (result.error !== undefined) failures++
        if (config.onResult !== undefined) {
          const now = yield* Clock.currentTimeMillis
          yield* config.onResult(result, { done, total: problems.length, resumed, calls, correct, failures, elapsedMs: now - startedAt })
        }
      })

    yield* Effect.forEach(todo, solve, { concurrency: config.concurrency, discard: true })

    const results = problems.flatMap((problem) => {
      const result = latest.get(problem.id)
      return result === undefined ? [] : [result]
    })
    return {
      summary: summarize(results, { problems: problems.length, resumed, skippedLines: issues.length }),
      results,
      issues
    }
  }))

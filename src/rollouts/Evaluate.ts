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
 * @example
 * ```ts
 * import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
 * import { Console, Effect, Layer } from "effect"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Evaluate from "valet/Evaluate"
 *
 * const solver = Agent.make({ name: "solver", instructions: "Answer with a line FINAL: <answer>." })
 *
 * // Each result is appended to results.jsonl as soon as it is known: run it again and it resumes.
 * const program = Effect.gen(function*() {
 *   const report = yield* Evaluate.runProblems(
 *     [{ id: "p1", problem: "2 + 2?", reference: "4" }, { id: "p2", problem: "3 * 3?", reference: "9" }],
 *     { agent: solver, concurrency: 2, out: "results.jsonl" }
 *   )
 *   yield* Console.log(Evaluate.formatSummary(report.summary))
 * })
 *
 * // `Evaluate.run("problems.jsonl", { agent: solver })` reads the problems from a JSONL file instead.
 * const main = program.pipe(
 *   Effect.provide(Layer.merge(ScriptedModel.layer(["FINAL: 4", "FINAL: 9"]), NodeFileSystem.layer))
 * )
 * ```
 *
 * @since 0.1.0
 */
import { Effect, type FileSystem, Schema } from "effect"
import type * as Agent from "../core/Agent.js"
import type { InvalidOptions } from "../core/AgentError.js"
import * as Budget from "../core/Budget.js"
import * as Jsonl from "./internal/evaluate/jsonl.js"
import * as Loop from "./internal/evaluate/loop.js"
import * as Solve from "./internal/evaluate/solve.js"
import * as Opts from "../core/internal/options.js"
import { finalAnswer } from "../core/internal/parse.js"
import * as SummaryInternal from "./internal/evaluate/summary.js"

/**
 * One problem of a dataset: `id` (text or number), `problem`, and optionally `reference`.
 *
 * @since 0.1.0
 * @category models
 */
export const Problem = Jsonl.Problem
/**
 * One problem of a dataset.
 *
 * @since 0.1.0
 * @category models
 */
export type Problem = Jsonl.Problem

/**
 * One problem's result, as a line of the results file (snake case on disk).
 *
 * @since 0.1.0
 * @category models
 */
export const ProblemResult = Jsonl.ProblemResult
/**
 * One problem's result.
 *
 * @since 0.1.0
 * @category models
 */
export type ProblemResult = Jsonl.ProblemResult

/**
 * A skipped line of the dataset or the results file, with its line number and why.
 *
 * @since 0.1.0
 * @category models
 */
export type Issue = Jsonl.Issue

/**
 * Reads a dataset's text: its problems, and the malformed or duplicate lines skipped.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseDataset: (text: string, path: string) => { problems: Array<Problem>; issues: Array<Issue> } =
  Jsonl.parseDataset

/**
 * The dataset or the results file could not be read or written.
 *
 * @since 0.1.0
 * @category errors
 */
export const EvaluateError = Loop.EvaluateError
/**
 * The dataset or the results file could not be read or written.
 *
 * @since 0.1.0
 * @category errors
 */
export type EvaluateError = Loop.EvaluateError

/**
 * How far an evaluation has got, reported after each problem.
 *
 * @since 0.1.0
 * @category models
 */
export type Progress = Loop.Progress

/**
 * The options of an evaluation.
 *
 * @since 0.1.0
 * @category options
 */
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

/**
 * The summary of an evaluation, over every problem of the dataset that has a result.
 *
 * @since 0.1.0
 * @category models
 */
export type Summary = SummaryInternal.Summary

/**
 * The summary of results (the latest per problem), for a dataset of `problems` problems.
 *
 * @since 0.1.0
 * @category summaries
 */
export const summarize: (
  results: ReadonlyArray<ProblemResult>,
  counts: { readonly problems: number; readonly resumed: number; readonly skippedLines: number }
) => Summary = SummaryInternal.summarize

/**
 * The summary as an aligned two-column table, for terminals and logs.
 *
 * @since 0.1.0
 * @category summaries
 */
export const formatSummary: (summary: Summary) => string = SummaryInternal.formatSummary

/**
 * What an evaluation answers: the summary, every problem's latest result in dataset order, the skipped lines.
 *
 * @since 0.1.0
 * @category models
 */
export type Report = Loop.Report

const OptionsSchema = Schema.Struct({ agent: Opts.AgentSchema, ...Loop.optionFields })

/**
 * The default answer extraction: the last `FINAL:` answer of the output (looked for in its last 64 KiB), else the
 * whole output, trimmed. Linear in the output, like the default normalizer it feeds (see `core/internal/parse.ts`).
 *
 * @since 0.1.0
 * @category utils
 */
export const defaultExtractAnswer = (output: string): string => finalAnswer(output, "last") ?? output.trim()

/**
 * Evaluates `options.agent` on the problems of the JSONL file at `dataset` (see the module comment). Fails only
 * when a file cannot be read or written, or on invalid options; a problem whose run fails is a result with an
 * `error`.
 *
 * @since 0.1.0
 * @category running
 */
export const run = <R>(
  dataset: string,
  options: Options<R>
): Effect.Effect<Report, EvaluateError | InvalidOptions, R | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const parsed = yield* Loop.readDataset(dataset)
    return yield* evaluate(parsed.problems, parsed.issues, options)
  }).pipe(Effect.withSpan("valet/Evaluate.run", { attributes: { dataset } }, { captureStackTrace: false }))

/**
 * Evaluates `options.agent` on problems at hand (ids must be distinct: the later of two is skipped).
 *
 * @since 0.1.0
 * @category running
 */
export const runProblems = <R>(
  problems: ReadonlyArray<Problem>,
  options: Options<R>
): Effect.Effect<Report, EvaluateError | InvalidOptions, R | FileSystem.FileSystem> =>
  Effect.suspend(() => {
    const parsed = Jsonl.distinct(problems, "<problems>")
    return evaluate(parsed.problems, parsed.issues, options)
  })

const evaluate = <R>(
  problems: ReadonlyArray<Problem>,
  datasetIssues: ReadonlyArray<Issue>,
  options: Options<R>
): Effect.Effect<Report, EvaluateError | InvalidOptions, R | FileSystem.FileSystem> =>
  Effect.flatMap(Opts.decode("Evaluate", OptionsSchema, options), (config) =>
    Loop.evaluate(problems, datasetIssues, {
      concurrency: config.concurrency,
      out: config.out,
      normalize: config.normalize,
      extract: config.extractAnswer ?? defaultExtractAnswer,
      onStart: config.onStart,
      onResult: config.onResult
    }, (problem) =>
      Solve.solve(options.agent, problem, { budget: config.budget, shareReference: config.shareReference })))

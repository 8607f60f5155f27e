/**
 * The evaluation loop: resume from the results file (repairing a line cut off mid-write), run the problems still
 * to do several at once through a given solver, append each record as soon as it is known, report progress, and
 * answer the summary. `Evaluate` runs it with a solver that runs the agent in this process; `Durable` with one that
 * executes each problem as a workflow on the runners.
 */
import { Clock, Effect, FileSystem, Schema, Semaphore } from "effect"
import * as Budget from "../../../core/Budget.js"
import { FunctionSchema, IntAtLeast, withDefault } from "../../../core/internal/decode.js"
import { normalizeAnswer } from "../../../core/internal/parse.js"
import * as Jsonl from "./jsonl.js"
import * as Solve from "./solve.js"
import * as SummaryInternal from "./summary.js"

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

/** What an evaluation answers: the summary, every problem's latest result in dataset order, the skipped lines. */
export interface Report {
  readonly summary: SummaryInternal.Summary
  readonly results: ReadonlyArray<Jsonl.ProblemResult>
  readonly issues: ReadonlyArray<Jsonl.Issue>
}

/** The loop's settings, already checked. */
export interface LoopOptions {
  readonly concurrency: number
  readonly out?: string | undefined
  readonly normalize: (answer: string) => string
  readonly extract: (output: string) => string
  readonly onStart?:
    | ((start: { readonly total: number; readonly resumed: number; readonly issues: ReadonlyArray<Jsonl.Issue> }) => Effect.Effect<void>)
    | undefined
  readonly onResult?: ((result: Jsonl.ProblemResult, progress: Progress) => Effect.Effect<void>) | undefined
}

/** The options every evaluation takes (`Evaluate.run`'s and `Durable.evaluate`'s), checked, with their defaults. */
export const optionFields = {
  concurrency: IntAtLeast(1).pipe(withDefault(4)),
  out: Schema.optional(Schema.String.check(Schema.isMinLength(1, { expected: "a non-empty path" }))),
  normalize: FunctionSchema<(answer: string) => string>("normalize").pipe(withDefault(normalizeAnswer)),
  extractAnswer: Schema.optional(FunctionSchema<(output: string) => string>("extractAnswer")),
  shareReference: Schema.Boolean.pipe(withDefault(false)),
  budget: Schema.optional(Budget.Limits),
  onStart: Schema.optional(FunctionSchema<NonNullable<LoopOptions["onStart"]>>("onStart")),
  onResult: Schema.optional(FunctionSchema<NonNullable<LoopOptions["onResult"]>>("onResult"))
}

/** Reads a dataset file: its problems, and the malformed or duplicate lines skipped. */
export const readDataset = (
  dataset: string
): Effect.Effect<{ problems: Array<Jsonl.Problem>; issues: Array<Jsonl.Issue> }, EvaluateError, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) =>
    fs.readFileString(dataset).pipe(
      Effect.mapError((error) => new EvaluateError({ path: dataset, message: `cannot read the dataset: ${error.message}` })),
      Effect.map((text) => Jsonl.parseDataset(text, dataset))
    ))

/**
 * Runs the problems not yet recorded through `solve` and answers the report. `solve` is told how many failed records
 * the problem already has in the results file (a durable evaluation keys its next attempt by it).
 */
export const evaluate = <E, R>(
  problems: ReadonlyArray<Jsonl.Problem>,
  datasetIssues: ReadonlyArray<Jsonl.Issue>,
  options: LoopOptions,
  solve: (problem: Jsonl.Problem, failedBefore: number) => Effect.Effect<Solve.Outcome, E, R>
): Effect.Effect<Report, EvaluateError | E, R | FileSystem.FileSystem> =>
  Effect.scoped(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const issues: Array<Jsonl.Issue> = [...datasetIssues]
    const latest = new Map<string, Jsonl.ProblemResult>()
    const failedBefore = new Map<string, number>()

    // Resume from the results file; make it safe to append to.
    let write: (result: Jsonl.ProblemResult) => Effect.Effect<void, EvaluateError> = () => Effect.void
    if (options.out !== undefined) {
      const out = options.out
      const failed = (what: string) => (error: { readonly message: string }) =>
        new EvaluateError({ path: out, message: `${what}: ${error.message}` })
      const exists = yield* fs.exists(out).pipe(Effect.mapError(failed("cannot check the results file")))
      if (exists) {
        const file = Jsonl.parseResults(yield* fs.readFileString(out).pipe(Effect.mapError(failed("cannot read the results file"))), out)
        issues.push(...file.issues)
        for (const record of file.records) {
          latest.set(record.id, record)
          if (record.error !== undefined) failedBefore.set(record.id, (failedBefore.get(record.id) ?? 0) + 1)
        }
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
    if (options.onStart !== undefined) yield* options.onStart({ total: problems.length, resumed, issues })

    const startedAt = yield* Clock.currentTimeMillis
    let done = resumed
    let calls = 0
    let correct = 0
    let failures = 0
    for (const problem of problems) {
      const recorded = latest.get(problem.id)
      if (recorded !== undefined && recorded.error === undefined && recorded.isCorrect === true) correct++
    }

    const runOne = (problem: Jsonl.Problem) =>
      Effect.gen(function*() {
        const result = Solve.recordOf(problem, yield* solve(problem, failedBefore.get(problem.id) ?? 0), options.normalize, options.extract)
        yield* write(result)
        latest.set(problem.id, result)
        done++
        calls += result.calls
        if (result.isCorrect === true) correct++
        if (result.error !== undefined) failures++
        if (options.onResult !== undefined) {
          const now = yield* Clock.currentTimeMillis
          yield* options.onResult(result, { done, total: problems.length, resumed, calls, correct, failures, elapsedMs: now - startedAt })
        }
      })

    yield* Effect.forEach(todo, runOne, { concurrency: options.concurrency, discard: true })

    const results = problems.flatMap((problem) => {
      const result = latest.get(problem.id)
      return result === undefined ? [] : [result]
    })
    return {
      summary: SummaryInternal.summarize(results, { problems: problems.length, resumed, skippedLines: issues.length }),
      results,
      issues
    }
  }))

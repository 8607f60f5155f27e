/**
 * The summary of an evaluation's results: accuracy over the problems with a reference, calls per problem, correct
 * answers per 100 calls, the judge's agreement with the reference, and a two-column table of it.
 */
import type { ProblemResult } from "./jsonl.js"

/** The summary of an evaluation, over every problem of the dataset that has a result. */
export interface Summary {
  /** Valid problems in the dataset. */
  readonly problems: number
  /** Problems with a result (this run's and resumed ones). */
  readonly completed: number
  /** Problems skipped because they were already recorded. */
  readonly resumed: number
  /** Problems whose run failed (see their `error`). */
  readonly failures: number
  /** Completed problems with a reference: the ones accuracy is over. */
  readonly scored: number
  readonly correct: number
  /** `correct / scored`; null when nothing could be scored. */
  readonly accuracy: number | null
  /** Problems whose answer the architecture accepted (`accepted: true`). */
  readonly accepted: number
  readonly totalCalls: number
  /** Model calls per completed problem. */
  readonly meanCalls: number | null
  /** Correct answers per 100 model calls spent on scored problems: accuracy per call, the ensemble's currency. */
  readonly accuracyPer100Calls: number | null
  /** How often the judge's verdict agreed with `is_correct`, where both exist. */
  readonly judgeAgreement: number | null
  readonly meanLatencyMs: number | null
  /** Lines skipped in the dataset and the results file. */
  readonly skippedLines: number
}

const round4 = (n: number): number => Math.round(n * 10_000) / 10_000

/** The summary of results (the latest per problem), for a dataset of `problems` problems. */
export const summarize = (
  results: ReadonlyArray<ProblemResult>,
  counts: { readonly problems: number; readonly resumed: number; readonly skippedLines: number }
): Summary => {
  let failures = 0
  let scored = 0
  let correct = 0
  let accepted = 0
  let totalCalls = 0
  let scoredCalls = 0
  let latency = 0
  let judged = 0
  let agreed = 0
  for (const result of results) {
    if (result.error !== undefined) failures++
    if (result.accepted === true) accepted++
    totalCalls += result.calls
    latency += result.latencyMs
    if (result.isCorrect !== null) {
      scored++
      scoredCalls += result.calls
      if (result.isCorrect) correct++
      if (result.judgeIsCorrect !== null) {
        judged++
        if (result.judgeIsCorrect === result.isCorrect) agreed++
      }
    }
  }
  const completed = results.length
  return {
    problems: counts.problems,
    completed,
    resumed: counts.resumed,
    failures,
    scored,
    correct,
    accuracy: scored > 0 ? round4(correct / scored) : null,
    accepted,
    totalCalls,
    meanCalls: completed > 0 ? round4(totalCalls / completed) : null,
    accuracyPer100Calls: scoredCalls > 0 ? round4((correct * 100) / scoredCalls) : null,
    judgeAgreement: judged > 0 ? round4(agreed / judged) : null,
    meanLatencyMs: completed > 0 ? Math.round(latency / completed) : null,
    skippedLines: counts.skippedLines
  }
}

const percent = (n: number | null): string => (n === null ? "—" : `${(n * 100).toFixed(1)} %`)
const num = (n: number | null, digits = 2): string => (n === null ? "—" : n.toFixed(digits))

/** The summary as an aligned two-column table, for terminals and logs. */
export const formatSummary = (summary: Summary): string => {
  const rows: Array<readonly [string, string]> = [
    ["problems", `${summary.completed} of ${summary.problems} done${summary.resumed > 0 ? ` (${summary.resumed} resumed)` : ""}`],
    ["accuracy", `${percent(summary.accuracy)} (${summary.correct} of ${summary.scored} with a reference)`],
    ["accepted", String(summary.accepted)],
    ["model calls", `${summary.totalCalls} (${num(summary.meanCalls)} per problem)`],
    ["correct per 100 calls", num(summary.accuracyPer100Calls)],
    ["judge agreement", percent(summary.judgeAgreement)],
    ["mean latency", summary.meanLatencyMs === null ? "—" : `${summary.meanLatencyMs} ms`],
    ["failures", String(summary.failures)],
    ["skipped lines", String(summary.skippedLines)]
  ]
  const width = Math.max(...rows.map(([label]) => label.length))
  return rows.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join("\n")
}

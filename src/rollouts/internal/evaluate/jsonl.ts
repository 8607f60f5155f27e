/**
 * The two JSONL files of an evaluation: the dataset (`{id, problem, reference}` per line) and the results (one
 * record per problem, appended as problems finish). Every line is decoded with a schema; a bad one is reported
 * with its line number and skipped, never guessed at. A results file whose last line has no newline was cut
 * mid-write: that partial line is reported and cut off before anything is appended, so it never merges with the
 * next record.
 */
import { Result, Schema, SchemaTransformation } from "effect"
import { describeIssue } from "../../../core/internal/decode.js"

/** A line that was skipped: which file, which line (from 1), and why. */
export interface Issue {
  readonly source: "dataset" | "results"
  readonly path: string
  readonly line: number
  readonly message: string
}

/** A JSON number read as text (`3` → `"3"`); written back as a number. */
const NumberAsText = Schema.Number.pipe(
  Schema.decodeTo(Schema.String, SchemaTransformation.transform({ decode: (n: number) => String(n), encode: (s: string) => Number(s) }))
)
const Id = Schema.Union([Schema.String.check(Schema.isMinLength(1, { expected: "a non-empty string" })), NumberAsText])
const Reference = Schema.Union([Schema.String, NumberAsText])

/** One problem of a dataset. Numbers are accepted for `id` and `reference` and read as text. */
export const Problem = Schema.Struct({
  id: Id,
  problem: Schema.String.check(Schema.isMinLength(1, { expected: "a non-empty string" })),
  reference: Schema.optional(Schema.NullOr(Reference))
})
/** One problem of a dataset. */
export type Problem = typeof Problem.Type

const decodeProblem = Schema.decodeUnknownResult(Problem)

/** A JSON line as a value of `decode`, or what is wrong with it on one line. */
const decodeLine = <A>(
  line: string,
  decode: (json: unknown) => Result.Result<A, Schema.SchemaError>
): Result.Result<A, string> => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (error) {
    return Result.fail(`not JSON (${error instanceof Error ? error.message : String(error)})`)
  }
  return Result.mapError(decode(json), (error) => describeIssue(error.issue, json))
}

/** The problems of a dataset's text, with the lines skipped (malformed, or an id seen before). */
export const parseDataset = (text: string, path: string): { problems: Array<Problem>; issues: Array<Issue> } => {
  const problems: Array<Problem> = []
  const issues: Array<Issue> = []
  const seen = new Map<string, number>()
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim()
    if (line === "") continue
    const decoded = decodeLine(line, decodeProblem)
    if (Result.isFailure(decoded)) {
      issues.push({ source: "dataset", path, line: i + 1, message: decoded.failure })
      continue
    }
    const first = seen.get(decoded.success.id)
    if (first !== undefined) {
      issues.push({ source: "dataset", path, line: i + 1, message: `id ${JSON.stringify(decoded.success.id)} is already used on line ${first}` })
      continue
    }
    seen.set(decoded.success.id, i + 1)
    problems.push(decoded.success)
  }
  return { problems, issues }
}

/** The problems with distinct ids; a later duplicate is reported (by its position, from 1) and skipped. */
export const distinct = (problems: ReadonlyArray<Problem>, path: string): { problems: Array<Problem>; issues: Array<Issue> } => {
  const seen = new Map<string, number>()
  const out: Array<Problem> = []
  const issues: Array<Issue> = []
  problems.forEach((problem, i) => {
    const first = seen.get(problem.id)
    if (first !== undefined) {
      issues.push({ source: "dataset", path, line: i + 1, message: `id ${JSON.stringify(problem.id)} is already used by problem ${first}` })
      return
    }
    seen.set(problem.id, i + 1)
    out.push(problem)
  })
  return { problems: out, issues }
}

/** One problem's result, as a line of the results file (snake case on disk). */
export const ProblemResult = Schema.Struct({
  id: Schema.String,
  answer: Schema.String,
  reference: Schema.NullOr(Schema.String),
  /** Whether the architecture accepted its answer (Ensemble: judged and accepted); null when it does not say. */
  accepted: Schema.NullOr(Schema.Boolean),
  /** The normalized answer against the normalized reference; null without a reference. */
  isCorrect: Schema.NullOr(Schema.Boolean),
  /** The architecture's judge's own verdict, beside `isCorrect`; null when there is none. */
  judgeIsCorrect: Schema.NullOr(Schema.Boolean),
  calls: Schema.Int,
  rounds: Schema.NullOr(Schema.Int),
  latencyMs: Schema.Number,
  tokens: Schema.Int,
  interrupted: Schema.Boolean,
  interruptionReason: Schema.optional(Schema.String),
  /** Why the problem failed (`<ErrorTag>: <message>`); such a problem is run again on resume. */
  error: Schema.optional(Schema.String),
  sessionId: Schema.String
}).pipe(Schema.encodeKeys({
  isCorrect: "is_correct",
  judgeIsCorrect: "judge_is_correct",
  latencyMs: "latency_ms",
  interruptionReason: "interruption_reason",
  sessionId: "session_id"
}))
/** One problem's result. */
export type ProblemResult = typeof ProblemResult.Type

const decodeResult = Schema.decodeUnknownResult(ProblemResult)
const encodeResultJson = Schema.encodeSync(ProblemResult)

/** A record as one line of JSON (no newline). */
export const encodeResult = (record: ProblemResult): string => JSON.stringify(encodeResultJson(record))

/** What a results file holds, and how to append to it safely. */
export interface ResultsFile {
  /** The records, in file order. */
  readonly records: Array<ProblemResult>
  readonly issues: Array<Issue>
  /** Set when the last line was cut mid-write: the file must be cut to this many bytes before appending. */
  readonly truncateTo: number | undefined
  /** The last line is a complete record without its newline: write one before appending. */
  readonly needsNewline: boolean
}

/** Reads the text of a results file (see the module comment for the last line). */
export const parseResults = (text: string, path: string): ResultsFile => {
  const records: Array<ProblemResult> = []
  const issues: Array<Issue> = []
  const lines = text.split("\n")
  // The text after the last newline: "" for a well-terminated file.
  const tail = lines.pop()!
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim()
    if (line === "") continue
    const decoded = decodeLine(line, decodeResult)
    if (Result.isFailure(decoded)) issues.push({ source: "results", path, line: i + 1, message: decoded.failure })
    else records.push(decoded.success)
  }
  let truncateTo: number | undefined
  let needsNewline = false
  if (tail.trim() !== "") {
    const decoded = decodeLine(tail.trim(), decodeResult)
    if (Result.isSuccess(decoded)) {
      records.push(decoded.success)
      needsNewline = true
    } else {
      truncateTo = Buffer.byteLength(text) - Buffer.byteLength(tail)
      issues.push({
        source: "results",
        path,
        line: lines.length + 1,
        message: "the last line was cut off mid-write (no newline, not a whole record): it is removed and its problem runs again"
      })
    }
  } else if (tail !== "") {
    needsNewline = true
  }
  return { records, issues, truncateTo, needsNewline }
}

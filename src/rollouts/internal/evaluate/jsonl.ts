/**
 * The two JSONL files of an evaluation: the dataset (`{id, problem, reference}` per line) and the results (one
 * record per problem, appended as problems finish). Every line is decoded with a schema; a bad one is reported
 * with its line number and skipped, never guessed at. A results file whose last line has no newline was cut
 * mid-write: that partial line is reported and cut off before anything is appended, so it never merges with the
 * next record.
 */
import { Either, ParseResult, Schema } from "effect"

/** A line that was skipped: which file, which line (from 1), and why. */
export interface Issue {
  readonly source: "dataset" | "results"
  readonly path: string
  readonly line: number
  readonly message: string
}

const Id = Schema.Union(Schema.String.pipe(Schema.minLength(1)), Schema.transform(Schema.Number, Schema.String, {
  strict: true,
  decode: (n) => String(n),
  encode: (s) => Number(s)
}))
const Reference = Schema.Union(Schema.String, Schema.transform(Schema.Number, Schema.String, {
  strict: true,
  decode: (n) => String(n),
  encode: (s) => Number(s)
}))

/** One problem of a dataset. Numbers are accepted for `id` and `reference` and read as text. */
export const Problem = Schema.Struct({
  id: Id,
  problem: Schema.String.pipe(Schema.minLength(1, { message: () => "the problem is empty" })),
  reference: Schema.optional(Schema.NullOr(Reference))
})
/** One problem of a dataset. */
export type Problem = typeof Problem.Type

const problemLine = Schema.decodeUnknownEither(Schema.parseJson(Problem))

const formatError = (error: ParseResult.ParseError): string =>
  ParseResult.TreeFormatter.formatErrorSync(error).replace(/\s*\n\s*/g, " ")

/** The problems of a dataset's text, with the lines skipped (malformed, or an id seen before). */
export const parseDataset = (text: string, path: string): { problems: Array<Problem>; issues: Array<Issue> } => {
  const problems: Array<Problem> = []
  const issues: Array<Issue> = []
  const seen = new Map<string, number>()
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim()
    if (line === "") continue
    const decoded = problemLine(line)
    if (Either.isLeft(decoded)) {
      issues.push({ source: "dataset", path, line: i + 1, message: formatError(decoded.left) })
      continue
    }
    const first = seen.get(decoded.right.id)
    if (first !== undefined) {
      issues.push({ source: "dataset", path, line: i + 1, message: `id ${JSON.stringify(decoded.right.id)} is already used on line ${first}` })
      continue
    }
    seen.set(decoded.right.id, i + 1)
    problems.push(decoded.right)
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
  isCorrect: Schema.propertySignature(Schema.NullOr(Schema.Boolean)).pipe(Schema.fromKey("is_correct")),
  /** The architecture's judge's own verdict, beside `isCorrect`; null when there is none. */
  judgeIsCorrect: Schema.propertySignature(Schema.NullOr(Schema.Boolean)).pipe(Schema.fromKey("judge_is_correct")),
  calls: Schema.Int,
  rounds: Schema.NullOr(Schema.Int),
  latencyMs: Schema.propertySignature(Schema.Number).pipe(Schema.fromKey("latency_ms")),
  tokens: Schema.Int,
  interrupted: Schema.Boolean,
  interruptionReason: Schema.optional(Schema.String).pipe(Schema.fromKey("interruption_reason")),
  /** Why the problem failed (`<ErrorTag>: <message>`); such a problem is run again on resume. */
  error: Schema.optional(Schema.String),
  sessionId: Schema.propertySignature(Schema.String).pipe(Schema.fromKey("session_id"))
})
/** One problem's result. */
export type ProblemResult = typeof ProblemResult.Type

const ResultLine = Schema.parseJson(ProblemResult)
const resultLine = Schema.decodeUnknownEither(ResultLine)

/** A record as one line of JSON (no newline). */
export const encodeResult: (record: ProblemResult) => string = Schema.encodeSync(ResultLine)

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
    const decoded = resultLine(line)
    if (Either.isLeft(decoded)) issues.push({ source: "results", path, line: i + 1, message: formatError(decoded.left) })
    else records.push(decoded.right)
  }
  let truncateTo: number | undefined
  let needsNewline = false
  if (tail.trim() !== "") {
    const decoded = resultLine(tail.trim())
    if (Either.isRight(decoded)) {
      records.push(decoded.right)
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

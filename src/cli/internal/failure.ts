/**
 * The failure a command ends with when it ran but did not do what was asked.
 */
import { Effect, Schema } from "effect"

/**
 * The command ran but did not do what was asked: an empty answer, problems or tasks that failed. Its message is
 * the line printed; the exit code is 1.
 */
export class CommandFailed extends Schema.TaggedError<CommandFailed>()("CommandFailed", {
  message: Schema.String
}) {}

/**
 * The command line asks for something that cannot be (flags that do not go together, a directory that is not there)
 * in a way the flags' own parsers cannot see: its message is the line printed; the exit code is 2, as for a bad flag.
 */
export class UsageError extends Schema.TaggedError<UsageError>()("UsageError", {
  message: Schema.String
}) {}

/** Why a run's result is not an answer — `the answer is empty`, with why when the run was interrupted — or `undefined`. */
export const notAnswered = (
  result: { readonly output: string; readonly interrupted: boolean; readonly interruptionReason?: string | undefined }
): string | undefined =>
  result.output.trim() === ""
    ? `the answer is empty${result.interrupted ? ` (the run was interrupted: ${result.interruptionReason})` : ""}`
    : undefined

/** Fails with `CommandFailed` when the answer is empty (whitespace only), saying why when the run was interrupted. */
export const requireAnswer = (
  result: { readonly output: string; readonly interrupted: boolean; readonly interruptionReason?: string | undefined }
): Effect.Effect<void, CommandFailed> => {
  const problem = notAnswered(result)
  return problem === undefined ? Effect.void : Effect.fail(new CommandFailed({ message: problem }))
}

/** Fails with `CommandFailed` when some of `total` items failed: `2 of 30 problems failed`. */
export const requireNoFailures = (
  failed: number,
  total: number,
  what: string,
  where?: string | undefined,
  verb = "failed"
): Effect.Effect<void, CommandFailed> =>
  failed > 0
    ? Effect.fail(new CommandFailed({ message: `${failed} of ${total} ${what} ${verb}${where !== undefined ? ` (see ${where})` : ""}` }))
    : Effect.void

/**
 * Fails with `CommandFailed` when some problems of an evaluation failed or ended without an answer (a run
 * interrupted by a model error or a budget before any answer): `2 of 30 problems failed or gave no answer`; or
 * when the dataset had no problem at all.
 */
export const requireAnswers = (
  dataset: string,
  results: ReadonlyArray<{ readonly answer: string; readonly error?: string | undefined }>,
  where: string | undefined
): Effect.Effect<void, CommandFailed> =>
  results.length === 0
    ? Effect.fail(new CommandFailed({ message: `${dataset} has no problem to evaluate` }))
    : requireNoFailures(
    results.filter((result) => result.error !== undefined || result.answer.trim() === "").length,
    results.length,
    "problems",
    where,
    "failed or gave no answer"
  )

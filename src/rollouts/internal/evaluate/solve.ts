/**
 * One problem of an evaluation, in two halves: running the agent on it (`solve`, answering an `Outcome`: what the
 * run produced, serializable so a durable workflow can store it), and turning an outcome into the problem's record
 * (`recordOf`, where the caller's answer extraction and normalizer apply). The split lets a durable evaluation run
 * the first half on a runner and the second in the process that writes the results file, with the records the same
 * as a run in one process.
 */
import { Clock, Effect, Schema } from "effect"
import * as Agent from "../../../core/Agent.js"
import type { AgentError, InvalidOptions } from "../../../core/AgentError.js"
import type { RunResult } from "../../../core/AgentEvent.js"
import * as Budget from "../../../core/Budget.js"
import * as Architecture from "../../../core/Architecture.js"
import type { Problem, ProblemResult } from "./jsonl.js"

/** What one problem's run produced: its output and counts, or why it failed. */
export const Outcome = Schema.Union([
  Schema.TaggedStruct("Solved", {
    output: Schema.String,
    accepted: Schema.NullOr(Schema.Boolean),
    judgeIsCorrect: Schema.NullOr(Schema.Boolean),
    rounds: Schema.NullOr(Schema.Int),
    calls: Schema.Int,
    tokens: Schema.Int,
    interrupted: Schema.Boolean,
    interruptionReason: Schema.optional(Schema.String),
    latencyMs: Schema.Number
  }),
  Schema.TaggedStruct("Failed", {
    error: Schema.String,
    calls: Schema.Int,
    tokens: Schema.Int,
    latencyMs: Schema.Number
  })
])
/** What one problem's run produced. */
export type Outcome = typeof Outcome.Type

const sessionPattern = /[^A-Za-z0-9.:-]+/g

/** The session id of a problem's run: `eval-<id>`, the id made safe and cut to 100 characters. */
const sessionIdOf = (problem: Problem): string => `eval-${problem.id.replace(sessionPattern, "-").slice(0, 100)}`

/** How a problem is run. */
export interface SolveOptions {
  readonly budget?: Budget.Limits | undefined
  readonly shareReference: boolean
}

/**
 * Runs `agent` on one problem. Fails only on a budget it cannot use: the run's failure (or a defect in it, a bug in a custom policy say) is
 * the problem's `Failed` outcome, not the evaluation's.
 */
export const solve = <R>(agent: Agent.Agent<R>, problem: Problem, options: SolveOptions): Effect.Effect<Outcome, InvalidOptions, R> =>
  Effect.gen(function*() {
    const tracker = yield* Budget.make(options.budget ?? {})
    const begin = yield* Clock.currentTimeMillis
    let runEffect = Agent.run(agent, problem.problem, { sessionId: sessionIdOf(problem) }).pipe(
      Effect.provideService(Budget.Budget, tracker)
    )
    if (options.shareReference) runEffect = runEffect.pipe(Architecture.withReference(problem.reference ?? undefined))
    const outcome = yield* (runEffect as Effect.Effect<RunResult, AgentError, R>).pipe(
      Effect.map((result) => ({ _tag: "Right" as const, right: result })),
      Effect.catch((error) => Effect.succeed({ _tag: "Left" as const, left: `${error._tag}: ${error.message}` })),
      Effect.catchDefect((defect) =>
        Effect.succeed({ _tag: "Left" as const, left: `Defect: ${defect instanceof Error ? defect.message : String(defect)}` })
      )
    )
    const latencyMs = (yield* Clock.currentTimeMillis) - begin
    if (outcome._tag === "Left") {
      const spent = yield* tracker.spent
      return { _tag: "Failed", error: outcome.left, calls: spent.calls, tokens: spent.totalTokens, latencyMs } as const
    }
    const run = outcome.right
    const metadata = run.metadata
    return {
      _tag: "Solved",
      output: run.output,
      accepted: typeof metadata.accepted === "boolean" ? metadata.accepted : null,
      judgeIsCorrect: typeof metadata.judgeIsCorrect === "boolean" ? metadata.judgeIsCorrect : null,
      rounds: typeof metadata.rounds === "number" && Number.isInteger(metadata.rounds) ? metadata.rounds : null,
      calls: run.modelCalls,
      tokens: run.usage.totalTokens,
      interrupted: run.interrupted,
      ...(run.interruptionReason !== undefined ? { interruptionReason: run.interruptionReason } : {}),
      latencyMs
    } as const
  })

/** The record of a problem's outcome, its answer read with `extract` and compared with `normalize`. */
export const recordOf = (
  problem: Problem,
  outcome: Outcome,
  normalize: (answer: string) => string,
  extract: (output: string) => string
): ProblemResult => {
  const reference = problem.reference ?? null
  const sessionId = sessionIdOf(problem)
  if (outcome._tag === "Failed") {
    return {
      id: problem.id,
      answer: "",
      reference,
      accepted: null,
      isCorrect: reference === null ? null : false,
      judgeIsCorrect: null,
      calls: outcome.calls,
      rounds: null,
      latencyMs: outcome.latencyMs,
      tokens: outcome.tokens,
      interrupted: false,
      error: outcome.error,
      sessionId
    }
  }
  const answer = extract(outcome.output)
  return {
    id: problem.id,
    answer,
    reference,
    accepted: outcome.accepted,
    isCorrect: reference === null ? null : answer !== "" && normalize(answer) === normalize(reference),
    judgeIsCorrect: outcome.judgeIsCorrect,
    calls: outcome.calls,
    rounds: outcome.rounds,
    latencyMs: outcome.latencyMs,
    tokens: outcome.tokens,
    interrupted: outcome.interrupted,
    ...(outcome.interruptionReason !== undefined ? { interruptionReason: outcome.interruptionReason } : {}),
    sessionId
  }
}

/**
 * Multi-agent debate: debaters answer, read each other, and answer again, until they agree or the rounds run out;
 * then a judge writes the answer, or a vote picks it.
 *
 * Round 0: every debater answers the question alone, all at once. Rounds 1..`rounds`: each debater sees the question
 * and the transcript of every earlier round — entries labelled `debater_<i>`, its own marked `(you)`, always in
 * debater order (never in the order they finished). After each round, the debate has converged when every pair of
 * that round's answers agrees: equal once case, whitespace and punctuation are set aside, or with a word-set
 * Jaccard similarity of at least `convergence`; the answer is then the one most debaters hold (ties: the lowest
 * debater), with no judge call. Otherwise, after the last round the `judge` (seeing the question and the whole
 * transcript) writes the answer; without a judge, a majority vote over the last round's normalized answers
 * (ties: the lowest debater).
 *
 * Sessions: `<parent>__debater_<i>_round_<r>` (i from 1), `<parent>__judge`. A debater or judge that fails fails
 * the run with its `SubAgentFailed` (the rule of every architecture); a spent budget ends the run interrupted
 * (`budget:<limit>`) with the majority answer of the last complete round.
 *
 * Events: `debate.round_started`, `debate.response`, `debate.converged`, `debate.judged`, `debate.voted`.
 *
 * @since 0.2.0
 */
import { Effect, Schema } from "effect"
import type * as Agent from "../core/Agent.js"
import type { InvalidOptions } from "../core/AgentError.js"
import * as Architecture from "../core/Architecture.js"
import * as Opts from "../core/internal/options.js"
import * as Roles from "../core/internal/roles.js"
import * as Template from "../core/internal/template.js"
import type * as Model from "../core/Model.js"

/** The architecture's name, as `RunStarted.architecture` reports it. */
export const name = "multi_agent_debate"

/** The options of MultiAgentDebate. */
export interface Options<RD, RJ = never> {
  /** Two or more debaters; each may carry its own model and instructions. */
  readonly debaters: ReadonlyArray<Agent.Agent<RD>>
  /** Writes the answer when the debaters do not converge; without one, a majority vote decides. */
  readonly judge?: Agent.Agent<RJ> | undefined
  /** Rounds after the first answers (≥ 1, default 2). */
  readonly rounds?: number | undefined
  /** Word-set Jaccard similarity at which two answers agree (in [0, 1], default 0.85). */
  readonly convergence?: number | undefined
  /** A debater's prompt after round 0 (`{question}`, `{transcript}`, `{round}`). */
  readonly debaterPrompt?: string | undefined
  /** The judge's prompt (`{question}`, `{transcript}`). */
  readonly judgePrompt?: string | undefined
}

/** A debater's default prompt after round 0. */
export const defaultDebaterPrompt = `{question}

This is round {round} of a debate. Here are the answers so far (yours are marked "(you)"):

{transcript}

Consider the other answers. Where they are right, take them up; where they are wrong, say why. Then give your own \
answer again, complete.`

/** The judge's default prompt. */
export const defaultJudgePrompt = `{question}

Debaters answered this in several rounds:

{transcript}

Weigh their arguments and write the one best final answer to the question.`

const OptionsSchema = Schema.Struct({
  debaters: Schema.Array(Opts.AgentSchema).check(Schema.isMinLength(2, { expected: "at least two debaters" })),
  judge: Schema.optional(Opts.AgentSchema),
  rounds: Opts.IntAtLeast(1).pipe(Opts.withDefault(2)),
  convergence: Opts.UnitInterval.pipe(Opts.withDefault(0.85)),
  debaterPrompt: Template.Template(["question", "transcript", "round"]).pipe(Opts.withDefault(defaultDebaterPrompt)),
  judgePrompt: Template.Template(["question", "transcript"]).pipe(Opts.withDefault(defaultJudgePrompt))
})
type Config = typeof OptionsSchema.Type

/**
 * MultiAgentDebate with options, checked here: fewer than two debaters, `rounds: 0`, a `convergence` outside
 * [0, 1] or a template with an unknown placeholder fail with `InvalidOptions`.
 */
export const make = <RD, RJ = never>(
  options: Options<RD, RJ>
): Effect.Effect<Architecture.Architecture<RD | RJ | Model.Model>, InvalidOptions> =>
  Effect.map(
    Opts.decode("MultiAgentDebate", OptionsSchema, options),
    (config) => Architecture.make({ name, program: program(config) }) as Architecture.Architecture<RD | RJ | Model.Model>
  )

/** `make` for a module-level value: the architecture, or the `InvalidOptions` thrown. */
export const makeUnsafe = <RD, RJ = never>(options: Options<RD, RJ>): Architecture.Architecture<RD | RJ | Model.Model> =>
  Opts.runUnsafe(make(options))

// ---------------------------------------------------------------------------------------------------------
// Agreement
// ---------------------------------------------------------------------------------------------------------

const maxCompareChars = 65_536

/** An answer with case, punctuation and runs of whitespace set aside. */
export const normalize = (answer: string): string =>
  (answer.length > maxCompareChars ? answer.slice(0, maxCompareChars) : answer)
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s]+/gu, " ")
    .replace(/\s+/g, " ")
    .trim()

/** The Jaccard similarity of two answers' sets of words (1 for two empty answers). */
export const jaccard = (a: string, b: string): number => {
  const left = new Set(normalize(a).split(" ").filter((word) => word !== ""))
  const right = new Set(normalize(b).split(" ").filter((word) => word !== ""))
  if (left.size === 0 && right.size === 0) return 1
  let shared = 0
  for (const word of left) if (right.has(word)) shared++
  return shared / (left.size + right.size - shared)
}

/** Whether two answers agree: equal once normalized, or similar enough. */
export const agree = (a: string, b: string, convergence: number): boolean =>
  normalize(a) === normalize(b) || jaccard(a, b) >= convergence

/** Whether every pair of a round's answers agrees. */
export const converged = (answers: ReadonlyArray<string>, convergence: number): boolean => {
  for (let i = 0; i < answers.length; i++) {
    for (let j = i + 1; j < answers.length; j++) if (!agree(answers[i]!, answers[j]!, convergence)) return false
  }
  return true
}

/**
 * The answer most debaters hold (normalized), as the lowest-numbered of them wrote it; ties go to the group whose
 * first member is the lowest debater. Answers `{ answer, votes, debater }` (debater from 1).
 */
export const majority = (answers: ReadonlyArray<string>) => {
  const groups = new Map<string, { first: number; votes: number }>()
  answers.forEach((answer, i) => {
    const key = normalize(answer)
    const group = groups.get(key)
    if (group === undefined) groups.set(key, { first: i, votes: 1 })
    else group.votes++
  })
  let best = { first: 0, votes: 0 }
  for (const group of groups.values()) {
    if (group.votes > best.votes || (group.votes === best.votes && group.first < best.first)) best = group
  }
  return { answer: answers[best.first] ?? "", votes: best.votes, debater: best.first + 1 }
}

// ---------------------------------------------------------------------------------------------------------
// Program
// ---------------------------------------------------------------------------------------------------------

/** The transcript of the rounds so far, for `viewer` (1-based; 0: the judge, who is nobody). */
const transcript = (rounds: ReadonlyArray<ReadonlyArray<string>>, viewer: number): string =>
  rounds.map((answers, r) =>
    `Round ${r}:\n` +
    answers.map((answer, i) => `- debater_${i + 1}${i + 1 === viewer ? " (you)" : ""}: ${answer.replace(/\s*\n\s*/g, " ")}`).join("\n")
  ).join("\n\n")

const program = (config: Config) => (input: Architecture.Input) =>
  Effect.gen(function*() {
    const rounds: Array<ReadonlyArray<string>> = []
    const metadata = (extra: Record<string, unknown>) => ({ rounds: rounds.length - 1, transcript: rounds, ...extra })
    const budgetStop = (reason: string) => ({
      output: rounds.length > 0 ? majority(rounds[rounds.length - 1]!).answer : "",
      interrupted: reason,
      metadata: metadata({ decided_by: "budget" })
    })

    for (let round = 0; round <= config.rounds; round++) {
      yield* Architecture.progress("debate.round_started", { round })
      // Every debater of a round sees the same earlier rounds, so they run at once; the transcript keeps their order.
      const earlier = rounds.slice()
      const ran = yield* Effect.forEach(config.debaters, (debater, i) =>
        Roles.runOrFail(
          debater,
          round === 0
            ? input.prompt
            : Template.fill(config.debaterPrompt, { question: input.prompt, transcript: transcript(earlier, i + 1), round: String(round) }),
          { role: "debater", index: `${i + 1}_round_${round}` }
        ), { concurrency: "unbounded" })
      const spent = ran.find((r) => r._tag === "Interrupted" && Roles.isBudget(r.reason))
      if (spent !== undefined && spent._tag === "Interrupted") return budgetStop(spent.reason)
      const answers = ran.map((r) => r.result.output)
      rounds.push(answers)
      for (const [i, answer] of answers.entries()) {
        yield* Architecture.progress("debate.response", { round, debater: i + 1, answer })
      }
      yield* Architecture.setOutput(majority(answers).answer)
      if (converged(answers, config.convergence)) {
        const held = majority(answers)
        yield* Architecture.progress("debate.converged", { round, debater: held.debater, votes: held.votes })
        return { output: held.answer, metadata: metadata({ decided_by: "convergence", converged_at: round }) }
      }
    }

    if (config.judge !== undefined) {
      const judged = yield* Roles.runOrFail(
        config.judge,
        Template.fill(config.judgePrompt, { question: input.prompt, transcript: transcript(rounds, 0) }),
        { role: "judge" }
      )
      if (judged._tag === "Interrupted") {
        if (Roles.isBudget(judged.reason)) return budgetStop(judged.reason)
        return { output: judged.result.output, interrupted: Roles.stopReason("judge", judged.reason), metadata: metadata({ decided_by: "judge" }) }
      }
      yield* Architecture.progress("debate.judged", { answer: judged.result.output })
      return { output: judged.result.output, metadata: metadata({ decided_by: "judge" }) }
    }
    const vote = majority(rounds[rounds.length - 1]!)
    yield* Architecture.progress("debate.voted", { debater: vote.debater, votes: vote.votes })
    return { output: vote.answer, metadata: metadata({ decided_by: "vote", votes: vote.votes }) }
  })

/**
 * Multi-agent debate: debaters answer, read each other, and answer again, until they agree or the rounds run out;
 * then a judge writes the answer, or a vote picks it.
 *
 * Round 0: every debater answers the task alone, all at once. Rounds 1..`maxRounds`: each debater sees the task
 * and the transcript of every earlier round — entries labelled `debater_<i>`, always in debater order (never in
 * the order they finished) — then which debater it is (`{debater}`). The transcript is the same text for every
 * debater and grows by a round at a time, so a server's prefix cache serves each debater the task and the debate so
 * far (`bench/prefix.ts`). A `debaterPrompt` without `{debater}` gets the transcript of valet 0.1 instead: each
 * debater's own entries marked `(you)`. After each round, the debate has converged when every pair of
 * that round's answers agrees: equal once case, whitespace and punctuation are set aside, or with a word-set
 * Jaccard similarity of at least `convergence`; the answer is then the one most debaters hold (ties: the lowest
 * debater), with no judge call. Otherwise, after the last round the `judge` (seeing the task and the whole
 * transcript) writes the answer; without a judge, a majority vote over the last round's normalized answers
 * (ties: the lowest debater).
 *
 * Sessions: `<parent>__debater_<i>_round_<r>` (i from 1), `<parent>__judge`. A debater or judge that fails fails
 * the run with its `SubAgentFailed` (the rule of every architecture). A spent budget ends the run interrupted
 * (`budget:<limit>`, `decided_by: "budget"`) with the majority answer of the last complete round; so does a
 * debater that stops at its own limit (`debater_<i>:round_<r>:<reason>`, `decided_by: "interrupted"`); a judge that
 * stops at its own limit ends it with its partial answer (`judge:<reason>`, `decided_by: "judge"`).
 *
 * Events: `multi_agent_debate.round_started`, `.response`, `.converged`, `.judged`, `.voted`.
 *
 * @example
 * ```ts
 * import { Effect, Layer } from "effect"
 * import { Agent, MultiAgentDebate, ScriptedModel } from "valet"
 *
 * // Each debater on its own scripted model: its answer in round 0, then in round 1.
 * const debater = (name: string, answers: Array<string>) =>
 *   Agent.make({ name, instructions: `You are ${name}.`, model: Layer.orDie(ScriptedModel.layer(answers)) })
 *
 * const moderator = Agent.make({
 *   name: "moderator",
 *   instructions: "",
 *   architecture: MultiAgentDebate.makeUnsafe({
 *     debaters: [debater("botanist", ["A fruit.", "A fruit, botanically."]), debater("chef", ["A vegetable.", "a fruit, botanically"])],
 *     maxRounds: 2
 *   }),
 *   // The debate itself calls no model: its debaters do.
 *   model: Layer.orDie(ScriptedModel.layer([]))
 * })
 * Effect.runPromise(Agent.run(moderator, "Is a tomato a fruit?")).then((result) =>
 *   console.log(result.output, result.metadata.decided_by) // "A fruit, botanically." "convergence"
 * )
 * ```
 *
 * @since 0.2.0
 */
import { Effect, Schema } from "effect"
import * as Agent from "../core/Agent.js"
import * as Architecture from "../core/Architecture.js"
import type * as Model from "../core/Model.js"

/**
 * A debater's default prompt after round 0; placeholders `{task}`, `{transcript}`, `{round}`, `{debater}` (its
 * label, `debater_<i>`). What every debater of a round shares comes first, what is its own last.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultDebaterPrompt = `{task}

A debate on this, round by round:

{transcript}

This is round {round}, and you are {debater}. Consider the other answers. Where they are right, take them up; \
where they are wrong, say why. Then give your own answer again, complete.`

/**
 * The judge's default prompt; placeholders `{task}`, `{transcript}`.
 *
 * @since 0.2.0
 * @category prompts
 */
export const defaultJudgePrompt = `{task}

Debaters answered this in several rounds:

{transcript}

Weigh their arguments and write the one best final answer to the question.`

// ---------------------------------------------------------------------------------------------------------
// Agreement
// ---------------------------------------------------------------------------------------------------------

const maxCompareChars = 65_536

/**
 * An answer with case, punctuation and runs of whitespace set aside.
 *
 * @since 0.2.0
 * @category agreement
 */
export const normalize = (answer: string): string =>
  (answer.length > maxCompareChars ? answer.slice(0, maxCompareChars) : answer)
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s]+/gu, " ")
    .replace(/\s+/g, " ")
    .trim()

/**
 * The Jaccard similarity of two answers' sets of words (1 for two empty answers).
 *
 * @since 0.2.0
 * @category agreement
 */
export const jaccard = (a: string, b: string): number => {
  const left = new Set(normalize(a).split(" ").filter((word) => word !== ""))
  const right = new Set(normalize(b).split(" ").filter((word) => word !== ""))
  if (left.size === 0 && right.size === 0) return 1
  let shared = 0
  for (const word of left) if (right.has(word)) shared++
  return shared / (left.size + right.size - shared)
}

/**
 * Whether two answers agree: equal once normalized, or similar enough.
 *
 * @since 0.2.0
 * @category agreement
 */
export const agree = (a: string, b: string, convergence: number): boolean =>
  normalize(a) === normalize(b) || jaccard(a, b) >= convergence

/**
 * Whether every pair of a round's answers agrees.
 *
 * @since 0.2.0
 * @category agreement
 */
export const converged = (answers: ReadonlyArray<string>, convergence: number): boolean => {
  for (let i = 0; i < answers.length; i++) {
    for (let j = i + 1; j < answers.length; j++) if (!agree(answers[i]!, answers[j]!, convergence)) return false
  }
  return true
}

/**
 * The answer most debaters hold (normalized), as the lowest-numbered of them wrote it; ties go to the group whose
 * first member is the lowest debater. Answers `{ answer, votes, debater }` (debater from 1).
 *
 * @since 0.2.0
 * @category agreement
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
// The architecture
// ---------------------------------------------------------------------------------------------------------

/** The transcript of the rounds so far, for `viewer` (1-based; 0: the judge, who is nobody). */
const transcript = (rounds: ReadonlyArray<ReadonlyArray<string>>, viewer: number): string =>
  rounds.map((answers, r) =>
    `Round ${r}:\n` +
    answers.map((answer, i) => `- debater_${i + 1}${i + 1 === viewer ? " (you)" : ""}: ${answer.replace(/\s*\n\s*/g, " ")}`).join("\n")
  ).join("\n\n")

const { agent, int, optional, template, unit, withDefault } = Architecture.option

/**
 * Three debaters on the run's model: what a debate without its own debaters has.
 *
 * @since 0.2.0
 * @category definition
 */
export const defaultDebaters: ReadonlyArray<Agent.Agent<Model.Model>> = [1, 2, 3].map((i) =>
  Agent.make({ name: `debater-${i}`, instructions: "Answer the question; defend or revise your answer when you see the others'." })
)

/**
 * Multi-agent debate, declared once: its name, options and program; `make`, `makeUnsafe`, `valet.yaml`'s and the
 * CLI's registries read it.
 *
 * @since 0.2.0
 * @category definition
 */
export const definition = Architecture.define({
  name: "multi_agent_debate",
  aliases: ["debate"],
  title: "MultiAgentDebate",
  description: "rounds of answers that read each other, until they agree; then a judge or a vote",
  options: {
    /** Two or more debaters; each may carry its own model and instructions. Default: three on the run's model. */
    debaters: Schema.Array(agent).check(Schema.isMinLength(2, { expected: "at least two debaters" })).pipe(
      withDefault(defaultDebaters)
    ),
    /** Writes the answer when the debaters do not converge; without one, a majority vote decides. */
    judge: optional(agent),
    /** Rounds after the first answers (≥ 1, default 2). */
    maxRounds: int(1).pipe(withDefault(2)),
    /** Word-set Jaccard similarity at which two answers agree (in [0, 1], default 0.85). */
    convergence: unit.pipe(withDefault(0.85)),
    /** A debater's prompt after round 0 (`{task}`, `{transcript}`, `{round}`, `{debater}`). */
    debaterPrompt: template(["task", "transcript", "round", "debater"]).pipe(withDefault(defaultDebaterPrompt)),
    /** The judge's prompt (`{task}`, `{transcript}`). */
    judgePrompt: template(["task", "transcript"]).pipe(withDefault(defaultJudgePrompt))
  },
  agentOptions: ["debaters.*", "judge"],
  deprecated: { rounds: "maxRounds" },
  program: (input, options) =>
    Effect.gen(function*() {
      const rounds: Array<ReadonlyArray<string>> = []
      const metadata = (extra: Record<string, unknown>) => ({ rounds: rounds.length - 1, transcript: rounds, ...extra })
      // What `decided_by` says when a stopped role ends the debate (the runtime reads the metadata then): `budget` for
      // a spent budget, else what stopped at its own limit — the judge, or a debater (`interrupted`).
      let stoppedBy = "budget"
      const noting = (by: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.tapError(effect, (error) =>
          Effect.sync(() => {
            if (error instanceof Architecture.RoleStopped && !error.reason.startsWith("budget:")) stoppedBy = by
          }))
      yield* Architecture.setMetadata(() => metadata({ decided_by: stoppedBy }))

      const namesDebater = options.debaterPrompt.includes("{debater}")
      for (let round = 0; round <= options.maxRounds; round++) {
        yield* Architecture.progress("multi_agent_debate.round_started", { round })
        // Every debater of a round sees the same earlier rounds, so they run at once; the transcript keeps their order.
        const earlier = rounds.slice()
        const answers = yield* Effect.forEach(options.debaters, (debater, i) =>
          Architecture.role(
            debater,
            round === 0
              ? input.prompt
              : Architecture.fill(options.debaterPrompt, {
                task: input.prompt,
                // One transcript for all when the prompt names the debater; valet 0.1's marked one otherwise.
                transcript: transcript(earlier, namesDebater ? 0 : i + 1),
                round: String(round),
                debater: `debater_${i + 1}`
              }),
            { role: "debater", index: `${i + 1}_round_${round}`, label: `debater_${i + 1}:round_${round}` }
          ).pipe(Effect.map((result) => result.output), noting("interrupted")), { concurrency: "unbounded" })
        rounds.push(answers)
        for (const [i, answer] of answers.entries()) {
          yield* Architecture.progress("multi_agent_debate.response", { round, debater: i + 1, answer })
        }
        yield* Architecture.setOutput(majority(answers).answer)
        if (converged(answers, options.convergence)) {
          const held = majority(answers)
          yield* Architecture.progress("multi_agent_debate.converged", { round, debater: held.debater, votes: held.votes })
          return { output: held.answer, metadata: metadata({ decided_by: "convergence", converged_at: round }) }
        }
      }

      if (options.judge !== undefined) {
        const judged = yield* Architecture.role(
          options.judge,
          Architecture.fill(options.judgePrompt, { task: input.prompt, transcript: transcript(rounds, 0) }),
          { role: "judge", answers: true }
        ).pipe(noting("judge"))
        yield* Architecture.progress("multi_agent_debate.judged", { answer: judged.output })
        return { output: judged.output, metadata: metadata({ decided_by: "judge" }) }
      }
      const vote = majority(rounds[rounds.length - 1]!)
      yield* Architecture.progress("multi_agent_debate.voted", { debater: vote.debater, votes: vote.votes })
      return { output: vote.answer, metadata: metadata({ decided_by: "vote", votes: vote.votes }) }
    })
})

/**
 * The architecture's name, as `RunStarted.architecture` reports it.
 *
 * @since 0.2.0
 * @category definition
 */
export const name = definition.name

/**
 * The options of MultiAgentDebate (`rounds` is still read, as `maxRounds`).
 *
 * @since 0.2.0
 * @category constructors
 */
export type Options = Architecture.OptionsOf<typeof definition>

/**
 * MultiAgentDebate with options, checked here: fewer than two debaters, `maxRounds: 0`, a `convergence` outside
 * [0, 1] or a template with an unknown placeholder fail with `InvalidOptions`.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = definition.make

/**
 * `make` for a module-level value: the architecture, or the `InvalidOptions` thrown.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeUnsafe = definition.makeUnsafe

/**
 * A debate with its defaults: three debaters on the run's model, two rounds, a majority vote.
 *
 * @since 0.2.0
 * @category constructors
 */
export const architecture: Architecture.Architecture<Model.Model> = definition.makeUnsafe()
